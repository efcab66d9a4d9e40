/*
 * thread_start.c - pthread_create() wrapped: a new thread is set up for tracing by a start
 * routine of ours, before the program's own runs, in an ordinary context (so its first traced
 * call, even inside a signal handler, finds everything ready), with the stack bounds the
 * creating thread's attributes give. Threads started any other way are set up at their first
 * hook (threads.c, async-signal-safe as well).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <linux/futex.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tracer.h"

#define EXPORT __attribute__((visibility("default")))

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static create_fn real_create;

static void *start(void *arg)
{
    struct ftr_thread *r = arg;
    void *(*fn)(void *) = r->start_fn;
    void *fn_arg = r->start_arg;
    if (ftr_tls.state == FTR_T_NEW)
        ftr_thread_init_slow(r);
    else
        ftr_thread_unreserve(r);
    return fn(fn_arg);
}

/* The stack the attributes give: exact when the program supplied it, else only its size. */
static void stack_of(struct ftr_thread *r, const pthread_attr_t *attr)
{
    void *lo = NULL;
    size_t size = 0;
    pthread_attr_t def;
    if (!attr && pthread_getattr_default_np(&def) == 0) {
        /* the default now: pthread_setattr_default_np() may have changed it since start */
        if (pthread_attr_getstacksize(&def, &size) == 0) r->stack_size = size;
        pthread_attr_destroy(&def);
        return;
    }
    if (!attr || pthread_attr_getstack(attr, &lo, &size) != 0) return;
    /* glibc answers top - size: a stack not supplied has top NULL */
    uintptr_t top = (uintptr_t)lo + size;
    if (top && size) {
        r->stack_hi = top;
        r->stack_lo = top - size;
    } else {
        r->stack_size = size;
    }
}

/* Our own threads (the writer, the control server): not set up for tracing, and nothing glibc
 * runs of the program's while creating them is recorded as if the program had called it: its
 * calloc() for the thread's TLS vector (glibc allocates it with the program's allocator, which
 * no option changes), its free() of an old one on a reused stack.
 *
 * No handler of the program's may ever run on them: they block every signal at their first
 * instruction (own_start), and until then run with the creating thread's mask plus every signal
 * that has a handler. The creator's mask is the program's: for the moment of pthread_create()
 * only those signals are added to it, so that a signal whose action is the default one (SIGTERM,
 * SIGINT: end the process) still acts while glibc runs the program's calloc() there, and a
 * program whose calloc() blocks for good still ends on SIGTERM (live_tests.py hung_start).
 * pthread_attr_setsigmask_np() would leave the creator's mask alone, but allocates with that
 * calloc() too (a call the program sees: proc-own-malloc). */
struct own_start {
    void *(*fn)(void *);
    void *arg;
    uint32_t taken; /* futex word: the new thread has read fn and arg */
};

static void *own_start(void *p)
{
    uint64_t all = ~0ull;
    syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, NULL, sizeof all);
    struct own_start *o = p;
    void *(*fn)(void *) = o->fn;
    void *arg = o->arg;
    __atomic_store_n(&o->taken, 1, __ATOMIC_RELEASE);
    syscall(SYS_futex, &o->taken, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    return fn(arg); /* o is gone from here on */
}

/* @return in *set: the signals whose action is a handler (the program's, or ours) */
static void handled_signals(uint64_t *set)
{
    *set = 0;
    for (int sig = 1; sig <= 64; sig++) {
        struct {
            unsigned long handler, flags, restorer, mask;
        } ka;
        if (sig == SIGKILL || sig == SIGSTOP ||
            syscall(SYS_rt_sigaction, sig, NULL, &ka, sizeof ka.mask) != 0)
            continue;
        if (ka.handler != (unsigned long)SIG_DFL && ka.handler != (unsigned long)SIG_IGN)
            *set |= 1ull << (sig - 1);
    }
}

int ftr_create_own_thread(pthread_t *th, int detached, void *(*fn)(void *), void *arg)
{
    if (!real_create) real_create = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (!real_create) return EAGAIN;
    pthread_attr_t attr, *ap = NULL;
    if (detached) {
        if (pthread_attr_init(&attr) != 0) return EAGAIN;
        pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        ap = &attr;
    }
    struct own_start o = {fn, arg, 0};
    uint64_t handled, old;
    handled_signals(&handled);
    int blocked = syscall(SYS_rt_sigprocmask, SIG_BLOCK, &handled, &old, sizeof old) == 0;
    uint32_t state = ftr_thread_pause(); /* a thread not yet set up would be, at the calloc */
    int rc = real_create(th, ap, own_start, &o);
    ftr_thread_unpause(state);
    if (blocked) syscall(SYS_rt_sigprocmask, SIG_SETMASK, &old, NULL, sizeof old);
    if (ap) pthread_attr_destroy(ap);
    while (!rc && !__atomic_load_n(&o.taken, __ATOMIC_ACQUIRE))
        syscall(SYS_futex, &o.taken, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    return rc;
}

EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    if (!real_create) real_create = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (!real_create) return EAGAIN;
    struct ftr_thread *r = ftr_settings_enabled() ? ftr_thread_reserve() : NULL;
    if (!r) return real_create(th, attr, fn, arg);
    r->start_fn = fn;
    r->start_arg = arg;
    r->safe_start = 1;
    stack_of(r, attr);
    int rc = real_create(th, attr, start, r);
    if (rc != 0) ftr_thread_unreserve(r);
    return rc;
}
