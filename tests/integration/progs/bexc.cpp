/* bexc: C++ exceptions through traced frames. usage: bexc MODE   (traced functions are
 * extern "C" so their names do not depend on demangling)
 *   throw      3 rounds: main -> d1 -> d2 -> d3 -> leaf, d3 throws; caught in main, which then
 *              calls after_catch. tree: {main 1, main;d1 3, main;d1;d2 3, main;d1;d2;d3 3,
 *              main;d1;d2;d3;leaf 3, main;after_catch 3}
 *   rethrow    3 rounds: main -> r_outer -> r_mid -> r_inner -> leaf, r_inner throws; r_mid
 *              catches, calls r_handle, rethrows (throw;); main catches, calls after_catch.
 *              tree: {main 1, main;r_outer 3, main;r_outer;r_mid 3, main;r_outer;r_mid;r_inner 3,
 *              main;r_outer;r_mid;r_inner;leaf 3, main;r_outer;r_mid;r_handle 3,
 *              main;after_catch 3}
 *   raii       3 rounds: main -> g_outer (Guard 1) -> g_mid (Guard 2) -> g_thrower -> leaf, throws;
 *              unwinding runs ~Guard (inlined, untraced) -> cleanup in g_mid's frame, then in
 *              g_outer's; main catches and calls after_catch.
 *              tree: {main 1, main;g_outer 3, main;g_outer;g_mid 3, main;g_outer;g_mid;g_thrower 3,
 *              main;g_outer;g_mid;g_thrower;leaf 3, main;g_outer;g_mid;cleanup 3,
 *              main;g_outer;cleanup 3, main;after_catch 3}
 *   terminate  main -> t1 -> t2 -> leaf, t2 throws and nothing catches: std::terminate, SIGABRT
 *              (as untraced). tree: {main, main;t1, main;t1;t2, main;t1;t2;leaf}; main, t1, t2
 *              stay open (terminate runs without unwinding).
 *   nested     3 rounds: main -> n1 -> n2 (holds a Catcher) -> n3 -> leaf, n3 throws. While the
 *              exception unwinds n2, ~Catcher (inlined) calls dtor_work, which throws a second
 *              exception from dtor_inner and catches it (then calls inner_caught); the first one
 *              goes on to main, which calls after_catch.
 *              tree: {main 1, main;n1 3, main;n1;n2 3, main;n1;n2;n3 3, main;n1;n2;n3;leaf 3,
 *              main;n1;n2;dtor_work 3, main;n1;n2;dtor_work;dtor_inner 3,
 *              main;n1;n2;dtor_work;inner_caught 3, main;after_catch 3}
 * Nothing is left open except in terminate. */
#include <cstdio>
#include <cstring>
#include "behave.h"

static volatile long sink;

extern "C" {
NOINLINE void leaf(void) { sink++; }
NOINLINE void after_catch(void) { sink++; }

NOINLINE void d3(int v)
{
    leaf();
    throw v;
}
NOINLINE void d2(int v)
{
    d3(v);
    NOTAIL();
}
NOINLINE void d1(int v)
{
    d2(v);
    NOTAIL();
}

NOINLINE void r_inner(int v)
{
    leaf();
    throw v;
}
NOINLINE void r_handle(int v) { sink += v; }
NOINLINE void r_mid(int v)
{
    try {
        r_inner(v);
        NOTAIL();
    } catch (int e) {
        r_handle(e);
        throw;
    }
}
NOINLINE void r_outer(int v)
{
    r_mid(v);
    NOTAIL();
}

NOINLINE void cleanup(int id) { sink += id; }
}

struct Guard {
    int id;
    __attribute__((always_inline)) inline ~Guard() { cleanup(id); }
};

extern "C" {
NOINLINE void g_thrower(int v)
{
    leaf();
    throw v;
}
NOINLINE void g_mid(int v)
{
    Guard g{2};
    g_thrower(v);
    NOTAIL();
}
NOINLINE void g_outer(int v)
{
    Guard g{1};
    g_mid(v);
    leaf(); /* not reached */
    NOTAIL();
}

NOINLINE void dtor_inner(void) { throw 7; }
NOINLINE void inner_caught(int v) { sink += v; }
NOINLINE void dtor_work(void)
{
    try {
        dtor_inner();
        NOTAIL();
    } catch (int e) {
        inner_caught(e);
    }
}
}

struct Catcher {
    __attribute__((always_inline)) inline ~Catcher() { dtor_work(); }
};

extern "C" {
NOINLINE void n3(int v)
{
    leaf();
    throw v;
}
NOINLINE void n2(int v)
{
    Catcher c;
    n3(v);
    NOTAIL();
}
NOINLINE void n1(int v)
{
    n2(v);
    NOTAIL();
}

NOINLINE void t2(void)
{
    leaf();
    throw 13;
}
NOINLINE void t1(void)
{
    t2();
    NOTAIL();
}
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    void (*fn)(int) = nullptr;
    int rc = 2;
    if (!strcmp(mode, "throw")) {
        fn = d1;
        rc = 61;
    } else if (!strcmp(mode, "rethrow")) {
        fn = r_outer;
        rc = 62;
    } else if (!strcmp(mode, "raii")) {
        fn = g_outer;
        rc = 63;
    } else if (!strcmp(mode, "nested")) {
        fn = n1;
        rc = 64;
    } else if (!strcmp(mode, "terminate")) {
        std::printf("terminate: throwing\n");
        std::fflush(stdout);
        t1();
        std::printf("not reached\n");
        return 1;
    } else {
        std::fprintf(stderr, "usage: bexc throw|rethrow|raii|nested|terminate\n");
        return 2;
    }
    int caught = 0;
    for (int i = 0; i < 3; i++) {
        try {
            fn(i + 1);
            std::printf("not reached\n");
        } catch (int e) {
            caught += e;
            after_catch();
        }
    }
    std::printf("%s: caught %d, sink %ld\n", mode, caught, (long)sink);
    return rc;
}
