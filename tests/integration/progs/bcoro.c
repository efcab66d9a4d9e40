/* bcoro: makecontext/swapcontext ping-pong between main and a coroutine with its own (heap)
 * stack, 100 rounds; each side calls a traced function every round (ping_work in pinger,
 * pong_work in coro_body). Expectation: no crash, output and exit status unchanged, every call
 * recorded, and nested where it ran: a coroutine's calls inside the call of its resumer that
 * switched to it (coro_body under pinger), each call once however often it was suspended and
 * resumed: main, main;pinger, main;pinger;ping_work x100, main;pinger;coro_body,
 * main;pinger;coro_body;pong_work x100.
 * bcoro nest: main -> foo swaps to a context that runs bar, which swaps back; foo returns, main
 * calls baz. bar ran inside foo's call to swapcontext: tree main, main;foo, main;foo;bar (left
 * suspended when it swaps back), main;baz.
 * bcoro pingpong: two coroutines A and B switch to each other, neither through main: main ->
 * driver swaps to A (a_body: 3 x a_step -> a_work, then swaps to B); B (b_body: 3 x b_step ->
 * b_work, then swaps back to A). After its third round A swaps back to main, which calls after.
 * B's frames are reopened (not new calls) inside the a_step that resumed them each time, so
 * tree: main, main;driver, ;a_body, ;a_body;a_step x3, ;a_step;a_work x3, ;a_step;b_body,
 * ;b_body;b_step x3, ;b_step;b_work x3, main;after; nothing open at the end (A and B are left
 * suspended). */
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

static ucontext_t pp_main, pp_a, pp_b;
NOINLINE void a_work(void)
{
    ping_sum++;
}
NOINLINE void b_work(void)
{
    pong_sum++;
}
NOINLINE void a_step(void)
{
    a_work();
    swapcontext(&pp_a, &pp_b);
    NOTAIL();
}
NOINLINE void b_step(void)
{
    b_work();
    swapcontext(&pp_b, &pp_a);
    NOTAIL();
}
NOINLINE void a_body(void)
{
    for (int i = 0; i < 3; i++)
        a_step();
    swapcontext(&pp_a, &pp_main);
}
NOINLINE void b_body(void)
{
    for (int i = 0; i < 3; i++)
        b_step();
    swapcontext(&pp_b, &pp_a);
}
NOINLINE void driver(void)
{
    swapcontext(&pp_main, &pp_a);
    NOTAIL();
}
NOINLINE void after(void)
{
    ping_sum += 10;
}

NOTRACE static void make(ucontext_t *c, void (*fn)(void))
{
    getcontext(c);
    c->uc_stack.ss_sp = malloc(64 * 1024);
    c->uc_stack.ss_size = 64 * 1024;
    makecontext(c, fn, 0);
}

int main(int argc, char **argv)
{
    if (argc > 1 && !strcmp(argv[1], "pingpong")) {
        make(&pp_a, a_body);
        make(&pp_b, b_body);
        driver();
        after();
        printf("pingpong: %ld %ld\n", (long)ping_sum, (long)pong_sum);
        return 0;
    }
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
