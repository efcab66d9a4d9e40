/* libblc_malloc: a preloaded malloc wrapper of the common kind (libcall_tests.py), which
 * finds the real functions with dlsym(RTLD_NEXT) on first use, from inside malloc/free */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stddef.h>

static void *(*real_malloc)(size_t);
static void (*real_free)(void *);

void *malloc(size_t n)
{
    if (!real_malloc) real_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    return real_malloc(n);
}

void free(void *p)
{
    if (!real_free) real_free = (void (*)(void *))dlsym(RTLD_NEXT, "free");
    real_free(p);
}
