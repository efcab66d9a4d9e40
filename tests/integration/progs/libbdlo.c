/* libbdlo: the libraries of bdl_origin.c. Built with -DVAL=n: bdlo_val() returns n. Built with
 * -DMID (other/libbdlo_mid.so, DT_RUNPATH $ORIGIN/sub): bdlo_val() opens
 * ${ORIGIN}/sub/libbdlo_val.so and libbdlo_lib.so itself and returns 10 x the first one's value
 * plus the second one's. */
#include <dlfcn.h>
#include "behave.h"

#ifdef MID
NOINLINE static int open_val(const char *name)
{
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    int (*val)(void) = h ? (int (*)(void))dlsym(h, "bdlo_val") : 0;
    int v = val ? val() : -1;
    KEEP(v);
    return v;
}

int bdlo_val(void)
{
    return open_val("${ORIGIN}/sub/libbdlo_val.so") * 10 + open_val("libbdlo_lib.so");
}
#else
int bdlo_val(void)
{
    return VAL;
}
#endif
