/*
 * fdguard.c - keep the trace file's descriptor out of the program's reach.
 *
 * Daemons close every descriptor they did not open, or dup2() over numbers they think are free.
 * Were ours closed, the writer would fail; were its number reused, the writer would write trace
 * chunks into the program's own file. The descriptor sits above 512 (init.c), and these wrappers
 * make close(), close_range(), closefrom(), dup2() and dup3() leave it alone: closing it reports
 * success without closing; dup2() onto it first moves ours to another number (under the lock
 * the writer holds while it writes).
 *
 * The control server's descriptors (control.c) get the same protection through
 * ftr_fd_protect(): the guard keeps a pointer to each variable holding one, so that a move
 * updates it; their owner uses them only under the lock, or tolerates a stale number.
 *
 * A descriptor of ours is born at the lowest free number (accept4(), socket(), open()) and
 * moved above 512 at once; meanwhile the program may close() that number or dup2() onto it,
 * believing it free, and the move would then take the program's file and close its number.
 * ftr_fd_numbers_claim() makes that moment exclusive: the program's close/dup calls count
 * themselves in while they run, a claim waits until none runs, and calls that find a claim
 * wait for it to end (microseconds). Not a mutex: close() may be called in a signal handler,
 * also one that interrupted close() itself (a thread already inside goes on); and a call that
 * never leaves (cancelled inside close()) holds a claim up for 200 µs at most, never for good.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <time.h>
#include <unistd.h>

#include "tracer.h"

#define EXPORT __attribute__((visibility("default")))

static pthread_mutex_t fd_lock = PTHREAD_MUTEX_INITIALIZER;

void ftr_fd_lock(void)
{
    pthread_mutex_lock(&fd_lock);
}
void ftr_fd_unlock(void)
{
    pthread_mutex_unlock(&fd_lock);
}
static atomic_int numbers_claimed, numbers_users;
static __thread int numbers_depth __attribute__((tls_model("initial-exec")));

void ftr_fd_lock_reset(void)
{
    pthread_mutex_init(&fd_lock, NULL);
    atomic_store(&numbers_claimed, 0); /* a fork child: only this thread is left */
    atomic_store(&numbers_users, 0);
    numbers_depth = 0;
}

/* Around the program's calls that close or replace a descriptor by its number. */
static void numbers_enter(void)
{
    if (numbers_depth++ > 0) return; /* nested: a signal handler, or our own claim */
    for (;;) {
        atomic_fetch_add(&numbers_users, 1);
        if (!atomic_load(&numbers_claimed)) return;
        atomic_fetch_sub(&numbers_users, 1);
        while (atomic_load(&numbers_claimed))
            sched_yield();
    }
}
static void numbers_leave(void)
{
    if (--numbers_depth == 0) atomic_fetch_sub(&numbers_users, 1);
}

/* A call counted in may never leave: a thread cancelled inside close() (a cancellation point),
 * a handler's siglongjmp out of one. So a claim waits for the calls running at most this long,
 * then goes on without them (the program's calls wait at most that for a claim). */
#define CLAIM_WAIT_NS 200000

static uint64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void ftr_fd_numbers_claim(void)
{
    numbers_depth++; /* our own close() of the low number goes through */
    atomic_store(&numbers_claimed, 1);
    for (uint64_t until = 0; atomic_load(&numbers_users);) {
        uint64_t now = mono_ns();
        if (!until)
            until = now + CLAIM_WAIT_NS;
        else if (now >= until)
            break;
        sched_yield();
    }
}
void ftr_fd_numbers_release(void)
{
    atomic_store(&numbers_claimed, 0);
    numbers_depth--;
}

#define MAX_PROTECTED 4
static int *_Atomic protected_fds[MAX_PROTECTED]; /* variables holding descriptors of ours */

void ftr_fd_protect(int *fd)
{
    ftr_fd_lock();
    for (int i = 0; i < MAX_PROTECTED; i++)
        if (!atomic_load(&protected_fds[i])) {
            atomic_store(&protected_fds[i], fd);
            break;
        }
    ftr_fd_unlock();
}

void ftr_fd_unprotect(int *fd)
{
    ftr_fd_lock();
    for (int i = 0; i < MAX_PROTECTED; i++)
        if (atomic_load(&protected_fds[i]) == fd) atomic_store(&protected_fds[i], NULL);
    ftr_fd_unlock();
}

/* @return the variable holding descriptor fd when it is one of ours, else NULL */
static int *owner_of(int fd)
{
    if (fd < 0) return NULL;
    if (fd == ftr_g.fd) return &ftr_g.fd;
    for (int i = 0; i < MAX_PROTECTED; i++) {
        int *p = atomic_load(&protected_fds[i]);
        if (p && __atomic_load_n(p, __ATOMIC_RELAXED) == fd) return p;
    }
    return NULL;
}

