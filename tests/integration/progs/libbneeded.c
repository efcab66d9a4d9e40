/* libbneeded: an instrumented library blibs links (DT_NEEDED). lib_outer -> lib_inner x 2, and
 * a call back into the program (through a pointer). */
#include "behave.h"

static volatile long sink;
NOINLINE int lib_inner(int x)
{
    sink += x;
    return x + 1;
}
NOINLINE int lib_outer(int x, int (*cb)(int))
{
    int r = lib_inner(x) + lib_inner(x + 1);
    r += cb(r);
    KEEP(r);
    return r;
}
