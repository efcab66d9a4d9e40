/* blibs: instrumented shared libraries. usage: blibs MODE
 *   needed  libbneeded.so is a DT_NEEDED dependency: main -> lib_outer x 2, each
 *           lib_outer -> lib_inner x 2, then lib_outer -> app_cb (back in the program).
 *           tree: {main 1, main;lib_outer 2, main;lib_outer;lib_inner 4, main;lib_outer;app_cb 2}
 *   dlopen  a thread (spinner) keeps calling spin_leaf while main dlopen()s libbdla.so (next to
 *           the executable), calls dla_func x 2, dlclose()s it, dlopen()s libbdlb.so and calls
 *           dlb_func x 3. trees: main {main, main;dla_func 2, main;dla_func;dla_inner 2,
 *           main;dlb_func 3, main;dlb_func;dlb_inner 3}; spinner {spinner, spinner;spin_leaf N}
 */
#include <dlfcn.h>
#include <libgen.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "behave.h"

int lib_outer(int x, int (*cb)(int));
static volatile long sink;
NOINLINE int app_cb(int x) { sink += x; return 1; }

static volatile int stop;
static volatile long spins;
NOINLINE void spin_leaf(void) { spins++; }
NOINLINE void *spinner(void *arg)
{
    (void)arg;
    while (!stop)
        spin_leaf();
    return NULL;
}

NOTRACE static void wait_spins(long n)
{
    long target = spins + n;
    while (spins < target)
        ;
}

NOTRACE static int call_lib(const char *dir, const char *lib, const char *sym, int times)
{
    char path[PATH_MAX];
    snprintf(path, sizeof path, "%s/%s", dir, lib);
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("dlopen %s: %s\n", lib, dlerror());
        return -1;
    }
    int (*f)(int) = (int (*)(int))dlsym(h, sym);
    int s = 0;
    wait_spins(1000); /* the spinner runs traced code meanwhile */
    for (int i = 0; f && i < times; i++)
        s += f(i + 1);
    if (getenv("BLIBS_DEBUG"))
        fprintf(stderr, "%s at %p\n", sym, (void *)f);
    dlclose(h);
    return s;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "needed")) {
        int s = lib_outer(1, app_cb) + lib_outer(10, app_cb);
        printf("needed: %d\n", s);
        return 91;
    }
    if (!strcmp(mode, "dlopen")) {
        char exe[PATH_MAX];
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        exe[n > 0 ? n : 0] = 0;
        const char *dir = dirname(exe);
        pthread_t t;
        pthread_create(&t, NULL, spinner, NULL);
        wait_spins(1000);
        int a = call_lib(dir, "libbdla.so", "dla_func", 2);
        int b = call_lib(dir, "libbdlb.so", "dlb_func", 3);
        stop = 1;
        pthread_join(t, NULL);
        printf("dlopen: a %d, b %d\n", a, b);
        return 92;
    }
    fprintf(stderr, "usage: blibs needed|dlopen\n");
    return 2;
}
