/* bcancel: pthread_cancel() of a thread inside traced frames (bcancel.cpp: the same program as
 * C++, with destructors where C has pthread_cleanup_push). usage: bcancel deferred|async
 * The thread: worker -> c1 -> c2 -> c3; c1 holds a mutex, each of c1, c2, c3 has a cleanup:
 * C: pthread_cleanup_push(cleanup, id); C++: an object whose inlined destructor calls
 * cleanup(id) (c1's is a lock guard: cleanup 1 unlocks the mutex). c3 calls
 * leaf(), tells main it is ready and calls wait_cancel(), which waits to be cancelled:
 * deferred, in pause(); async, with PTHREAD_CANCEL_ASYNCHRONOUS in a loop that calls nothing. main
 * cancels it, joins it, prints the cleanups that ran (innermost first) and whether the mutex is
 * free again. stdout: "MODE: cleanups 3 2 1, mutex free"; exit status 70 (deferred) or 71 (async).
 * tree of the thread: {worker 1, worker;c1 1, worker;c1;c2 1, worker;c1;c2;c3 1,
 * worker;c1;c2;c3;leaf 1, worker;c1;c2;c3;wait_cancel 1, worker;c1;c2;c3;cleanup 1,
 * worker;c1;c2;cleanup 1, worker;c1;cleanup 1} (each cleanup runs in its frame); main:
 * {main 1}.
 * bcancel random: 30 threads in turn, each spinning in rspin -> rmid -> rleaf with asynchronous
 * cancellation on, cancelled after 0.2-0.7 ms wherever it is (in the tracer's hooks too).
 * stdout "random: done", exit status 72. Each thread's tree is within {rspin 1, rspin;rmid,
 * rspin;rmid;rleaf, rspin;rclean <= 1}; the report matches every exit with its call; nothing
 * is left open. */
#include <pthread.h>
#include <semaphore.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "behave.h"

static volatile long sink;
static sem_t ready;
static int async_mode;
static int ran[8], nran;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
NOTRACE static int mutex_free(void)
{
    return pthread_mutex_trylock(&mu) == 0;
}

#ifdef __cplusplus
extern "C" {
#endif
NOINLINE void leaf(void)
{
    sink++;
}
/* the cleanup handler of every frame (called directly by C's pthread_cleanup_pop machinery, or
 * by an inlined destructor); cleanup 1 unlocks the mutex */
NOINLINE void cleanup(void *arg)
{
    ran[nran++] = (int)(long)arg;
    if (arg == (void *)1L) pthread_mutex_unlock(&mu);
}
#ifdef __cplusplus
}
struct Guard {
    int id;
    __attribute__((always_inline)) inline ~Guard() { cleanup((void *)(long)id); }
};
/* what std::lock_guard does, inlined (the library's would be traced functions at -O0) */
struct Locked {
    __attribute__((always_inline)) inline Locked() { pthread_mutex_lock(&mu); }
    __attribute__((always_inline)) inline ~Locked() { cleanup((void *)1L); }
};
extern "C" {
#endif

/* Never returns: cancelled in pause() or anywhere in the loop (a function without cleanups,
 * so that an asynchronous unwind from its loop is defined in C++ too). */
static volatile unsigned long spins;
NOINLINE void wait_cancel(void)
{
    if (async_mode) {
        pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
        for (;;)
            spins++;
    }
    for (;;)
        pause();
}

NOINLINE void c3(void)
{
#ifdef __cplusplus
    Guard g{3};
#else
    pthread_cleanup_push(cleanup, (void *)3L);
#endif
    leaf();
    sem_post(&ready);
    wait_cancel();
#ifndef __cplusplus
    pthread_cleanup_pop(0);
#endif
}

NOINLINE void c2(void)
{
#ifdef __cplusplus
    Guard g{2};
    c3();
    NOTAIL();
#else
    pthread_cleanup_push(cleanup, (void *)2L);
    c3();
    pthread_cleanup_pop(0);
#endif
}

NOINLINE void c1(void)
{
#ifdef __cplusplus
    Locked lock;
    c2();
    NOTAIL();
#else
    pthread_mutex_lock(&mu);
    pthread_cleanup_push(cleanup, (void *)1L);
    c2();
    pthread_cleanup_pop(1);
#endif
}

NOINLINE void *worker(void *arg)
{
    (void)arg;
    c1();
    NOTAIL();
    return NULL;
}

static volatile int never;
NOINLINE long rleaf(long x)
{
    return x * 7 + 3;
}
NOINLINE long rmid(long x)
{
    long s = 0;
    for (int i = 0; i < 10; i++)
        s += rleaf(x + i);
    return s;
}
NOINLINE void rclean(void *a)
{
    (void)a;
    sink++;
}
NOINLINE void *rspin(void *a)
{
    pthread_setcanceltype(PTHREAD_CANCEL_ASYNCHRONOUS, NULL);
    pthread_cleanup_push(rclean, a);
    for (long i = 0; !never; i++)
        sink += rmid(i);
    pthread_cleanup_pop(0);
    return NULL;
}
NOTRACE static int random_mode(void)
{
    for (int i = 0; i < 30; i++) {
        pthread_t t;
        pthread_create(&t, NULL, rspin, NULL);
        struct timespec ts = {0, 200000 + (i * 37 % 11) * 50000};
        nanosleep(&ts, NULL);
        pthread_cancel(t);
        void *rv = NULL;
        pthread_join(t, &rv);
        if (rv != PTHREAD_CANCELED) printf("not cancelled\n");
    }
    printf("random: done\n");
    return 72;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "random")) return random_mode();
    if (!strcmp(mode, "async"))
        async_mode = 1;
    else if (strcmp(mode, "deferred")) {
        fprintf(stderr, "usage: bcancel deferred|async\n");
        return 2;
    }
    sem_init(&ready, 0, 0);
    pthread_t t;
    pthread_create(&t, NULL, worker, NULL);
    while (sem_wait(&ready) != 0) {
    }
    pthread_cancel(t);
    void *res = NULL;
    pthread_join(t, &res);
    printf("%s: %s, cleanups", mode, res == PTHREAD_CANCELED ? "cancelled" : "returned");
    for (int i = 0; i < nran; i++)
        printf(" %d", ran[i]);
    printf(", mutex %s\n", mutex_free() ? "free" : "still locked");
    return 70 + async_mode;
}
#ifdef __cplusplus
}
#endif
