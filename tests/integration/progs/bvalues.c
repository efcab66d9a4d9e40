/* bvalues.c - functions whose arguments and return values values_tests.py records (-A, -R) and
 * compares, line by line, with what the program passed: integers of every width and sign,
 * enums, chars, bools, pointers, strings (NULL, unreadable, long, with escapes), floats and
 * doubles beside integers, structs by value, eight arguments (two on the stack), variadic
 * calls. Each function is kept out of line and its signature as written (noipa: no clones with
 * fewer parameters), and its result is used (no call is dropped). */
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#ifdef __clang__
#define KEEP __attribute__((noinline, used))
#else
#define KEEP __attribute__((noinline, noipa, used))
#endif

volatile long sink;

enum color { RED, GREEN = 5, BLUE = -3 };
struct pair {
    int a, b;
};
struct mix {
    double d;
    long l;
};

KEEP int8_t w8(int8_t a, uint8_t b)
{
    sink += b;
    return a;
}
KEEP int16_t w16(int16_t a, uint16_t b)
{
    sink += b;
    return a;
}
KEEP int32_t w32(int32_t a, uint32_t b)
{
    sink += b;
    return a;
}
KEEP int64_t w64(int64_t a, uint64_t b)
{
    sink += (long)b;
    return a;
}
KEEP int color_of(enum color c)
{
    return (int)c * 2;
}
KEEP char up(char c)
{
    return c >= 'a' && c <= 'z' ? (char)(c - 32) : c;
}
KEEP bool is_odd(int x)
{
    return x & 1;
}
KEEP void *same(void *p)
{
    sink++;
    return p;
}
KEEP int show(const char *s, int deref)
{
    return deref && s ? (int)strlen(s) : -1;
}
KEEP double fmix(float f, double d, int i)
{
    return f + d + i;
}
KEEP float fhalf(float x)
{
    return x / 2;
}
KEEP long pairsum(struct pair p)
{
    return p.a + p.b;
}
KEEP double mixsum(struct mix m)
{
    return m.d + (double)m.l;
}
KEEP long eight(long a, long b, long c, long d, long e, long f, long g, long h)
{
    return a + b + c + d + e + f + g + h;
}
KEEP int vsum(int n, ...)
{
    va_list ap;
    va_start(ap, n);
    int s = 0;
    for (int i = 0; i < n; i++)
        s += va_arg(ap, int);
    va_end(ap);
    return s;
}
KEEP long neg(long x)
{
    return -x;
}

int main(void)
{
    long t = 0;
    t += w8(-5, 250);
    t += w16(-300, 65000);
    t += w32(-70000, 4000000000u);
    t += w64(-9000000000L, 18000000000000000000ull);
    t += color_of(GREEN) + color_of(BLUE);
    t += up('q') + up('\n');
    t += is_odd(7) + is_odd(10);
    t += same(NULL) != NULL;
    t += show("hello", 1);
    t += show(NULL, 0);
    t += show((const char *)8, 0); /* never read by the function: the tracer must not fault */
    t += show("0123456789012345678901234567890123456789012345678901234567890123456789", 1);
    t += show("tab\t\"q\"\n", 1);
    t += (long)fmix(1.5f, -2.25, 3);
    t += (long)fhalf(5.0f);
    t += pairsum((struct pair){3, 4});
    t += (long)mixsum((struct mix){0.5, 9});
    t += eight(1, 2, 3, 4, 5, 6, 7, -8);
    t += vsum(3, 10, 20, 30);
    t += neg(42);
    printf("bvalues %ld\n", t);
    return 0;
}
