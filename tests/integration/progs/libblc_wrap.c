/* libblc_wrap: an interposer the traced program links against (libcall_tests.py): its puts()
 * finds the next one with dlsym(RTLD_NEXT), which looks at its caller */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdio.h>

int puts(const char *s)
{
    int (*next)(const char *) = (int (*)(const char *))dlsym(RTLD_NEXT, "puts");
    fputs("[wrap] ", stdout);
    return next ? next(s) : -1;
}
