/*
 * repatch: re-patching many sites while threads run through them.
 *
 * Builds N functions, each a 5-byte site and `ret`; T threads call them (one after another,
 * every call timed with rdtsc) and half of them sleep 100 us in nanosleep now and then, as
 * servers do. Then every site is flipped between the NOP state and a call to a stub (`ret`),
 * R times, with the live breakpoint batch (patcher/text_poke.c: no thread is parked), or with
 * --park, the stop-the-world handshake (patcher/stw.c) around plain writes, as before.
 * Prints the re-patch time (median, max), the threads trapped per re-patch, the cost of one
 * trap, and the longest single call any thread saw with and without re-patching (wall time:
 * on a machine with fewer cores than threads this includes being descheduled).
 *
 * usage: repatch [--park] [SITES=100000] [THREADS=8] [ROUNDS=20]
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
#include <ucontext.h>
#include <unistd.h>

#include "ftr_patcher.h"

#define FN_BYTES 8 /* 5-byte site + ret + 2 bytes of padding per function */

static uint8_t *code, *stub;
static size_t nsites;
static atomic_int stop, measuring;
static atomic_long calls;
static uint64_t worst[64]; /* per thread: longest call while measuring (ticks) */

static inline uint64_t rdtsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
}

static void *runner(void *arg)
{
    long id = (long)arg;
    size_t i = (size_t)id * 7919;
    long n = 0;
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        for (int k = 0; k < 1000; k++) {
            i = (i + 104729) % nsites;
            void (*fn)(void) = (void (*)(void))(code + i * FN_BYTES);
            uint64_t t0 = rdtsc();
            fn();
            uint64_t d = rdtsc() - t0;
            if (d > worst[id] && atomic_load_explicit(&measuring, memory_order_relaxed))
                worst[id] = d;
        }
        n += 1000;
        if (id % 2) {
            struct timespec ts = {0, 100000};
            nanosleep(&ts, NULL);
        }
    }
    atomic_fetch_add(&calls, n);
    return NULL;
}

struct job {
    struct ftr_poke *pokes;
    size_t n;
};

static int apply_alone(void *arg)
{
    struct job *j = arg;
    return ftr_text_poke(j->pokes, j->n, NULL, 0) == 0 ? 0 : -1;
}

