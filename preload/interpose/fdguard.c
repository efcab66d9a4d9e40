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
 * The region's memfd (region.c), whose segments a hook may map at any time, is guarded too; a
 * hook does not take the lock, so moves are counted (ftr_fd_moves) for it to check.
 *
 * The control server's descriptors (control.c) get the same protection through
 * ftr_fd_protect(): the guard keeps a pointer to each variable holding one, so that a move
 * updates it; their owner uses them only under the lock, or tolerates a stale number.
 *
 * A descriptor of ours is born at the lowest free number (open(), socket()): one born while the
 * program's threads run could be a number the program has just closed and is about to dup2()
 * onto, and our move above 512 would then take the program's file and close its number. So
 * ours are opened where no other thread of the program runs (the constructor, a fork child's
 * handler), and the control server makes its own in a descriptor table of its own (control.c).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <sched.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#include "forkpage.h"
#include "tracer.h"

#define EXPORT __attribute__((visibility("default")))

static pthread_mutex_t fd_lock FTR_FORK_PAGE = PTHREAD_MUTEX_INITIALIZER;

void ftr_fd_lock(void)
{
    pthread_mutex_lock(&fd_lock);
}
void ftr_fd_unlock(void)
{
    pthread_mutex_unlock(&fd_lock);
}
void ftr_fd_lock_reset(void)
{
    pthread_mutex_init(&fd_lock, NULL);
}

#define MAX_PROTECTED 8
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

int ftr_fd_high(int fd)
{
    int high = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 512) : -1;
    struct rlimit nofile;
    /* a small limit (ulimit -n 16): the highest free numbers under it, the program's first
     * descriptors stay where they would be untraced */
    if (high < 0 && fd >= 0 && getrlimit(RLIMIT_NOFILE, &nofile) == 0 &&
        nofile.rlim_cur != RLIM_INFINITY && nofile.rlim_cur <= 512)
        for (int at = (int)nofile.rlim_cur - 1;
             high < 0 && at > fd && at >= (int)nofile.rlim_cur - 16; at--)
            if (fcntl(at, F_GETFD) < 0 && errno == EBADF) high = fcntl(fd, F_DUPFD_CLOEXEC, at);
    if (high < 0) return fd;
    syscall(SYS_close, fd); /* not close(): ours pretends for a guarded number */
    return high;
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
    return fn(fd);
}

/* Moves of our descriptors so far, twice each: odd while one is under way (region.c maps
 * without the lock, and drops a mapping made while this moved). */
atomic_uint ftr_fd_moves;

/* The program wants our number: give ours another one first. @return 1 when one of ours was
 * moved: the caller calls move_done() once the program's dup2 has taken the number. */
static int move_away(int fd)
{
    if (!ours(fd)) return 0;
    ftr_fd_lock();
    int *owner = owner_of(fd);
    if (owner) {
        atomic_fetch_add(&ftr_fd_moves, 1);
        int moved = fcntl(fd, F_DUPFD_CLOEXEC, fd + 1);
        if (moved >= 0) *owner = moved; /* the old number is replaced by the dup2 that follows */
    }
    ftr_fd_unlock();
    return owner != NULL;
}

static void move_done(void)
{
    atomic_fetch_add(&ftr_fd_moves, 1);
}

EXPORT int dup2(int oldfd, int newfd)
{
    if (ours(oldfd) && oldfd == newfd) return newfd;
    dup2_fn fn = NEXT(real_dup2, "dup2");
    int moved = move_away(newfd);
    int rc = fn(oldfd, newfd);
    if (moved) move_done();
    return rc;
}

EXPORT int dup3(int oldfd, int newfd, int flags)
{
    dup3_fn fn = NEXT(real_dup3, "dup3");
    int moved = move_away(newfd);
    int rc = fn(oldfd, newfd, flags);
    if (moved) move_done();
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
    return ranges_around_ours(fn, first, last, flags);
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
    fn(lowfd);
}
