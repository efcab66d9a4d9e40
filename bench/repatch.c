/*
 * repatch: how long the world stops to re-patch many sites while threads run through them.
 *
 * Builds a code region of N sites, each a 5-byte NOP followed by a call-free body, ending in
 * `ret`; T threads call it in a loop (and sleep in nanosleep now and then, as servers do).
 * Then it flips every site between the NOP state and a call to a stub (`ret`) R times with the
 * real handshake (patcher/stw.c) and writer (patcher/text_poke.c), and prints the median and
 * maximum stop time and the threads parked.
 *
 * usage: repatch [SITES=100000] [THREADS=8] [ROUNDS=20]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ftr_patcher.h"

#define SITE_BYTES 8 /* 5-byte site + 3 bytes of filler per "function" */

static uint8_t *code, *stub;
static size_t nsites;
static atomic_int stop;
static atomic_long calls;

static void *runner(void *arg)
{
    long id = (long)arg;
    void (*fn)(void) = (void (*)(void))code;
    while (!atomic_load(&stop)) {
        fn(); /* runs through every site */
        atomic_fetch_add(&calls, 1);
        if (id % 2) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    return NULL;
}

struct job {
    struct ftr_poke *pokes;
    size_t n;
};

static int apply(void *arg)
{
    struct job *j = arg;
    return ftr_text_poke(j->pokes, j->n, NULL, 0) == 0 ? 0 : -1;
}

static uint64_t fix(void *arg, uint64_t ip)
{
    (void)arg;
    uint64_t base = (uint64_t)code;
    if (ip <= base || ip >= base + nsites * SITE_BYTES)
        return ip;
    uint64_t off = (ip - base) % SITE_BYTES;
    return off > 0 && off < 5 ? ip - off + 5 : ip;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
    nsites = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
    int nthreads = argc > 2 ? atoi(argv[2]) : 8;
    int rounds = argc > 3 ? atoi(argv[3]) : 20;
    char err[256];
    if (ftr_stw_init(SIGRTMIN + 7, err, sizeof err) < 0) {
        fprintf(stderr, "repatch: %s\n", err);
        return 1;
    }
    size_t len = (nsites * SITE_BYTES + 1 + 4095) & ~(size_t)4095;
    /* the stub page just below the code, within rel32 reach */
    uint8_t *area = mmap(NULL, len + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS,
                         -1, 0);
    if (area == MAP_FAILED)
        return 1;
    stub = area;
    code = area + 4096;
    stub[0] = 0xc3;
    for (size_t i = 0; i < nsites; i++) {
        uint8_t *s = code + i * SITE_BYTES;
        ftr_x86_gen_nop(s, 5);
        s[5] = 0x48, s[6] = 0x89, s[7] = 0xc0; /* mov %rax,%rax: a body */
    }
    code[nsites * SITE_BYTES] = 0xc3;
    mprotect(area, len + 4096, PROT_READ | PROT_EXEC);

    struct ftr_poke *to_call = calloc(nsites, sizeof *to_call);
    struct ftr_poke *to_nop = calloc(nsites, sizeof *to_nop);
    for (size_t i = 0; i < nsites; i++) {
        uint64_t at = (uint64_t)code + i * SITE_BYTES;
        struct ftr_poke *c = &to_call[i], *n = &to_nop[i];
        c->addr = n->addr = at;
        c->len = n->len = 5;
        ftr_x86_gen_nop(c->expect, 5);
        ftr_x86_gen_call(c->bytes, 5, at, (uint64_t)stub);
        memcpy(n->expect, c->bytes, 5);
        memcpy(n->bytes, c->expect, 5);
    }

    pthread_t th[64];
    for (long i = 0; i < nthreads && i < 64; i++)
        pthread_create(&th[i], NULL, runner, (void *)i);
    usleep(50000);

    uint64_t *ns = calloc((size_t)rounds, sizeof *ns);
    unsigned parked = 0, asleep = 0, moved = 0;
    for (int r = 0; r < rounds; r++) {
        struct job j = {r % 2 ? to_nop : to_call, nsites};
        struct ftr_stw_stats st;
        if (ftr_stw_run(apply, fix, &j, 2000, &st, err, sizeof err) < 0) {
            fprintf(stderr, "repatch: round %d: %s\n", r, err);
            return 1;
        }
        ns[r] = st.ns;
        parked += st.threads;
        asleep += st.asleep;
        moved += st.moved_ips;
        usleep(10000);
    }
    long before = atomic_load(&calls);
    usleep(20000);
    int alive = atomic_load(&calls) > before;
    atomic_store(&stop, 1);
    for (int i = 0; i < nthreads && i < 64; i++)
        pthread_join(th[i], NULL);
    qsort(ns, (size_t)rounds, sizeof *ns, cmp_u64);
    printf("%zu sites, %d threads, %d rounds: stop time median %.2f ms, max %.2f ms; "
           "per round %.1f threads parked, %.1f left asleep; %u moved out of a site; "
           "threads still running afterwards: %s\n",
           nsites, nthreads, rounds, (double)ns[rounds / 2] / 1e6,
           (double)ns[rounds - 1] / 1e6, (double)parked / rounds, (double)asleep / rounds,
           moved, alive ? "yes" : "NO");
    return alive ? 0 : 1;
}
