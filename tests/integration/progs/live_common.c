/* live_common.c - helpers of the live_*.c programs (live_tests.py), #included by each of them
 * (not a program of its own).
 *
 * A program and the test talk through files in a directory, the program's first argument: the
 * program creates "ready" once it is set up; the test creates "markN" (N = 1, 2, ...) to ask for
 * a call of the program's marker function, answered by "ackN" once it returned; the test
 * creates "stop" to end the program. The helpers are not instrumented: the trace holds only the
 * programs' own functions. */
#ifndef LIVE_COMMON_C
#define LIVE_COMMON_C
#define _GNU_SOURCE
#include <errno.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include "behave.h"

#define HELPER static NOTRACE __attribute__((unused))

static const char *live_dir;
static volatile long live_sink;

HELPER int live_exists(const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", live_dir, name);
    return access(p, F_OK) == 0;
}

HELPER void live_touch(const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", live_dir, name);
    FILE *f = fopen(p, "w");
    if (f) fclose(f);
}

HELPER uint64_t live_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* A call that was to block for want_ns came back after less than 3/4 of it. */
HELPER int live_early(uint64_t t0, uint64_t want_ns)
{
    return live_now_ns() - t0 < want_ns / 4 * 3;
}

/* Sleeps us microseconds whatever interrupts it (for pauses nobody measures). */
HELPER void live_nap_us(long us)
{
    struct timespec d = {us / 1000000, us % 1000000 * 1000};
    while (nanosleep(&d, &d) < 0 && errno == EINTR)
        ;
}

/* Keeps the CPU busy for us microseconds without calling anything traced; the clock (a
 * library call, traced) is read once every 1000 rounds, not at every one. */
HELPER void live_spin_us(long us)
{
    uint64_t end = live_now_ns() + (uint64_t)us * 1000;
    while (live_now_ns() < end)
        for (int i = 0; i < 1000; i++)
            live_sink++;
}

/* -pg builds start with gcrt1, whose profiling timer (ITIMER_PROF) sends SIGPROF to the process
 * even untraced, now and then making a thread's system call fail with EINTR. Programs that
 * count EINTR stop it first (live_gprof.c keeps it: that is what it tests). */
HELPER void live_stop_gprof_timer(void)
{
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_PROF, &off, NULL);
}

/* When the test asked for marker call N (DIR/markN), calls fn(N) and answers DIR/ackN. Call it
 * from one thread only. */
HELPER void live_serve_marks(void (*fn)(int))
{
    static int next = 1;
    char name[32];
    snprintf(name, sizeof name, "mark%d", next);
    if (!live_exists(name)) return;
    fn(next);
    snprintf(name, sizeof name, "ack%d", next++);
    live_touch(name);
}

/* "all N handled exactly once" is printed as such: the line must not depend on N. */
HELPER void live_print_count(const char *what, long sent, long handled)
{
    if (sent == handled && sent > 0)
        printf("%s: every signal sent was handled exactly once\n", what);
    else
        printf("%s: %ld sent, %ld handled\n", what, sent, handled);
}
#endif
