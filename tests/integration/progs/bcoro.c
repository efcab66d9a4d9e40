/* bcoro: makecontext/swapcontext ping-pong between main and a coroutine with its own (heap)
 * stack, 100 rounds; each side calls a traced function every round (ping_work in pinger,
 * pong_work in coro_body). Expectation: no crash, output and exit status unchanged, every call
 * recorded: ping_work 100, pong_work 100, pinger 1, coro_body 1 (the nesting across the stack
 * switches is not checked).
 * bcoro nest: main -> foo swaps to a context that runs bar, which swaps back; foo returns, main
 * calls baz. bar ran inside foo's call to swapcontext: tree main, main;foo, main;foo;bar (left
 * suspended: closed in the tree when foo returns), main;baz. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <ucontext.h>
#include "behave.h"

static ucontext_t main_ctx, co_ctx;
static volatile long ping_sum, pong_sum;

NOINLINE void ping_work(int i)
{
    ping_sum += i;
}
NOINLINE void pong_work(int i)
{
    pong_sum += i;
}
NOINLINE void coro_body(void)
{
    for (int i = 0; i < 100; i++) {
        pong_work(i);
        swapcontext(&co_ctx, &main_ctx);
    }
}
NOINLINE void pinger(void)
{
    for (int i = 0; i < 100; i++) {
        ping_work(i);
        swapcontext(&main_ctx, &co_ctx);
    }
    swapcontext(&main_ctx, &co_ctx); /* let coro_body return (uc_link: back here) */
}

static ucontext_t nest_main, nest_co;
NOINLINE void bar(void)
{
    swapcontext(&nest_co, &nest_main);
    NOTAIL();
}
NOINLINE void foo(void)
{
    swapcontext(&nest_main, &nest_co);
    NOTAIL();
}
NOINLINE void baz(void)
{
    ping_sum++;
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "nest")) {
        getcontext(&nest_co);
        nest_co.uc_stack.ss_sp = malloc(64 * 1024);
        nest_co.uc_stack.ss_size = 64 * 1024;
        makecontext(&nest_co, bar, 0);
        foo();
        baz();
        printf("nest: %ld\n", (long)ping_sum);
        return 0;
    }
    size_t size = 256 * 1024;
    getcontext(&co_ctx);
    co_ctx.uc_stack.ss_sp = malloc(size);
    co_ctx.uc_stack.ss_size = size;
    co_ctx.uc_link = &main_ctx;
    makecontext(&co_ctx, coro_body, 0);
    pinger();
    printf("coro: ping %ld pong %ld\n", (long)ping_sum, (long)pong_sum);
    return 71;
}