/* Our descriptors in [first, last], sorted. @return how many (at most MAX_PROTECTED + 1). */
static int ours_in(unsigned first, unsigned last, unsigned *out)
{
    int n = 0;
    for (int i = -1; i < MAX_PROTECTED; i++) {
        int *p = i < 0 ? &ftr_g.fd : atomic_load(&protected_fds[i]);
        int fd = p ? __atomic_load_n(p, __ATOMIC_RELAXED) : -1;
        if (fd < 0 || (unsigned)fd < first || (unsigned)fd > last) continue;
        int j = n++;
        for (; j > 0 && out[j - 1] > (unsigned)fd; j--)
            out[j] = out[j - 1];
        out[j] = (unsigned)fd;
    }
    return n;
}

static void *next(void **cache, const char *name)
{
    if (!*cache) *cache = dlsym(RTLD_NEXT, name);
    return *cache;
}
#define NEXT(var, name) ((__typeof__(var))next((void **)&(var), name))

static inline int ours(int fd)
{
    return owner_of(fd) != NULL;
}

typedef int (*close_fn)(int);
typedef int (*dup2_fn)(int, int);
typedef int (*dup3_fn)(int, int, int);
typedef int (*close_range_fn)(unsigned, unsigned, int);
typedef void (*closefrom_fn)(int);
static close_fn real_close;
static dup2_fn real_dup2;
static dup3_fn real_dup3;
static close_range_fn real_close_range;
static closefrom_fn real_closefrom;

EXPORT int close(int fd)
{
    if (ours(fd)) return 0;
    close_fn fn = NEXT(real_close, "close");
    numbers_enter();
    int rc = fn(fd);
    int e = errno;
    numbers_leave();
    errno = e;
    return rc;
}

/* The program wants our number: give ours another one first. */
static void move_away(int fd)
{
    ftr_fd_lock();
    int *owner = owner_of(fd);
    if (owner) {
        int moved = fcntl(fd, F_DUPFD_CLOEXEC, fd + 1);
        if (moved >= 0) *owner = moved; /* the old number is replaced by the dup2 that follows */
    }
    ftr_fd_unlock();
}

EXPORT int dup2(int oldfd, int newfd)
{
    if (ours(oldfd) && oldfd == newfd) return newfd;
    dup2_fn fn = NEXT(real_dup2, "dup2");
    numbers_enter();
    move_away(newfd);
    int rc = fn(oldfd, newfd);
    int e = errno;
    numbers_leave();
    errno = e;
    return rc;
}

EXPORT int dup3(int oldfd, int newfd, int flags)
{
    dup3_fn fn = NEXT(real_dup3, "dup3");
    numbers_enter();
    move_away(newfd);
    int rc = fn(oldfd, newfd, flags);
    int e = errno;
    numbers_leave();
    errno = e;
    return rc;
}

static int ranges_around_ours(close_range_fn fn, unsigned first, unsigned last, int flags);

EXPORT int close_range(unsigned first, unsigned last, int flags)
{
    close_range_fn fn = NEXT(real_close_range, "close_range");
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    numbers_enter();
    int rc = ranges_around_ours(fn, first, last, flags);
    int e = errno;
    numbers_leave();
    errno = e;
    return rc;
}

static int ranges_around_ours(close_range_fn fn, unsigned first, unsigned last, int flags)
{
    unsigned keep[MAX_PROTECTED + 1];
    int n = first <= last ? ours_in(first, last, keep) : 0;
    if (n == 0) return fn(first, last, flags);
    /* the ranges around ours (descriptors are ints: keep[i] + 1 cannot wrap) */
    int rc = 0;
    unsigned from = first;
    for (int i = 0; i < n && rc == 0; i++) {
        if (keep[i] > from) rc = fn(from, keep[i] - 1, flags);
        from = keep[i] + 1;
    }
    if (rc == 0 && from <= last) rc = fn(from, last, flags);
    return rc;
}

EXPORT void closefrom(int lowfd)
{
    unsigned keep[MAX_PROTECTED + 1];
    if (lowfd >= 0 && ours_in((unsigned)lowfd, ~0u, keep) > 0) {
        close_range((unsigned)lowfd, ~0u, 0);
        return;
    }
    closefrom_fn fn = NEXT(real_closefrom, "closefrom");
    if (!fn) return;
    numbers_enter();
    fn(lowfd);
    numbers_leave();
}
