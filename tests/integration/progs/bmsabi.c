/* bmsabi: functions of the Microsoft x64 convention (__attribute__((ms_abi))) in a System V
 * program. Such a function takes its first four arguments in rcx, rdx, r8, r9 (xmm0-3 by
 * position) and owns 32 bytes of "home space" above its return address, which gcc at -O0
 * fills with its register arguments: called through (the stack 16 bytes lower) it would write
 * the trampoline's saved rbp and the return address into its caller. gcc marks nothing of the
 * convention in DWARF: the tracer must tell from where the parameters are at the entry and
 * give them the return hook. usage: bmsabi
 *   main -> chain -> via -> ms1 (1 integer argument), ms2 (2), ms3 (3), ms4 (4), msd (a double
 *   then an integer: rdx), msp (a pointer and an int), each once and each calling leaf() (a
 *   System V function) once; then via -> ms_outer (2) -> ms2 (an ms_abi function calling
 *   another), ms2 -> leaf. Every result is checked against the value computed by hand: exit
 *   status 10 + the first wrong one, else 42; the total is printed.
 *   tree {main 1, main;chain 1, main;chain;via 1, main;chain;via;F 1 and
 *   main;chain;via;F;leaf 1 for F in ms1 ms2 ms3 ms4 msd msp, main;chain;via;ms_outer 1,
 *   main;chain;via;ms_outer;ms2 1, main;chain;via;ms_outer;ms2;leaf 1}
 */
#include <stdio.h>

#include "behave.h"
#include "checks.h"

#define MS __attribute__((ms_abi))

static volatile long sink;

NOINLINE long leaf(long x)
{
    sink += x;
    return x;
}

NOINLINE MS long ms1(long a)
{
    return leaf(a * 3);
}
NOINLINE MS long ms2(long a, long b)
{
    return leaf(a * 3 + b);
}
NOINLINE MS long ms3(long a, long b, long c)
{
    return leaf(a * 3 + b * 5 + c * 7);
}
NOINLINE MS long ms4(long a, long b, long c, long d)
{
    return leaf(a + 10 * b + 100 * c + 1000 * d);
}
NOINLINE MS double msd(double x, long a)
{
    return (double)leaf(a) * x;
}
NOINLINE MS long msp(const char *s, int n)
{
    return leaf(s[n]);
}
NOINLINE MS long ms_outer(long a, long b)
{
    long r = ms2(b, a);
    KEEP(r);
    return r + 1;
}

NOINLINE int via(void)
{
    int bad = 0;
    double total = 0, v;
    CHECK(1, ms1(7), 21);
    CHECK(2, ms2(7, 2), 23);
    CHECK(3, ms3(1, 2, 3), 34);
    CHECK(4, ms4(1, 2, 3, 4), 4321);
    CHECK(5, msd(2.5, 4), 10);
    CHECK(6, msp("abcdef", 3), 'd');
    CHECK(7, ms_outer(2, 5), 18);
    printf("msabi: total %.3f\n", total);
    return bad ? bad : 42;
}

NOINLINE int chain(void)
{
    int r = via();
    KEEP(r);
    return r;
}

int main(void)
{
    int r = chain();
    NOTAIL();
    return r;
}
