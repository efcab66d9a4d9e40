/*
 * test_park.c - the hand-over of a suspended coroutine's shadow entries between threads
 * (preload/hot/park.c), under ThreadSanitizer (tests/tsan/CMakeLists.txt).
 *
 * 64 "coroutines", each a declared stack (stacks.c), go round a mutex-protected run queue as a
 * fiber scheduler's would; 4 workers pop one, take its park (ftr_unpark), check that it holds
 * exactly the entries its last worker parked (count, order, every field), and park a new set
 * of 1 to 20 entries (up to 3 blocks) before pushing it back. Now and then a worker drops a
 * coroutine's park instead (makecontext on its memory, ftr_park_drop) and the next one finds
 * none. Any race TSan sees, or any entry not as parked, fails.
 *
 * usage: test_park [--scale N]
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "park.h"
#include "stacks.h"

/* what stacks.c needs of the rest of libftrace.so */
__thread struct ftr_tls ftr_tls;
struct ftr_hot ftr_hot;

#define COROS 64u
#define WORKERS 4
#define MAXN 20u
#define STACK 16384u

struct coro {
    uint32_t cls;   /* its declared stack's class */
    uint32_t n;     /* entries parked last (0: none, or dropped) */
    uint32_t round; /* how often it ran */
    uintptr_t lo;
};
static struct coro coros[COROS];
static uint32_t queue[COROS], q_head, q_len;
static pthread_mutex_t q_lock = PTHREAD_MUTEX_INITIALIZER;
static long ops_per_worker = 200000;
static int failed;

static void fail(const char *what, const struct coro *c, uint32_t i)
{
    fprintf(stderr, "test_park: coroutine %u round %u entry %u: %s\n", (unsigned)(c - coros),
            c->round, i, what);
    __atomic_store_n(&failed, 1, __ATOMIC_RELAXED);
}

static struct ftr_shadow entry_of(const struct coro *c, uint32_t i)
{
    return (struct ftr_shadow){.ret = 0x400000u + c->round * 64u + i,
                               .slot = c->lo + STACK - 8u * (i + 1),
                               .site = (uint32_t)(c - coros),
                               .flags = FTR_SH_SUSPENDED,
                               .tsc = (uint64_t)c->round << 8 | i};
}

static void *worker(void *arg)
{
    unsigned seed = (unsigned)(uintptr_t)arg * 7919u + 1;
    struct ftr_shadow got[MAXN + 1];
    for (long op = 0; op < ops_per_worker && !__atomic_load_n(&failed, __ATOMIC_RELAXED); op++) {
        pthread_mutex_lock(&q_lock);
        uint32_t k = queue[q_head];
        q_head = (q_head + 1) % COROS;
        q_len--;
        pthread_mutex_unlock(&q_lock);
        struct coro *c = &coros[k];
        uint32_t n = ftr_unpark(c->cls, got, MAXN + 1);
        if (n != c->n) fail("count differs", c, n);
        for (uint32_t i = 0; i < n && i < c->n; i++) {
            struct ftr_shadow want = entry_of(c, i);
            if (memcmp(&got[i], &want, sizeof want)) fail("entry differs", c, i);
        }
        c->round++;
        if (rand_r(&seed) % 16 == 0) { /* the coroutine is dropped and made afresh */
            ftr_park_drop(c->cls);
            c->n = 0;
        } else {
            struct ftr_park_build b = {c->cls, 0, 0};
            c->n = 1 + (uint32_t)rand_r(&seed) % MAXN;
            for (uint32_t i = 0; i < c->n; i++) {
                struct ftr_shadow e = entry_of(c, i);
                if (ftr_park_add(&b, &e) < 0) {
                    fail("no block", c, i);
                    break;
                }
            }
            ftr_park_publish(&b);
        }
        pthread_mutex_lock(&q_lock);
        queue[(q_head + q_len) % COROS] = k;
        q_len++;
        pthread_mutex_unlock(&q_lock);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "--scale")) ops_per_worker *= atol(argv[2]);
    ftr_stacks_init();
    static char mem[COROS][STACK];
    for (uint32_t i = 0; i < COROS; i++) {
        uintptr_t lo = (uintptr_t)mem[i];
        ftr_stack_declare(lo, lo + STACK);
        coros[i] = (struct coro){ftr_stack_declared(lo), 0, 0, lo};
        if (!coros[i].cls) {
            fprintf(stderr, "test_park: stack %u not declared\n", i);
            return 1;
        }
        queue[i] = i;
    }
    q_len = COROS;
    pthread_t th[WORKERS];
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&th[i], NULL, worker, (void *)(uintptr_t)i);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(th[i], NULL);
    if (failed) return 1;
    printf("test_park: %ld hand-overs, every park as it was left\n", ops_per_worker * WORKERS);
    return 0;
}
