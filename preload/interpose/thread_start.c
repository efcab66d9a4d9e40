/*
 * thread_start.c - pthread_create() wrapped: a new thread is set up for tracing by a start
 * routine of ours, before the program's own runs, in an ordinary context (so its first traced
 * call, even inside a signal handler, finds everything ready), with the stack bounds the
 * creating thread's attributes give. Threads started any other way are set up at their first
 * hook (threads.c, async-signal-safe as well).
 *
 * clone() wrapped too, for the children that share the caller's memory without a TLS block of
 * their own (no CLONE_SETTLS): they would run on the caller's ftr_tls.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>

#include "sigguard.h"
#include "stacks.h"
#include "tracer.h"

#define EXPORT __attribute__((visibility("default")))

typedef int (*create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);
static create_fn real_create;

/* A thread whose program's mask blocks a guarded signal (its creator's, or its attributes'):
 * the view is set in the new thread before its start routine (sigguard.h). In our own heap:
 * pthread_create() is never called from a signal handler. */
struct view_start {
    void *(*fn)(void *);
    void *arg;
    unsigned long view;
};
static void *start_viewed(void *arg)
{
    struct view_start v = *(struct view_start *)arg;
    free(arg);
    ftr_sigguard_set_view(v.view);
    return v.fn(v.arg);
}
/* @return 0, or -1: the view could not be passed on (no memory) */
static int pass_view(const pthread_attr_t *attr, void *(**fn)(void *), void **arg)
{
    unsigned long view = ftr_sigguard_start_view(attr);
    if (!view) return 0;
    struct view_start *v = malloc(sizeof *v);
    if (!v) return -1;
    *v = (struct view_start){*fn, *arg, view};
    *fn = start_viewed;
    *arg = v;
    return 0;
}

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
 * no option changes), its free() of an old one on a reused stack, the attributes' calloc().
 *
 * No handler of the program's may ever run on them: they start with every signal blocked, set
 * in their attributes (glibc puts that mask in place before the thread runs an instruction,
 * and leaves out its own SIGCANCEL and SIGSETXID, which setuid() needs every thread to take).
 * The creating thread's mask, the program's, is never touched: a program whose calloc() blocks
 * for good there still ends on SIGTERM (live_tests.py hung_start). */
#define OWN_STACK (512u << 10)

int ftr_create_own_thread(pthread_t *th, int detached, void *(*fn)(void *), void *arg)
{
    if (!real_create) real_create = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (!real_create) return EAGAIN;
    pthread_attr_t attr;
    sigset_t all;
    sigfillset(&all);
    uint32_t state = ftr_thread_pause(); /* a thread not yet set up would be, at the calloc */
    int rc = pthread_attr_init(&attr);
    if (!rc) {
        if (detached) rc = pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
        if (!rc) rc = pthread_attr_setsigmask_np(&attr, &all);
        /* a small fixed cost of address space (the default is RLIMIT_STACK, 8 MiB): room for
         * zstd, and for a program's handlers and exit handlers run here (ctlsig.c, init.c) */
        if (!rc) rc = pthread_attr_setstacksize(&attr, OWN_STACK);
        if (!rc) rc = real_create(th, &attr, fn, arg);
        pthread_attr_destroy(&attr);
    }
    ftr_thread_unpause(state);
    return rc;
}

static atomic_uint made; /* threads made by the program (dlwrap.c: none during a dlopen?) */

unsigned ftr_threads_made(void)
{
    return atomic_load(&made);
}

