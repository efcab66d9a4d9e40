/* blc_origin: dlopen()s by its own RUNPATH ($ORIGIN/sub) and an interposed puts()
 * (libcall_tests.py); prints what it got */
#include <dlfcn.h>
#include <stdio.h>

#include "progs.h"

NOINLINE int load(void)
{
    void *h = dlopen("libblibcall.so", RTLD_NOW);
    printf("%s\n", h ? "loaded" : "not found");
    return h != NULL;
}

int main(void)
{
    puts("hello");
    return load() ? 0 : 1;
}
