// bexc_fde: C++ exceptions through traced frames while someone else also answers libgcc's
// FDE lookups, forwarding the rest to the next definition (dlsym RTLD_NEXT, a tail call).
// usage: bexc_fde self|jit
//   self  the program defines _Unwind_Find_FDE itself (a profiler's or a sandbox's hook)
//   jit   libbjit.so defines it for code it generated (a thunk that calls back into us)
// Each throws 50 times through thrower <- mid and catches in main; prints "caught 50, hook
// asked". tree: {main 1, main;mid 50, main;mid;thrower 50} (self), {main 1, main;run 50,
// main;run;thrower 50} (jit: the thunk is not ours), and below thrower any number of calls
// of our _Unwind_Find_FDE (the unwinder's lookups). Exit 0.
#include <dlfcn.h>
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include "behave.h"

struct dwarf_eh_bases {
    void *tbase, *dbase, *func;
};
typedef const void *(*find_fn)(void *, dwarf_eh_bases *);
static long asked;

extern "C" {
void *bjit_thunk(void);
extern long bjit_lookups;
}

static bool self_mode;
/* Traced: at -O2 it ends in a tail call, so the next definition sees the tracer's address as
 * its caller (a hooked return, or the call-through trampoline). */
extern "C" const void *_Unwind_Find_FDE(void *pc, dwarf_eh_bases *b)
{
    static find_fn next;
    if (!next) next = (find_fn)dlsym(RTLD_NEXT, "_Unwind_Find_FDE");
    if (self_mode) asked++;
    return next(pc, b);
}

NOINLINE void thrower(int i)
{
    if (i >= 0) throw std::runtime_error("x");
}

NOINLINE int mid(int i)
{
    thrower(i);
    return i + 1;
}

NOINLINE void run(int i)
{
    void (*thunk)(void (*)(int), int) = (void (*)(void (*)(int), int))bjit_thunk();
    thunk(thrower, i);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    self_mode = !strcmp(mode, "self");
    if (!self_mode && strcmp(mode, "jit")) {
        fprintf(stderr, "usage: bexc_fde self|jit\n");
        return 2;
    }
    int caught = 0;
    for (int i = 0; i < 50; i++) {
        try {
            if (self_mode)
                mid(i);
            else
                run(i);
        } catch (const std::exception &) {
            caught++;
        }
    }
    long hook = self_mode ? asked : bjit_lookups;
    printf("caught %d, hook %s\n", caught, hook ? "asked" : "never asked");
    return 0;
}
