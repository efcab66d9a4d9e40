/* bcalls: how functions are called: variadic functions, function pointers and tables of them,
 * callbacks from the C library (qsort, bsearch). usage: bcalls MODE
 *   variadic  main -> variadic -> sum_ints x 3 (2, 5 and 12 int arguments: the last ones on the
 *             stack), each calling add_one once per argument (19); sum_mixed x 2 (ints, longs
 *             and doubles: the doubles travel in xmm0-7 and on the stack, %al tells the callee
 *             how many vector registers hold arguments: the hooks must keep them all), each
 *             calling add_one once per argument (8 + 15 = 23); log_line x 2 (variadic),
 *             each passing its va_list to vlog. The results are checked against the values
 *             computed by hand (exit status 10 + the first wrong one, else 40).
 *             tree {main 1, main;variadic 1, main;variadic;sum_ints 3,
 *             main;variadic;sum_ints;add_one 19, main;variadic;sum_mixed 2,
 *             main;variadic;sum_mixed;add_one 23, main;variadic;log_line 2,
 *             main;variadic;log_line;vlog 2}
 *   fnptr     main -> fnptr -> dispatch x 8 through a table of 4 operations (op_add, op_sub,
 *             op_mul, op_div: 2 each, below dispatch); 2 shapes, each with a table of 2
 *             methods (sq_area, sq_name; ci_area, ci_name), called once each from fnptr;
 *             apply(f, x) x 4 with f = twice (3) and square (1), calling f once each, twice
 *             calling add_one; pick(i) x 2 returns a function pointer, which fnptr calls
 *             (twice, square: below fnptr).
 *             tree {main 1, main;fnptr 1, main;fnptr;dispatch 8, main;fnptr;dispatch;op_add 2,
 *             ...;op_sub 2, ...;op_mul 2, ...;op_div 2, main;fnptr;sq_area 1,
 *             main;fnptr;sq_name 1, main;fnptr;ci_area 1, main;fnptr;ci_name 1,
 *             main;fnptr;apply 4, main;fnptr;apply;twice 3, main;fnptr;apply;twice;add_one 3,
 *             main;fnptr;apply;square 1, main;fnptr;pick 2, main;fnptr;twice 1,
 *             main;fnptr;twice;add_one 1, main;fnptr;square 1}
 *   sort      main -> sorting -> qsort() of 200 ints (cmp_int), of 40 records by name
 *             (cmp_name), then bsearch() for 30 keys (cmp_key); each comparison calls key_of
 *             (cmp_int and cmp_key once, cmp_name twice). The program counts its comparator
 *             calls and prints "sort: cmp_int N cmp_name N cmp_key N": the tree must hold
 *             exactly those: {main 1, main;sorting 1, main;sorting;cmp_int N1,
 *             main;sorting;cmp_int;key_of N1, main;sorting;cmp_name N2,
 *             main;sorting;cmp_name;key_of 2*N2, main;sorting;cmp_key N3,
 *             main;sorting;cmp_key;key_of N3}
 */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "behave.h"

static volatile long sink;

NOINLINE long add_one(long x)
{
    sink += x;
    return x + 1;
}

/* ---- variadic ---- */
NOINLINE long sum_ints(int n, ...)
{
    va_list ap;
    va_start(ap, n);
    long s = 0;
    for (int i = 0; i < n; i++)
        s += add_one(va_arg(ap, int));
    va_end(ap);
    return s;
}
/* fmt: i int, l long, d double; returns the sum of (each argument + 1), doubles times 1000 */
NOINLINE double sum_mixed(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    double s = 0;
    for (const char *p = fmt; *p; p++) {
        if (*p == 'i')
            s += add_one(va_arg(ap, int));
        else if (*p == 'l')
            s += add_one(va_arg(ap, long));
        else {
            double d = va_arg(ap, double);
            s += add_one((long)(d * 1000)) + (d * 1000 - (long)(d * 1000));
        }
    }
    va_end(ap);
    return s;
}
NOINLINE void vlog(const char *fmt, va_list ap)
{
    char buf[256];
    vsnprintf(buf, sizeof buf, fmt, ap);
    printf("log: %s\n", buf);
}
NOINLINE void log_line(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vlog(fmt, ap);
    va_end(ap);
}
NOINLINE int variadic(void)
{
    long a = sum_ints(2, 10, 20);
    long b = sum_ints(5, 1, 2, 3, 4, 5);
    long c = sum_ints(12, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12);
    /* 8 arguments: 3 ints, 2 longs, 3 doubles */
    double d = sum_mixed("idlidlid", 1, 0.5, 2L, 3, 1.25, 4L, 5, 2.0);
    /* 15: 11 doubles (8 in registers, 3 on the stack) and 4 ints */
    double e = sum_mixed("ddddiddddiddidi", 0.001, 0.002, 0.003, 0.004, 1, 0.005, 0.006, 0.007,
                         0.008, 2, 0.009, 0.010, 3, 0.011, 4);
    log_line("%d %s %.2f %ld", 42, "text", 3.25, 7L);
    log_line("%c%c%c %x %e", 'a', 'b', 'c', 255, 1e10);
    printf("variadic: %ld %ld %ld %.3f %.3f\n", a, b, c, d, e);
    const double want[] = {
        32, 20, 90, 1 + 1 + 500 + 1 + 2 + 1 + 3 + 1 + 1250 + 1 + 4 + 1 + 5 + 1 + 2000 + 1,
        (1 + 2 + 3 + 4 + 5 + 6 + 7 + 8 + 9 + 10 + 11) + 11 + (1 + 2 + 3 + 4) + 4};
    const double got[] = {a, b, c, d, e};
    for (int i = 0; i < 5; i++)
        if (got[i] < want[i] - 1e-6 || got[i] > want[i] + 1e-6) return 10 + i;
    return 40;
}

