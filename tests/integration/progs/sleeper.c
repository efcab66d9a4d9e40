/* sleeper: sleeper() sleeps 100 ms and writes how long that took by its own CLOCK_MONOTONIC
 * reads (in ns) to the file named by argv[1]; the report's duration of sleeper() must agree
 * within 2% whatever clock the tracer uses (options_tests.py). */
#include <stdio.h>
#include <time.h>
#include "progs.h"

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

NOINLINE void sleeper(FILE *f)
{
    long long a = now_ns();
    struct timespec d = {0, 100 * 1000 * 1000};
    nanosleep(&d, NULL);
    fprintf(f, "%lld\n", now_ns() - a);
}

int main(int argc, char **argv)
{
    FILE *f = fopen(argc > 1 ? argv[1] : "own.txt", "w");
    if (!f) return 1;
    sleeper(f);
    fclose(f);
    puts("slept");
    return 0;
}
