/*
 * signotify.c - threads the C library starts with every signal blocked, SIGTRAP included:
 * timer_create() and mq_notify() with SIGEV_THREAD. The first int3 of a live rewrite such a
 * thread met would kill the process (docs/design.md, "Threads that block SIGTRAP"): the
 * program's function is wrapped so that SIGTRAP is unblocked first. The program's view of its
 * mask (sigguard.c) is that thread's as glibc made it: open, as for any thread not made by the
 * program's pthread_create().
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <mqueue.h>
#include <pthread.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define EXPORT __attribute__((visibility("default")))

/* The pairs live in our own memory, never freed (16 bytes a notification set up). */
struct notify {
    void (*fn)(union sigval);
    union sigval value;
};
static pthread_mutex_t notify_lock = PTHREAD_MUTEX_INITIALIZER;
static struct notify *notify_page;
static size_t notify_used;
#define NOTIFY_PER_PAGE (65536 / sizeof(struct notify))

static void notify_trampoline(union sigval v)
{
    struct notify *n = v.sival_ptr;
    sigset_t trap;
    sigemptyset(&trap);
    sigaddset(&trap, SIGTRAP);
    syscall(SYS_rt_sigprocmask, SIG_UNBLOCK, &trap, NULL, sizeof(unsigned long));
    n->fn(n->value);
}

/* @return sev, or buf: sev with its function wrapped (NULL: out of memory) */
static const struct sigevent *wrap_notify(const struct sigevent *sev, struct sigevent *buf)
{
    if (!sev || sev->sigev_notify != SIGEV_THREAD || !sev->sigev_notify_function) return sev;
    pthread_mutex_lock(&notify_lock);
    if (!notify_page || notify_used == NOTIFY_PER_PAGE) {
        void *p = mmap(NULL, 65536, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        notify_page = p == MAP_FAILED ? NULL : p;
        notify_used = 0;
    }
    struct notify *n = notify_page ? &notify_page[notify_used++] : NULL;
    pthread_mutex_unlock(&notify_lock);
    if (!n) return sev; /* as it was: such a thread would not survive a live rewrite */
    n->fn = sev->sigev_notify_function;
    n->value = sev->sigev_value;
    *buf = *sev;
    buf->sigev_notify_function = notify_trampoline;
    buf->sigev_value.sival_ptr = n;
    return buf;
}

EXPORT int timer_create(clockid_t clock, struct sigevent *sev, timer_t *id)
{
    static int (*next)(clockid_t, struct sigevent *, timer_t *);
    if (!next)
        next = (int (*)(clockid_t, struct sigevent *, timer_t *))dlsym(RTLD_NEXT, "timer_create");
    struct sigevent buf;
    return next(clock, (struct sigevent *)wrap_notify(sev, &buf), id);
}

EXPORT int mq_notify(mqd_t mq, const struct sigevent *sev)
{
    static int (*next)(mqd_t, const struct sigevent *);
    if (!next) next = (int (*)(mqd_t, const struct sigevent *))dlsym(RTLD_NEXT, "mq_notify");
    struct sigevent buf;
    return next(mq, wrap_notify(sev, &buf));
}
