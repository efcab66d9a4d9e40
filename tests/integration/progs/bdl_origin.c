/* bdl_origin: dlopen() of names holding $ORIGIN or ${ORIGIN} (the directory of the *calling*
 * object), from the executable and from a library in another directory, and of bare names
 * found along the caller's own search path: the executable's DT_RPATH ($ORIGIN/sub, linked
 * --disable-new-dtags), the library's DT_RUNPATH ($ORIGIN/sub). Every library is libbdlo.c,
 * built with its own value (behaviours.py, case lib-dlopen-origin), next to the executable:
 *   sub/libbdlo_val.so 1, sub/libbdlo_bare.so 3, sub/libbdlo_lib.so 5,
 *   other/libbdlo_mid.so (-DMID), other/sub/libbdlo_val.so 2, other/sub/libbdlo_lib.so 4.
 * main loads $ORIGIN/sub/libbdlo_val.so (1), libbdlo_bare.so (3) and
 * ${ORIGIN}/other/libbdlo_mid.so, whose bdlo_val loads ${ORIGIN}/sub/libbdlo_val.so (2, not
 * the executable's 1) and libbdlo_lib.so (4, not the 5 along the executable's RPATH): 24.
 * The two name the value library differently ($ORIGIN, ${ORIGIN}): glibc first matches a name
 * against those objects were opened by, unexpanded, so the same string would give main's.
 * Prints "origin: 1 3 24" and exits 0 when each is right, else 1.
 * tree: {main 1, main;load 3, main;load;bdlo_val 3, main;load;bdlo_val;open_val 2,
 * main;load;bdlo_val;open_val;bdlo_val 2} */
#include <dlfcn.h>
#include <stdio.h>
#include "behave.h"

NOINLINE int load(const char *name)
{
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("%s: not loaded\n", name);
        return -1;
    }
    int (*val)(void) = (int (*)(void))dlsym(h, "bdlo_val");
    int v = val ? val() : -1;
    KEEP(v);
    return v;
}

int main(void)
{
    int a = load("$ORIGIN/sub/libbdlo_val.so");
    int b = load("libbdlo_bare.so");
    int c = load("${ORIGIN}/other/libbdlo_mid.so");
    printf("origin: %d %d %d\n", a, b, c);
    return a == 1 && b == 3 && c == 24 ? 0 : 1;
}