static uint64_t fix(void *arg, uint64_t ip)
{
    (void)arg;
    uint64_t base = (uint64_t)code;
    if (ip <= base || ip >= base + nsites * FN_BYTES) return ip;
    uint64_t off = (ip - base) % FN_BYTES;
    return off > 0 && off < 5 ? ip - off + 5 : ip;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static void on_trap(int sig, siginfo_t *si, void *uc)
{
    if (ftr_bp_trap(si, uc)) return;
    if (si->si_code == SI_KERNEL) return; /* the int3 of trap_cost(): just go on */
    signal(sig, SIG_DFL);
    raise(sig);
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The cost of one trap: an int3 and its trip through a SIGTRAP handler (median of 2000). */
static double trap_cost_us(void)
{
    uint64_t t[2000];
    for (int i = 0; i < 2000; i++) {
        uint64_t a = now_ns();
        __asm__ volatile("int3");
        t[i] = now_ns() - a;
    }
    qsort(t, 2000, sizeof *t, cmp_u64);
    return (double)t[1000] / 1e3;
}

static uint64_t worst_of(int nthreads)
{
    uint64_t w = 0;
    for (int i = 0; i < nthreads; i++)
        if (worst[i] > w) w = worst[i];
    return w;
}

int main(int argc, char **argv)
{
    int park = argc > 1 && strcmp(argv[1], "--park") == 0;
    argv += park;
    argc -= park;
    nsites = argc > 1 ? strtoul(argv[1], NULL, 10) : 100000;
    int nthreads = argc > 2 ? atoi(argv[2]) : 8;
    int rounds = argc > 3 ? atoi(argv[3]) : 20;
    if (nthreads > 64) nthreads = 64;
    char err[256];
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_trap;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigaction(SIGTRAP, &sa, NULL);
    if (ftr_bp_init(err, sizeof err) < 0 || ftr_stw_init(SIGRTMIN + 7, NULL, err, sizeof err) < 0) {
        fprintf(stderr, "repatch: %s\n", err);
        return 1;
    }
    size_t len = (nsites * FN_BYTES + 4095) & ~(size_t)4095;
    /* the stub page just below the code, within rel32 reach */
    uint8_t *area =
        mmap(NULL, len + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED) return 1;
    stub = area;
    code = area + 4096;
    stub[0] = 0xc3;
    for (size_t i = 0; i < nsites; i++) {
        uint8_t *s = code + i * FN_BYTES;
        ftr_x86_gen_nop(s, 5);
        s[5] = 0xc3;
        s[6] = s[7] = 0xcc;
    }
    mprotect(area, len + 4096, PROT_READ | PROT_EXEC);

    struct ftr_poke *to_call = calloc(nsites, sizeof *to_call);
    struct ftr_poke *to_nop = calloc(nsites, sizeof *to_nop);
    for (size_t i = 0; i < nsites; i++) {
        uint64_t at = (uint64_t)code + i * FN_BYTES;
        struct ftr_poke *c = &to_call[i], *n = &to_nop[i];
        c->addr = n->addr = at;
        c->len = n->len = 5;
        ftr_x86_gen_nop(c->expect, 5);
        ftr_x86_gen_call(c->bytes, 5, at, (uint64_t)stub);
        memcpy(n->expect, c->bytes, 5);
        memcpy(n->bytes, c->expect, 5);
    }
    double trap_us = trap_cost_us();

    pthread_t th[64];
    for (long i = 0; i < nthreads; i++)
        pthread_create(&th[i], NULL, runner, (void *)i);
    usleep(50000);
    /* the same time without re-patching: how long a call can take here anyway */
    uint64_t c0 = rdtsc(), n0 = now_ns();
    atomic_store(&measuring, 1);
    usleep((useconds_t)rounds * 12000);
    atomic_store(&measuring, 0);
    double tick_ns = (double)(now_ns() - n0) / (double)(rdtsc() - c0);
    uint64_t idle_worst = worst_of(nthreads);
    memset(worst, 0, sizeof worst);

    uint64_t *ns = calloc((size_t)rounds, sizeof *ns);
    uint64_t traps = 0;
    unsigned parked = 0;
    atomic_store(&measuring, 1);
    for (int r = 0; r < rounds; r++) {
        struct job j = {r % 2 ? to_nop : to_call, nsites};
        if (park) {
            struct ftr_stw_stats st;
            if (ftr_stw_run(apply_alone, fix, &j, 2000, &st, err, sizeof err) < 0) {
                fprintf(stderr, "repatch: round %d: %s\n", r, err);
                return 1;
            }
            ns[r] = st.ns;
            parked += st.threads;
        } else {
            struct ftr_poke_stats st;
            if (ftr_text_poke_live(j.pokes, j.n, NULL, 0, &st) != 0) {
                perror("repatch: live batch");
                return 1;
            }
            ns[r] = st.ns;
            traps += st.traps;
        }
        usleep(10000);
    }
    atomic_store(&measuring, 0);
    uint64_t busy_worst = worst_of(nthreads);
    long before = atomic_load(&calls);
    atomic_store(&stop, 1);
    for (int i = 0; i < nthreads; i++)
        pthread_join(th[i], NULL);
    int alive = atomic_load(&calls) > before || before == 0;
    qsort(ns, (size_t)rounds, sizeof *ns, cmp_u64);
    printf("%s: %zu sites, %d threads, %d rounds: re-patch median %.2f ms, max %.2f ms; "
           "per re-patch %.1f threads trapped, %.1f parked; one trap %.2f us; longest call "
           "%.2f ms (%.2f ms without re-patching)\n",
           park ? "parked" : "live", nsites, nthreads, rounds, (double)ns[rounds / 2] / 1e6,
           (double)ns[rounds - 1] / 1e6, (double)traps / rounds, (double)parked / rounds, trap_us,
           (double)busy_worst * tick_ns / 1e6, (double)idle_worst * tick_ns / 1e6);
    return alive ? 0 : 1;
}
