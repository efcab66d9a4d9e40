/* Helpers for the behaviour test programs (tests/integration/behaviours.py). */
#ifndef BEHAVE_H
#define BEHAVE_H
#include <stdlib.h>
#include <sys/time.h>
#include "progs.h"

/* Put after a call in tail position: the call stays a call (no sibling-call jmp). */
#define NOTAIL() __asm__ volatile("" ::: "memory")
/* Keeps x live in a register: the call producing it cannot become a tail call. */
#define KEEP(x) __asm__ volatile("" : "+r"(x))
/* A function the compiler does not instrument (no entry hook, no frame in the tree). */
#define NOTRACE __attribute__((no_instrument_function, patchable_function_entry(0, 0), noinline))

/* gprof's timer (ITIMER_PROF, started by a -pg build's start-up, untraced) survives exec: the
 * new image dies of SIGPROF when it fires before that image's start-up installs its handler
 * (seen under load). Stopped before an exec, so that the untraced run is deterministic too. */
NOTRACE __attribute__((unused)) static void stop_prof_timer(void)
{
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, 0);
}

/* FTR_STRESS_DIV=N in the environment (scripts/stress.sh's repeats): the loops of the costly
 * cases run n / N times (at least once), in the untraced and the traced run alike; the
 * expectations of behaviours.py divide the same way (its scaled()). */
NOTRACE __attribute__((unused)) static long scaled(long n)
{
    static long div; /* read once (0: not yet): loops test scaled() at every round */
    long k = __atomic_load_n(&div, __ATOMIC_RELAXED);
    if (!k) {
        const char *d = getenv("FTR_STRESS_DIV");
        k = d && atol(d) > 1 ? atol(d) : 1;
        __atomic_store_n(&div, k, __ATOMIC_RELAXED);
    }
    return k > 1 ? (n / k > 0 ? n / k : 1) : n;
}

#endif
