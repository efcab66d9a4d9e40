/* binline: static functions and inline-heavy code. What is traced is what the binary calls:
 * a function the compiler inlined has no frame (its callees nest under the function it was
 * inlined into); one it cloned is named by its clone (h.constprop.0 and the like). The test
 * computes the expected tree from the disassembly (behaviours.py: INLINE_MODEL): for every
 * function marked "maybe" below, whether the nearest function still called holds a call
 * (or a jmp) to it.
 *   main -> compute(4)                         noinline
 *     4 x h1(i)                                static inline            maybe
 *           h2(x)                              static inline            maybe
 *             leaf(x)                          noinline
 *           small(x)                           static, tiny             maybe
 *     ai(n)                                    static always_inline     never a frame
 *       leaf2(n)                               noinline
 *     once_fn(n)                               static, called once      maybe
 *       leaf(x) x 3
 *     2 x big(i)   (two call sites)            static, large            maybe
 *       leaf(x) x 2
 *     via_ptr(i)   through a function pointer  static                   always a call
 *       leaf(x)
 *     via_ptr(i)   called directly             static                   maybe
 *       leaf(x)
 * At -O0 nothing is inlined (every "maybe" has a frame); at -O2 some are (the test checks
 * that at least one is, or the case would not test inlining). Exit status 60.
 */
#include <stdio.h>
#include "behave.h"

static volatile long sink;

NOINLINE long leaf(long x)
{
    sink += x;
    return x + 1;
}
NOINLINE long leaf2(long x)
{
    sink -= x;
    return x - 1;
}
static inline long h2(long x)
{
    return leaf(x * 2) + 1;
}
static long small(long x)
{
    sink ^= x;
    return x + 3;
}
static inline long h1(long x)
{
    return h2(x + 1) + small(x);
}
static inline __attribute__((always_inline)) long ai(long n)
{
    return leaf2(n) * 2;
}
static long once_fn(long n)
{
    long s = 0;
    for (int i = 0; i < 3; i++)
        s += leaf(n + i) * (i + 1);
    return s;
}
/* large enough that -O2 keeps it out of line (the test does not rely on it) */
static long big(long x)
{
    long s = leaf(x), t = leaf(x + 7);
    for (int i = 0; i < 24; i++) {
        s = s * 31 + (t ^ (s >> 3)) + i;
        t = t * 17 - (s & 0xff) + (x << (i & 7));
        if ((s ^ t) % 5 == 0)
            s += t / 3;
        else
            t -= s / 7;
    }
    return s ^ t;
}
static long via_ptr(long x)
{
    return leaf(x + 100) * 3;
}
static long (*volatile fp)(long) = via_ptr;

NOINLINE long compute(long n)
{
    long s = 0;
    for (long i = 0; i < n; i++)
        s += h1(i);
    s += ai(n);
    s += once_fn(n);
    s += big(s);
    s ^= big(n);
    s += fp(n);
    s += via_ptr(s & 3);
    return s;
}

int main(void)
{
    long s = compute(4);
    KEEP(s);
    printf("inline: %ld\n", s);
    return 60;
}
