/* bwalk_local: _Unwind_Backtrace() that no wrapper of the tracer sees, from 3 traced frames
 * deep, with a callback that counts and never stops the walk. usage: bwalk_local MODE
 *   local   of a libgcc_s the program opened itself, RTLD_LOCAL
 *   direct  called directly: built with -static-libgcc, the program's own copy of libgcc
 *
 * The walk calls no personality, so at a hooked return it cannot see the real caller; it must
 * still end (before: the tracer's pseudo-frame repeated at one CFA, and the walk never did).
 * Prints "bwalk_local: the walk ended". tree: {main 1, main;w1 1, main;w1;w2 1,
 * main;w1;w2;w3 1}. Exit 0.
 */
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <unwind.h>
#include "behave.h"

typedef _Unwind_Reason_Code (*backtrace_fn)(_Unwind_Trace_Fn, void *);
static backtrace_fn walk;
static long frames;

NOTRACE static _Unwind_Reason_Code count(struct _Unwind_Context *ctx, void *arg)
{
    (void)ctx, (void)arg;
    frames++;
    return _URC_NO_REASON;
}

NOINLINE void w3(void)
{
    walk(count, NULL);
    NOTAIL();
}
NOINLINE void w2(void)
{
    w3();
    NOTAIL();
}
NOINLINE void w1(void)
{
    w2();
    NOTAIL();
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "direct")) {
        walk = _Unwind_Backtrace;
    } else {
        void *h = strcmp(mode, "local") ? NULL : dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL);
        if (!h || !(walk = (backtrace_fn)dlsym(h, "_Unwind_Backtrace"))) {
            fprintf(stderr, "usage: bwalk_local local|direct (and libgcc_s.so.1)\n");
            return 2;
        }
    }
    w1();
    printf("bwalk_local: the walk ended%s\n", frames > 0 ? "" : " at once");
    return 0;
}
