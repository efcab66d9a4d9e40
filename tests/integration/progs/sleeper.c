/* sleeper: sleeper() sleeps 100 ms; the program writes to the file named by argv[1] how long
 * that took by its own CLOCK_MONOTONIC reads (in ns), inside sleeper() and around the call in
 * main. The report's duration of sleeper() lies between the two (the hooks run in between, and
 * a loaded machine may preempt there), within 2%, whatever clock the tracer uses
 * (options_tests.py). */
#include <stdio.h>
#include <time.h>
#include "progs.h"

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static long long inner;
NOINLINE void sleeper(void)
{
    long long a = now_ns();
    struct timespec d = {0, 100 * 1000 * 1000};
    nanosleep(&d, NULL);
    inner = now_ns() - a;
}

int main(int argc, char **argv)
{
    FILE *f = fopen(argc > 1 ? argv[1] : "own.txt", "w");
    if (!f) return 1;
    long long a = now_ns();
    sleeper();
    long long outer = now_ns() - a;
    fprintf(f, "%lld %lld\n", inner, outer);
    fclose(f);
    puts("slept");
    return 0;
}
