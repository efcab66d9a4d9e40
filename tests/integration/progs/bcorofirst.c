/* bcorofirst: the thread's first traced call runs on a coroutine's stack: main and the function
 * that resumes the coroutine are not traced. The coroutine (co_root) calls co_work and yields
 * inside co_yield, 3 rounds; main calls main_work after each. The switch back to main must
 * still suspend the coroutine's frames: tree {co_root 1, co_root;co_work 3, co_root;co_yield 3,
 * main_work 3} (main_work beside co_root, not inside co_yield); nothing open. */
#include <stdio.h>
#include <ucontext.h>
#include "behave.h"

static ucontext_t m, co;
static char stack[65536];
static volatile long sum;

NOINLINE void co_work(void)
{
    sum++;
}
NOINLINE void co_yield (void)
{
    swapcontext(&co, &m);
    NOTAIL();
}
NOINLINE void co_root(void)
{
    for (;;) {
        co_work();
        co_yield ();
    }
}
NOINLINE void main_work(void)
{
    sum += 10;
}
NOTRACE static void resume(void)
{
    swapcontext(&m, &co);
    NOTAIL();
}

NOTRACE int main(void)
{
    getcontext(&co);
    co.uc_stack.ss_sp = stack;
    co.uc_stack.ss_size = sizeof stack;
    makecontext(&co, co_root, 0);
    for (int i = 0; i < 3; i++) {
        resume();
        main_work();
    }
    printf("firstin: %ld\n", (long)sum);
    return 0;
}
