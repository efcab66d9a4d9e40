/* coswitch N R: N ucontext coroutines (64 KiB stacks), each resumed R times round robin by
 * main; every time it runs, a coroutine calls cs_work() and yields from inside cs_step() ->
 * cs_yield() (3 traced frames left suspended). Prints the nanoseconds per switch (a resume or a
 * yield) of the timed rounds, from CLOCK_MONOTONIC: the set-up (makecontext, the first entry)
 * is outside the timing. Built with instrumentation by bench/coswitch.py. */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <ucontext.h>

#define NOINLINE __attribute__((noinline))
static ucontext_t main_ctx, *ctx;
static volatile long sink;
static int cur;

NOINLINE void cs_work(int i)
{
    sink += i;
}
NOINLINE void cs_yield(void)
{
    swapcontext(&ctx[cur], &main_ctx);
}
NOINLINE void cs_step(int i)
{
    cs_work(i);
    cs_yield();
}
static void body(void)
{
    for (int i = 0;; i++)
        cs_step(i);
}
static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e9 + ts.tv_nsec;
}
int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 1000, rounds = argc > 2 ? atoi(argv[2]) : 10;
    size_t size = 64 * 1024;
    ctx = calloc((size_t)n, sizeof *ctx);
    char *stacks = malloc((size_t)n * size);
    if (!ctx || !stacks) return 1;
    for (int i = 0; i < n; i++) {
        getcontext(&ctx[i]);
        ctx[i].uc_stack.ss_sp = stacks + (size_t)i * size;
        ctx[i].uc_stack.ss_size = size;
        ctx[i].uc_link = &main_ctx;
        makecontext(&ctx[i], body, 0);
        cur = i;
        swapcontext(&main_ctx, &ctx[i]); /* first entry: not timed */
    }
    double t0 = now();
    for (int r = 0; r < rounds; r++)
        for (int i = 0; i < n; i++) {
            cur = i;
            swapcontext(&main_ctx, &ctx[i]);
        }
    printf("%.1f\n", (now() - t0) / (2.0 * n * rounds));
    return 0;
}
