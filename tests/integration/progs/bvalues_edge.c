/* bvalues_edge.c - values at the edges (values_tests.py): a struct of two floats by value (one
 * SSE register: its bits), an unsigned enum's enumerators, and a coroutine whose stack ends
 * right above its return address (a guard page): -A 'co@arg12' reads past it, (bad), never a
 * fault. */
#include <stdio.h>
#include <sys/mman.h>
#include <ucontext.h>

#ifdef __clang__
#define KEEP __attribute__((noinline, used))
#else
#define KEEP __attribute__((noinline, noipa, used))
#endif

struct f2 {
    float a, b;
};
enum big { LOWV = 1, HIGH = 0x80000000u };

KEEP float f2sum(struct f2 p)
{
    return p.a + p.b;
}
KEEP enum big pick(enum big b)
{
    return b;
}

static ucontext_t main_uc, co_uc;
static volatile int ran;
KEEP void co(void)
{
    ran = 1;
}

int main(void)
{
    float s = f2sum((struct f2){1.5f, 2.5f});
    enum big b = pick(HIGH);
    /* the coroutine's stack: one page, the page above it inaccessible */
    char *m = mmap(NULL, 2 * 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (m == MAP_FAILED || mprotect(m + 4096, 4096, PROT_NONE)) return 1;
    getcontext(&co_uc);
    co_uc.uc_stack.ss_sp = m;
    co_uc.uc_stack.ss_size = 4096;
    co_uc.uc_link = &main_uc;
    makecontext(&co_uc, co, 0);
    swapcontext(&main_uc, &co_uc);
    printf("bvalues_edge %g %s %d\n", s, b == HIGH ? "HIGH" : "?", ran);
    return 0;
}
