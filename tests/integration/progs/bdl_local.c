/* bdl_local: a C program that opens a C++ plugin (libbplug.so) 20 times, RTLD_LOCAL and
 * RTLD_GLOBAL in turn, and runs it: exceptions thrown and caught, and _Unwind_Backtrace, inside
 * the plugin. usage: bdl_local DIR (where libbplug.so is)
 * Prints "bdl_local: 120" (20 x (5 catches + a walk)). tree: {main 1, main;call_plug 20,
 * main;call_plug;plug_run 20, main;call_plug;plug_run;r^k for k <= i % 4 + 1: 5 per i}. */
#include <dlfcn.h>
#include <stdio.h>
#include "behave.h"

NOINLINE int call_plug(void *h, int d)
{
    int (*run)(int) = (int (*)(int))dlsym(h, "plug_run");
    int v = run ? run(d) : -1000;
    KEEP(v);
    return v;
}

int main(int argc, char **argv)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/libbplug.so", argc > 1 ? argv[1] : ".");
    int total = 0;
    for (int i = 0; i < 20; i++) {
        void *h = dlopen(path, RTLD_NOW | (i & 1 ? RTLD_GLOBAL : RTLD_LOCAL));
        if (!h) {
            fprintf(stderr, "bdl_local: %s\n", dlerror());
            return 2;
        }
        total += call_plug(h, i % 4);
        dlclose(h);
    }
    printf("bdl_local: %d\n", total);
    return 0;
}
