/* bargs: how arguments and return values travel, for call-through exits (the tracer calls a
 * function's body itself, the stack 16 bytes lower, only when DWARF says that nothing travels
 * on the stack; everything else keeps the return hook). usage: bargs MODE
 *   args  main -> args -> each function below once, in this order, each calling leaf() once:
 *         i6 (6 ints: all in registers), i7 (7: one on the stack), i8 (8: two), d8 (8 doubles:
 *         xmm0-7), d9 (9: one on the stack), mix (6 ints and 8 doubles), s8 and s16 (a struct of
 *         8 and 16 bytes by value: registers), f16 (a struct of two doubles: xmm), s24 (a struct
 *         of 24 bytes: on the stack), many16 (four 16-byte structs: the fourth on the stack),
 *         vsum (variadic, 10 ints: 4 on the stack), ld (a long double argument: on the stack),
 *         r16 (returns a 16-byte struct in rax:rdx), r24 (returns a 24-byte struct through a
 *         hidden pointer), rld (returns a long double in st0), rf2 (returns two floats in xmm0),
 *         r24many (returns a 24-byte struct and takes 6 ints: the sixth on the stack).
 *         Every result is checked against the value computed by hand: exit status 10 + the
 *         first wrong one, else 40; the sum is printed.
 *         tree {main 1, main;args 1, main;args;F 1 and main;args;F;leaf 1 for each F above}
 *   deep  main -> deep -> rec, 100 000 deep (each level once; the thread's stack holds that
 *         only if the tracer adds nothing to most frames: call-through adds 16 bytes to a
 *         frame, the return hook none). Prints the depth reached; exit status 41.
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "behave.h"
#include "checks.h"

static volatile long sink;

NOINLINE long leaf(long x)
{
    sink += x;
    return x;
}

struct s8 {
    long a;
};
struct s16 {
    long a, b;
};
struct f16 {
    double x, y;
};
struct s24 {
    long a, b, c;
};
struct f2 {
    float a, b;
};

NOINLINE long i6(long a, long b, long c, long d, long e, long f)
{
    return leaf(a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f);
}
NOINLINE long i7(long a, long b, long c, long d, long e, long f, long g)
{
    return leaf(a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g);
}
NOINLINE long i8(long a, long b, long c, long d, long e, long f, long g, long h)
{
    return leaf(a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h);
}
NOINLINE double d8(double a, double b, double c, double d, double e, double f, double g, double h)
{
    return (double)leaf((long)(a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h));
}
NOINLINE double d9(double a, double b, double c, double d, double e, double f, double g, double h,
                   double i)
{
    return (double)leaf((long)(a + 2 * b + 3 * c + 4 * d + 5 * e + 6 * f + 7 * g + 8 * h + 9 * i));
}
NOINLINE double mix(long a, double x, long b, double y, long c, double z, long d, double w, long e,
                    double v, long f, double u, double t, double s)
{
    return (double)leaf(a + b + c + d + e + f) + x + 2 * y + 3 * z + 4 * w + 5 * v + 6 * u + 7 * t +
           8 * s;
}
NOINLINE long s8(struct s8 p, long k)
{
    return leaf(p.a * k);
}
NOINLINE long s16(struct s16 p, long k)
{
    return leaf(p.a * k + p.b);
}
NOINLINE double f16(struct f16 p, long k)
{
    return (double)leaf(k) + p.x * p.y;
}
NOINLINE long s24(struct s24 p, long k)
{
    return leaf(p.a + 2 * p.b + 3 * p.c + k);
}
NOINLINE long many16(struct s16 p, struct s16 q, struct s16 r, struct s16 s)
{
    return leaf(p.a + q.b + r.a * 10 + s.b * 100);
}
NOINLINE long vsum(int n, ...)
{
    va_list ap;
    long t = 0;
    va_start(ap, n);
    for (int i = 0; i < n; i++)
        t += (long)(i + 1) * va_arg(ap, long);
    va_end(ap);
    return leaf(t);
}
NOINLINE long ld(long double x, long k)
{
    return leaf((long)(x * 4) + k);
}
NOINLINE struct s16 r16(long k)
{
    struct s16 r = {leaf(k), k * 3};
    return r;
}
NOINLINE struct s24 r24(long k)
{
    struct s24 r = {leaf(k), k * 3, k * 5};
    return r;
}
NOINLINE long double rld(long k)
{
    return (long double)leaf(k) / 4;
}
NOINLINE struct f2 rf2(long k)
{
    struct f2 r = {(float)leaf(k), 0.5f};
    return r;
}
NOINLINE struct s24 r24many(long a, long b, long c, long d, long e, long f)
{
    struct s24 r = {leaf(a + b + c), d + e, f};
    return r;
}

NOINLINE int args(void)
{
    int bad = 0;
    double total = 0, v;
    CHECK(1, i6(1, 2, 3, 4, 5, 6), 91);
    CHECK(2, i7(1, 2, 3, 4, 5, 6, 7), 140);
    CHECK(3, i8(1, 2, 3, 4, 5, 6, 7, 8), 204);
    CHECK(4, d8(1, 2, 3, 4, 5, 6, 7, 8), 204);
    CHECK(5, d9(1, 2, 3, 4, 5, 6, 7, 8, 9), 285);
    CHECK(6, mix(1, 1, 2, 1, 3, 1, 4, 1, 5, 1, 6, 1, 1, 1), 21 + 36);
    CHECK(7, s8((struct s8){7}, 3), 21);
    CHECK(8, s16((struct s16){7, 5}, 3), 26);
    CHECK(9, f16((struct f16){1.5, 4}, 3), 9);
    CHECK(10, s24((struct s24){1, 2, 3}, 4), 18);
    CHECK(11,
          many16((struct s16){1, 2}, (struct s16){3, 4}, (struct s16){5, 6}, (struct s16){7, 8}),
          855);
    CHECK(12, vsum(10, 1L, 1L, 1L, 1L, 1L, 1L, 1L, 1L, 1L, 2L), 65);
    CHECK(13, ld(2.5L, 1), 11);
    struct s16 a = r16(4);
    CHECK(14, a.a * 100 + a.b, 412);
    struct s24 b = r24(2);
    CHECK(15, b.a * 100 + b.b * 10 + b.c, 270);
    CHECK(16, rld(10), 2.5);
    struct f2 c = rf2(3);
    CHECK(17, c.a + c.b, 3.5);
    struct s24 d = r24many(1, 2, 3, 4, 5, 6);
    CHECK(18, d.a * 100 + d.b * 10 + d.c, 696);
    printf("args: total %.3f\n", total);
    return bad ? bad : 40;
}

static volatile long one = 1;

NOINLINE long rec(long n)
{
    if (n == 0) return 0;
    long r = rec(n - 1);
    return r + one; /* a volatile read after the call: no loop, no tail call */
}

NOINLINE long deep(void)
{
    return rec(100000);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "args")) return args();
    if (!strcmp(mode, "deep")) {
        long d = deep();
        NOTAIL();
        printf("deep: %ld\n", d);
        return 41;
    }
    fprintf(stderr, "usage: bargs args|deep\n");
    return 2;
}