EXPORT int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
    atomic_fetch_add(&made, 1);
    if (!real_create) real_create = (create_fn)dlsym(RTLD_NEXT, "pthread_create");
    if (!real_create) return EAGAIN;
    void *(*given)(void *) = fn;
    pass_view(attr, &fn, &arg);
    struct ftr_thread *r = ftr_settings_enabled() ? ftr_thread_reserve() : NULL;
    if (!r) {
        int rc = real_create(th, attr, fn, arg);
        if (rc != 0 && fn != given) free(arg);
        return rc;
    }
    r->start_fn = fn;
    r->start_arg = arg;
    r->safe_start = 1;
    ftr_name_for_new_thread(r->name); /* the kernel gives it its creator's */
    stack_of(r, attr);
    int rc = real_create(th, attr, start, r);
    if (rc != 0) {
        ftr_thread_unreserve(r);
        if (fn != given) free(arg);
    } else { /* before the program can rename it; unless the thread has set it itself */
        pthread_t none = 0;
        __atomic_compare_exchange_n(&r->pth, &none, *th, 0, __ATOMIC_RELAXED, __ATOMIC_RELAXED);
    }
    return rc;
}

typedef int (*clone_fn)(int (*)(void *), void *, int, void *, ...);
static clone_fn real_clone;

/* A child set aside starts here, on the creator's TLS: it touches nothing of it. */
static struct aside_start {
    int (*fn)(void *);
    void *arg;
    int aside;
} aside_starts[FTR_ASIDE_MAX];
static int aside_start(void *p)
{
    struct aside_start *a = p;
    int (*fn)(void *) = a->fn, i = a->aside;
    int rc = fn(a->arg);
    ftr_stack_unset_aside(i);
    return rc;
}

/* clone() without CLONE_SETTLS, with CLONE_VM: the child runs on its creator's TLS block, our
 * per-thread state included. With CLONE_VFORK (a hand-rolled spawn) the creator waits until
 * the child execs or exits: tracing is off in the creating thread meanwhile, as across vfork()
 * (vfork_x86_64.S), and the child records nothing. Without it both run at once: the child's
 * stack is set aside (its hooks return at once, stacks.h), and that is said once. The optional
 * arguments are passed on as glibc's clone() reads them, whether given or not. */
EXPORT int clone(int (*fn)(void *), void *stack, int flags, void *arg, ...)
{
    va_list ap;
    va_start(ap, arg);
    pid_t *ptid = va_arg(ap, pid_t *);
    void *tls = va_arg(ap, void *);
    pid_t *ctid = va_arg(ap, pid_t *);
    va_end(ap);
    if (!real_clone) real_clone = (clone_fn)ftr_next_sym("clone");
    if (!real_clone) {
        errno = ENOSYS;
        return -1;
    }
    if (flags & CLONE_VM) atomic_fetch_add(&made, 1);
    if (!(flags & CLONE_VM) || (flags & CLONE_SETTLS))
        return real_clone(fn, stack, flags, arg, ptid, tls, ctid);
    if (flags & CLONE_VFORK) {
        uint32_t state = ftr_thread_pause();
        int rc = real_clone(fn, stack, flags, arg, ptid, tls, ctid);
        int e = errno;
        ftr_thread_unpause(state);
        errno = e;
        return rc;
    }
    static int said;
    int aside = stack ? ftr_stack_set_aside((uintptr_t)stack) : -1, set = aside >= 0;
    if (!set) ftr_thread_pause(); /* no room to tell it apart: its creator stops tracing too */
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED) && !ftr_cfg.quiet)
        ftr_msg(set ? "a thread made by clone() without CLONE_SETTLS shares its creator's "
                      "thread-local storage: its calls are not traced"
                    : "a thread made by clone() without CLONE_SETTLS shares its creator's "
                      "thread-local storage: neither is traced from now on");
    if (!set) return real_clone(fn, stack, flags, arg, ptid, tls, ctid);
    /* the child gives its stack back when its function returns (before glibc's exit) */
    struct aside_start *a = &aside_starts[aside];
    a->fn = fn, a->arg = arg, a->aside = aside;
    int rc = real_clone(aside_start, stack, flags, a, ptid, tls, ctid);
    if (rc < 0) {
        int e = errno;
        ftr_stack_unset_aside(aside);
        errno = e;
    }
    return rc;
}
