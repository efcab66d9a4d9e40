/* blc_cxxabi.cpp - the C++ ABI's library calls (libcall_tests.py, the "C++ ABI" cases), which
 * uftrace records:
 *  - g, a global object with a destructor: the static initialiser constructs it and registers
 *    its destructor with __cxa_atexit, before main;
 *  - use()'s static Counter, first used by main and by a worker thread at once: its constructor
 *    (in main, inside __cxa_guard_acquire's guard) waits for the worker to wait in
 *    __cxa_guard_acquire too (libstdc++ sets the guard's waiting bit before it sleeps), so both
 *    threads call __cxa_guard_acquire, main alone __cxa_guard_release and __cxa_atexit (the
 *    static's destructor); the later uses call nothing;
 *  - flaky()'s static Flaky, whose constructor throws the first time: __cxa_guard_acquire,
 *    __cxa_guard_abort; the second time __cxa_guard_acquire, __cxa_guard_release;
 *  - a throw caught by value: __cxa_allocate_exception, then __cxa_get_exception_ptr,
 *    __cxa_begin_catch and __cxa_end_catch (__cxa_throw is not traced: it never returns), the
 *    type named with __cxa_current_exception_type and __cxa_demangle;
 *  - the worker's thread_local object with a destructor: __cxa_thread_atexit.
 * Traced functions are extern "C" (names that do not depend on demangling), but use(), whose
 * guard is named after its mangled name (the report shows "use"); the constructors are
 * inlined or not, so the test looks at the library calls' callers only through these.
 *   blc_cxxabi     prints what it did; exit status 5
 */
#include <cxxabi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <typeinfo>
#include <unistd.h>

#include "progs.h"

/* use()'s guard variable (Itanium C++ ABI: "guard variable for use()::c") */
extern long use_guard asm("_ZGVZ3usevE1c");
static volatile int go;
static volatile long sink;

/* Sleeps without a library call that would be traced (syscall() never is) */
static void nap(void)
{
    struct timespec ts = {0, 1000000};
    syscall(SYS_nanosleep, &ts, NULL);
}

extern "C" {
NOINLINE void made(const char *what)
{
    printf("made %s\n", what);
}
NOINLINE void gone(const char *what)
{
    printf("gone %s\n", what);
}

void wait_for_waiter(void);
}

struct Global {
    Global() { made("g"); }
    ~Global() { gone("g"); }
};
Global g;

struct Counter {
    int n;
    Counter() : n(0)
    {
        wait_for_waiter();
        made("counter");
    }
    ~Counter() { gone("counter"); }
};

struct Flaky {
    int v;
    Flaky();
};
static int flaky_tries;
Flaky::Flaky() : v(7)
{
    if (!flaky_tries++) throw 1;
}

struct Err {
    int v;
    explicit Err(int x) : v(x) {}
    Err(const Err &o) : v(o.v + 100) {}
    ~Err() { sink++; }
};

struct Tls {
    int n = 0;
    ~Tls() { gone("tls"); }
};

/* named use (C++ linkage: "use()" demangled; its guard is use_guard above) */
NOINLINE int use()
{
    static Counter c;
    return ++c.n;
}

/* In main, inside the guard: the worker waits in __cxa_guard_acquire before this returns
 * (defined after use(), whose guard clang must have emitted before a reference to it) */
extern "C" NOINLINE void wait_for_waiter(void)
{
    go = 1;
    for (int i = 0; i < 20000; i++) {
        if (__atomic_load_n(&use_guard, __ATOMIC_ACQUIRE) & 0x10000) return;
        nap();
    }
    printf("no waiter\n");
}

extern "C" {
NOINLINE int flaky(void)
{
    static Flaky f;
    return f.v;
}

NOINLINE void thrower(int v)
{
    throw Err(v);
}

NOINLINE int catcher(int v)
{
    try {
        thrower(v);
    } catch (Err e) {
        int status = -1;
        char *name =
            abi::__cxa_demangle(abi::__cxa_current_exception_type()->name(), 0, 0, &status);
        printf("caught %s %d (%d)\n", name ? name : "?", e.v, status);
        free(name);
        return e.v;
    }
    return -1;
}

NOINLINE int tls_use(void)
{
    static thread_local Tls t;
    return ++t.n;
}

NOINLINE void *worker(void *arg)
{
    (void)arg;
    while (!go)
        nap();
    use();
    tls_use();
    return NULL;
}

int main(void)
{
    pthread_t t;
    if (pthread_create(&t, NULL, worker, NULL)) return 1;
    use();
    pthread_join(t, NULL);
    int n = 0;
    for (int i = 0; i < 3; i++)
        n = use();
    int f = -1;
    for (int i = 0; i < 2; i++) {
        try {
            f = flaky();
        } catch (int e) {
            printf("flaky threw %d\n", e);
        }
    }
    printf("use %d flaky %d tries %d caught %d\n", n, f, flaky_tries, catcher(5));
    return 5;
}
}
