/* liblive_dl.c - the instrumented library the live_*.c programs dlopen (live_tests.py):
 * dl_outer(x) calls dl_inner(x) and returns 2x + 1. */
#include "behave.h"

static volatile long sink;

NOINLINE int dl_inner(int x)
{
    sink += x;
    return x * 2;
}

NOINLINE int dl_outer(int x)
{
    int r = dl_inner(x);
    KEEP(r);
    return r + 1;
}
