/* bstep: backtrace() from every instruction of a traced call. usage: bstep
 *
 * main -> outer -> leaf, twice; the second time outer() sets the trap flag just before it calls
 * leaf() and clears it after, so a SIGTRAP handler runs after each instruction in between: the
 * call, the site, the tracer's stub, trampolines and hooks (traced), leaf() itself, and its
 * return (hooked or not). At each step the handler calls backtrace() and checks that the walk
 * reaches main()'s own return address (taken by a backtrace() from main before). Every step
 * must: prints "bstep: every step reaches main", or how many did not and where to stderr.
 *
 * tree: {main 1, main;outer 2, main;outer;leaf 2}. Exit status 0, 1 when a step stopped short.
 */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <ucontext.h>
#include "behave.h"

static void *main_ret; /* main()'s return address, where every walk must get to */
static volatile long sink;
static long steps, short_steps; /* steps seen, walks that did not reach main_ret */
static uintptr_t first_short[4];

NOINLINE long leaf(long x)
{
    sink += x;
    return sink;
}

NOTRACE static void on_trap(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si;
    void *frames[64];
    int n = backtrace(frames, 64), found = 0;
    for (int i = 0; i < n; i++)
        found |= frames[i] == main_ret;
    if (!found && short_steps < 4)
        first_short[short_steps] = (uintptr_t)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RIP];
    short_steps += !found;
    steps++;
}

NOINLINE long outer(int step)
{
    long r;
    if (step) __asm__ volatile("pushfq; orq $0x100, (%%rsp); popfq" ::: "memory", "cc");
    r = leaf(step);
    if (step) __asm__ volatile("pushfq; andq $~0x100, (%%rsp); popfq" ::: "memory", "cc");
    KEEP(r);
    return r;
}

/* frames[0] is here, [1] the return into main, [2] main's own return */
NOTRACE static void where_main_returns(void)
{
    void *frames[8];
    if (backtrace(frames, 8) >= 3) main_ret = frames[2];
}

int main(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_trap;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGTRAP, &sa, NULL);
    where_main_returns(); /* also loads libgcc_s before any step */
    outer(0);             /* the thread's first traced calls take their slow path here */
    outer(1);
    if (steps < 5 || short_steps) {
        fprintf(stderr, "bstep: %ld of %ld steps stop short of main, the first at", short_steps,
                steps);
        for (long i = 0; i < short_steps && i < 4; i++)
            fprintf(stderr, " %#lx", first_short[i]);
        fprintf(stderr, "\n");
        return 1;
    }
    printf("bstep: every step reaches main\n");
    return 0;
}
