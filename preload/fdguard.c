/*
 * fdguard.c - keep the trace file's descriptor out of the program's reach.
 *
 * Daemons close every descriptor they did not open, or dup2() over numbers they think are free.
 * Were ours closed, the writer would fail; were its number reused, the writer would write trace
 * chunks into the program's own file. The descriptor sits above 512 (init.c), and these wrappers
 * make close(), close_range(), closefrom(), dup2() and dup3() leave it alone: closing it reports
 * success without closing; dup2() onto it first moves ours to another number (under the lock
 * the writer holds while it writes).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <unistd.h>

#include "tracer.h"

#define EXPORT __attribute__((visibility("default")))

static pthread_mutex_t fd_lock = PTHREAD_MUTEX_INITIALIZER;

void ftr_fd_lock(void) { pthread_mutex_lock(&fd_lock); }
void ftr_fd_unlock(void) { pthread_mutex_unlock(&fd_lock); }

static void *next(void **cache, const char *name)
{
    if (!*cache)
        *cache = dlsym(RTLD_NEXT, name);
    return *cache;
}
#define NEXT(var, name) ((__typeof__(var))next((void **)&(var), name))

static inline int ours(int fd) { return fd >= 0 && fd == ftr_g.fd; }

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
    if (ours(fd))
        return 0;
    return NEXT(real_close, "close")(fd);
}

/* The program wants our number: give ours another one first. */
static void move_away(int fd)
{
    ftr_fd_lock();
    if (ours(fd)) {
        int moved = fcntl(fd, F_DUPFD_CLOEXEC, fd + 1);
        if (moved >= 0)
            ftr_g.fd = moved; /* the old number is replaced by the dup2 that follows */
    }
    ftr_fd_unlock();
}

EXPORT int dup2(int oldfd, int newfd)
{
    if (ours(oldfd) && oldfd == newfd)
        return newfd;
    move_away(newfd);
    return NEXT(real_dup2, "dup2")(oldfd, newfd);
}

EXPORT int dup3(int oldfd, int newfd, int flags)
{
    move_away(newfd);
    return NEXT(real_dup3, "dup3")(oldfd, newfd, flags);
}

EXPORT int close_range(unsigned first, unsigned last, int flags)
{
    close_range_fn fn = NEXT(real_close_range, "close_range");
    if (!fn) {
        errno = ENOSYS;
        return -1;
    }
    unsigned me = (unsigned)ftr_g.fd;
    if (ftr_g.fd < 0 || me < first || me > last)
        return fn(first, last, flags);
    int rc = 0;
    if (me > first)
        rc = fn(first, me - 1, flags);
    if (rc == 0 && me < last)
        rc = fn(me + 1, last, flags);
    return rc;
}

EXPORT void closefrom(int lowfd)
{
    if (ftr_g.fd >= 0 && ftr_g.fd >= lowfd) {
        close_range((unsigned)lowfd, ~0u, 0);
        return;
    }
    closefrom_fn fn = NEXT(real_closefrom, "closefrom");
    if (fn)
        fn(lowfd);
}
