/* bsigstack: a signal handler with a 200 KiB frame, sent every 20 us to threads in traced
 * recursion (with FTRACE_BUFSIZE=4 their slow paths come every 128 calls: ~400 per worker).
 * usage:
 * bsigstack
 *
 * The handler must run on the thread's own stack, never on the tracer's small private one:
 * there its frame would overwrite the saved vector registers of the interrupted code. The
 * traced recursion passes doubles (in xmm registers) and checks every result against an
 * untraced twin. Prints "bsigstack: ok"; else what went wrong (exit 1).
 *
 * tree: main {main 1}; each of 2 workers {worker 1, worker;fstep^k N for k = 1..21}, N = 2500
 * (scaled(): FTR_STRESS_DIV)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include "behave.h"

#define WORKERS 2
#define ROUNDS scaled(2500)
#define DEPTH 20

static atomic_int stop, done;
static int signo = SIGUSR1;
static atomic_long wrong, off_stack, handled;
static __thread uintptr_t stack_lo, stack_hi;
static volatile long sink;

NOINLINE double fstep(double x, double y, int d)
{
    if (!d) return x * 0.5 + y;
    return fstep(x + 1.0, y * 0.5, d - 1) - 1.0;
}

NOTRACE static double fstep_ref(double x, double y, int d)
{
    if (!d) return x * 0.5 + y;
    return fstep_ref(x + 1.0, y * 0.5, d - 1) - 1.0;
}

NOTRACE static void on_usr1(int sig)
{
    volatile char big[200 * 1024];
    memset((char *)big, sig, sizeof big);
    sink += big[0] + big[sizeof big - 1];
    uintptr_t here = (uintptr_t)&big[0];
    if (stack_hi && (here < stack_lo || here >= stack_hi)) off_stack++;
    handled++;
}

NOTRACE static void learn_stack(void)
{
    pthread_attr_t a;
    void *lo;
    size_t size;
    if (pthread_getattr_np(pthread_self(), &a) == 0) {
        if (pthread_attr_getstack(&a, &lo, &size) == 0) {
            stack_lo = (uintptr_t)lo;
            stack_hi = (uintptr_t)lo + size;
        }
        pthread_attr_destroy(&a);
    }
}

NOINLINE void *worker(void *arg)
{
    (void)arg;
    learn_stack();
    for (int i = 0; i < ROUNDS; i++) {
        double x = i * 0.25, y = 1.0 + i % 7;
        if (fstep(x, y, DEPTH) != fstep_ref(x, y, DEPTH)) wrong++;
    }
    done++;
    return NULL;
}

NOTRACE static void *storm(void *arg)
{
    pthread_t *ts = arg;
    struct timespec d = {0, 20000};
    for (unsigned k = 0; !stop; k++) {
        if (done < WORKERS) pthread_kill(ts[k % WORKERS], signo);
        nanosleep(&d, NULL);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *which = argc > 1 ? argv[1] : "usr1";
    if (!strcmp(which, "trap"))
        signo = SIGTRAP;
    else if (!strcmp(which, "bus"))
        signo = SIGBUS;
    else if (strcmp(which, "usr1")) {
        fprintf(stderr, "usage: bsigstack [usr1|trap|bus]\n");
        return 2;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigaction(signo, &sa, NULL);
    pthread_t ts[WORKERS], st;
    for (int i = 0; i < WORKERS; i++)
        pthread_create(&ts[i], NULL, worker, NULL);
    pthread_create(&st, NULL, storm, ts);
    for (int i = 0; i < WORKERS; i++)
        pthread_join(ts[i], NULL);
    stop = 1;
    pthread_join(st, NULL);
    if (wrong || off_stack) {
        printf("bsigstack: %ld wrong results, %ld of %ld handlers off the thread's stack\n",
               (long)wrong, (long)off_stack, (long)handled);
        return 1;
    }
    printf("bsigstack: ok\n");
    return 0;
}
