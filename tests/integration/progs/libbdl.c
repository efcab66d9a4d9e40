/* libbdl: built twice, as libbdla.so (-DTAG=a: dla_func, dla_inner) and libbdlb.so (-DTAG=b:
 * dlb_func, dlb_inner), from the same code: same layout, so that libbdlb.so, loaded after
 * libbdla.so was closed, may land at the same address with its functions at the same offsets;
 * names in the trace must be those of the library mapped at the time of the call. */
#include "behave.h"

#define CAT2(a, b, c) a##b##c
#define CAT(a, b, c) CAT2(a, b, c)
#define NAME(x) CAT(dl, TAG, _##x)

static volatile long sink;
NOINLINE int NAME(inner)(int x)
{
    sink += x;
    return x * 2;
}
NOINLINE int NAME(func)(int x)
{
    int r = NAME(inner)(x);
    KEEP(r);
    return r + 1;
}
