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
#include <pthread.h>
#include <signal.h>
#include <stdint.h>

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
 * no option changes), its free() of an old one on a reused stack, the attributes' calloc().
 *
 * No handler of the program's may ever run on them: they start with every signal blocked, set
 * in their attributes (glibc puts that mask in place before the thread runs an instruction,
 * and leaves out its own SIGCANCEL and SIGSETXID, which setuid() needs every thread to take).
 * The creating thread's mask, the program's, is never touched: a program whose calloc() blocks
 * for good there still ends on SIGTERM (live_tests.py hung_start). */
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
        if (!rc) rc = real_create(th, &attr, fn, arg);
        pthread_attr_destroy(&attr);
    }
    ftr_thread_unpause(state);
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
