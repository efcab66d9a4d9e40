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
 * suspended).
 * bcoro gen: 20 generators, each producing by resuming the next (resume_gen switches to it,
 * then calls post): one round. Generator i runs inside resume_gen(i): tree (A_i = main,
 * resume_gen, then i times start;gen_body;resume_gen): A_i;start, A_i;start;gen_body,
 * ;gen_body;work, ;gen_body;yield_val, A_i;post, each once; nothing open.
 * bcoro reuse: a generator abandoned suspended (old_gen, twice pulled), then a new coroutine
 * made on its stack memory (new_task): tree main, main;run_co x3, ;run_co;old_gen,
 * ;old_gen;post x2, ;old_gen;old_yield x2, ;run_co;new_task, ;new_task;post: no frame of
 * old_gen in the third run_co. */
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

#define NGEN 20
static ucontext_t gen_ctx[NGEN], gen_ret[NGEN];
static int gen_val[NGEN];
NOINLINE void post(int i)
{
    ping_sum += i;
}
NOINLINE int work(int i, int v)
{
    return v + i;
}
NOINLINE int resume_gen(int i)
{
    swapcontext(&gen_ret[i], &gen_ctx[i]);
    post(i);
    return gen_val[i];
}
NOINLINE void yield_val(int i, int v)
{
    gen_val[i] = v;
    swapcontext(&gen_ctx[i], &gen_ret[i]);
    NOTAIL();
}
NOINLINE void gen_body(int i)
{
    for (int k = 0;; k++) {
        int v = i == NGEN - 1 ? k : resume_gen(i + 1);
        yield_val(i, work(i, v));
    }
}
NOINLINE void start(int i)
{
    gen_body(i);
}

static ucontext_t ru_main, ru_co;
static char ru_stack[65536];
NOINLINE void old_yield(void)
{
    swapcontext(&ru_co, &ru_main);
    NOTAIL();
}
NOINLINE void old_gen(void)
{
    for (;;) {
        post(1);
        old_yield();
    }
}
NOINLINE void new_task(void)
{
    post(2);
}
NOINLINE void run_co(void)
{
    swapcontext(&ru_main, &ru_co);
    NOTAIL();
}
NOTRACE static void make_on(ucontext_t *c, char *stack, size_t size, void (*fn)(void))
{
    getcontext(c);
    c->uc_stack.ss_sp = stack;
    c->uc_stack.ss_size = size;
    c->uc_link = &ru_main;
    makecontext(c, fn, 0);
}

/* bcoro local: a coroutine whose 16 KiB stack is an array in main's frame, on the main thread's
 * own stack, recursing 600 levels (lrec, ~10 KiB untraced at -O2: it fits; at -O0 it does not). The
 * 4 KiB below the array must stay intact: a tracer that took the array for the thread's stack and
 * added to every frame (call-through) would overflow it. Prints the result and the bytes
 * overwritten (0). tree: main, main;lco, then lrec 600 levels deep under it (each once). */
static ucontext_t lmain, lctx;
static long lresult;
NOINLINE long lrec(long n)
{
    if (n == 0) return 0;
    long v = lrec(n - 1);
    KEEP(v);
    return v + 1;
}
NOINLINE void lco(void)
{
    lresult = lrec(599);
    NOTAIL();
}
NOTRACE static int local_stack(void)
{
    struct {
        char guard[4096]; /* lower addresses: where the coroutine's stack would overflow to */
        char stk[16384];
    } m;
    memset(m.guard, 0x5a, sizeof m.guard);
    getcontext(&lctx);
    lctx.uc_stack.ss_sp = m.stk;
    lctx.uc_stack.ss_size = sizeof m.stk;
    lctx.uc_link = &lmain;
    makecontext(&lctx, lco, 0);
    swapcontext(&lmain, &lctx);
    int bad = 0;
    for (size_t i = 0; i < sizeof m.guard; i++)
        bad += m.guard[i] != 0x5a;
    printf("local: %ld, %d guard bytes overwritten\n", lresult, bad);
    return 0;
}

NOTRACE static int other_modes(const char *mode)
{
    if (!strcmp(mode, "local")) return local_stack();
    if (!strcmp(mode, "gen")) {
        for (int i = 0; i < NGEN; i++) {
            getcontext(&gen_ctx[i]);
            gen_ctx[i].uc_stack.ss_sp = malloc(64 * 1024);
            gen_ctx[i].uc_stack.ss_size = 64 * 1024;
            makecontext(&gen_ctx[i], (void (*)(void))start, 1, i);
        }
        printf("gen: %d\n", resume_gen(0));
        return 0;
    }
    if (!strcmp(mode, "reuse")) {
        make_on(&ru_co, ru_stack, sizeof ru_stack, old_gen);
        run_co();
        run_co(); /* old_gen is left suspended for good */
        make_on(&ru_co, ru_stack, sizeof ru_stack, new_task);
        run_co();
        printf("reuse: done\n");
        return 0;
    }
    return -1;
}

int main(int argc, char **argv)
{
    if (argc > 1 && other_modes(argv[1]) == 0) return 0;
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
