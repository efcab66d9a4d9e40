/* bframes: traced calls from code without frame pointers. usage: bframes MODE
 *   juggle  main -> juggle (not traced) keeps 7 values live across its calls to use(): built
 *           without frame pointers at -O2, %rbp holds one of them (the test checks the
 *           disassembly), so whatever %rbp points to is no frame: a hook that follows it would
 *           read garbage. 10 rounds of 6 calls, then main -> check_sum.
 *           tree {main 1, main;use 60, main;check_sum 1}
 *   deep    main -> d1 -> d2 -> d3 -> untraced hop() -> d4 -> leaf, 3 times, then d4
 *           raises SIGUSR1 once whose handler on_usr1 -> leaf runs below d4.
 *           tree {main 1, main;d1 4, main;d1;d2 4, main;d1;d2;d3 4, main;d1;d2;d3;d4 4,
 *           main;d1;d2;d3;d4;leaf 4, main;d1;d2;d3;d4;on_usr1 1, main;d1;d2;d3;d4;on_usr1;leaf 1}
 * Exit status 70 + mode number.
 */
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include "behave.h"

static volatile long sink;

NOINLINE long use(long x)
{
    sink += x;
    return x * 3 + 1;
}
NOINLINE void check_sum(long s)
{
    sink ^= s;
}

/* many values live across calls: every callee-saved register, %rbp too when it is free */
NOTRACE long juggle(long n)
{
    long a = n, b = n + 1, c = n + 2, d = n + 3, e = n + 4, f = n + 5, g = n * 7;
    for (int i = 0; i < 10; i++) {
        a += use(b ^ g);
        b += use(c + a);
        c += use(d - b);
        d += use(e ^ c);
        e += use(f + d);
        f += use(a - e);
        g = g * 5 + (a ^ f);
    }
    return a ^ b ^ c ^ d ^ e ^ f ^ g;
}

NOINLINE long leaf(long x)
{
    sink += x;
    return x + 1;
}
static int raise_it;
NOINLINE void on_usr1(int sig)
{
    leaf(sig);
    NOTAIL();
}
NOINLINE long d4(long x)
{
    long r = leaf(x);
    KEEP(r);
    if (raise_it) raise(SIGUSR1);
    return r;
}
NOTRACE long hop(long x)
{
    long r = d4(x + 1);
    KEEP(r);
    return r;
}
/* d1 -> d2 -> d3 -> hop: each a plain call (not a tail call) */
#define LINK(name, next)                                                                           \
    NOINLINE long name(long x)                                                                     \
    {                                                                                              \
        long r = next(x + 1);                                                                      \
        KEEP(r);                                                                                   \
        return r;                                                                                  \
    }
LINK(d3, hop)
LINK(d2, d3)
LINK(d1, d2)

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "juggle")) {
        long s = juggle(3);
        check_sum(s);
        printf("juggle: %ld\n", s);
        return 70;
    }
    if (!strcmp(mode, "deep")) {
        signal(SIGUSR1, on_usr1);
        long s = 0;
        for (int i = 0; i < 4; i++) {
            raise_it = i == 3;
            s += d1(i);
        }
        printf("deep: %ld\n", s);
        return 71;
    }
    return 1;
}