/* ---- function pointers ---- */
NOINLINE int op_add(int a, int b)
{
    return a + b;
}
NOINLINE int op_sub(int a, int b)
{
    return a - b;
}
NOINLINE int op_mul(int a, int b)
{
    return a * b;
}
NOINLINE int op_div(int a, int b)
{
    return b ? a / b : 0;
}
typedef int (*op_fn)(int, int);
static op_fn ops[] = {op_add, op_sub, op_mul, op_div};
static volatile int op_base; /* keeps the table index unknown to the compiler */
NOINLINE int dispatch(int i, int a, int b)
{
    int r = ops[(i + op_base) % 4](a, b);
    KEEP(r); /* a call, not a jmp */
    return r;
}

struct shape_ops {
    double (*area)(double);
    const char *(*name)(void);
};
NOINLINE double sq_area(double s)
{
    return s * s;
}
NOINLINE const char *sq_name(void)
{
    return "square";
}
NOINLINE double ci_area(double r)
{
    return 3.0 * r * r;
}
NOINLINE const char *ci_name(void)
{
    return "circle";
}
static const struct shape_ops shapes[] = {{sq_area, sq_name}, {ci_area, ci_name}};
static volatile int shape_base;

NOINLINE int twice(int x)
{
    return 2 * (int)add_one(x);
}
NOINLINE int square(int x)
{
    return x * x;
}
NOINLINE int apply(int (*f)(int), int x)
{
    int r = f(x);
    KEEP(r);
    return r;
}
typedef int (*unary_fn)(int);
NOINLINE unary_fn pick(int i)
{
    return i + op_base ? square : twice;
}

NOINLINE int fnptr(void)
{
    int s = 0;
    for (int i = 0; i < 8; i++)
        s += dispatch(i, 12, 4);
    for (int i = 0; i < 2; i++) {
        const struct shape_ops *o = &shapes[(i + shape_base) % 2];
        printf("fnptr: %s %.1f\n", o->name(), o->area(2.0));
    }
    unary_fn fs[] = {twice, square, twice, twice};
    for (int i = 0; i < 4; i++)
        s += apply(fs[(i + op_base) % 4], i + 1);
    for (int i = 0; i < 2; i++) {
        int r = pick(i)(5);
        KEEP(r);
        s += r;
    }
    printf("fnptr: %d\n", s);
    return s == 213 ? 41 : 11;
}

/* ---- callbacks from the C library ---- */
static long n_int, n_name, n_key;
struct rec {
    char name[16];
    int v;
};
/* with a side effect: the compiler may neither drop nor move a call whose result is unused */
NOINLINE int key_of(int v)
{
    sink++;
    return v ^ 0x5a5a;
}
NOINLINE int cmp_int(const void *a, const void *b)
{
    n_int++;
    int x = key_of(*(const int *)a), y = *(const int *)b ^ 0x5a5a;
    return (x > y) - (x < y);
}
NOINLINE int cmp_name(const void *a, const void *b)
{
    const struct rec *x = a, *y = b;
    n_name++;
    int c = strcmp(x->name, y->name);
    int kx = key_of(x->v), ky = key_of(y->v);
    return c ? c : (kx > ky) - (kx < ky);
}
NOINLINE int cmp_key(const void *k, const void *e)
{
    n_key++;
    int x = *(const int *)k, y = key_of(*(const int *)e);
    return (x > y) - (x < y);
}
NOINLINE int sorting(void)
{
    static int v[200];
    static struct rec r[40];
    unsigned seed = 12345;
    for (int i = 0; i < 200; i++) {
        seed = seed * 1103515245 + 12345;
        v[i] = (int)(seed >> 8) % 1000;
    }
    for (int i = 0; i < 40; i++) {
        seed = seed * 1103515245 + 12345;
        snprintf(r[i].name, sizeof r[i].name, "n%02u", (seed >> 10) % 30);
        r[i].v = i;
    }
    qsort(v, 200, sizeof v[0], cmp_int);
    qsort(r, 40, sizeof r[0], cmp_name);
    int found = 0;
    for (int k = 0; k < 30; k++) {
        int key = (k * 37 % 1000) ^ 0x5a5a;
        found += bsearch(&key, v, 200, sizeof v[0], cmp_key) != NULL;
    }
    printf("sort: first %d last %d, %s..%s, found %d\n", v[0], v[199], r[0].name, r[39].name,
           found);
    printf("sort: cmp_int %ld cmp_name %ld cmp_key %ld\n", n_int, n_name, n_key);
    return 42;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "variadic")) return variadic();
    if (!strcmp(mode, "fnptr")) return fnptr();
    if (!strcmp(mode, "sort")) return sorting();
    return 1;
}
