/*
 * ftr_lock.c - who is still writing a trace file.
 *
 * Every process of a session that writes the file holds a lock on it from its open until its
 * END is written: ftrace-report asks, without blocking, whether any writer still holds one (a
 * daemon's child may write for long after ftrace-run returned), and --wait waits for them.
 *
 * The locks are open file description locks (F_OFD_*), each on one byte far past any trace's
 * end, at FTR_LOCK_BASE + the writer's pid: the lock names its holder, which an OFD lock does
 * not report itself. A POSIX record lock would name it, but it is the process's, not the
 * description's: not inherited by fork (a child that forked and whose parent ended at once
 * would hold none until it took its own), and dropped when the process closes ANY descriptor
 * of the file (docs/design.md, "Chunks, the writer, and the end", says how the writers use
 * these). A writer's lock is a write lock; the reader's question is about a read lock over every
 * such byte, so it is answered by any writer's, and the reader never takes one that a writer
 * could meet but on its own byte, of a process it saw there.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>

#include "ftr_format.h"

#define FTR_LOCK_BASE ((off_t)1 << 48) /* far beyond any trace file's size */

static int lock(int fd, int cmd, short type, off_t start, off_t len)
{
    struct flock fl = {.l_type = type, .l_whence = SEEK_SET, .l_start = start, .l_len = len};
    return fcntl(fd, cmd, &fl);
}

int ftr_lock_writer(int fd, uint32_t pid)
{
    return lock(fd, F_OFD_SETLK, F_WRLCK, FTR_LOCK_BASE + pid, 1);
}

int ftr_lock_release(int fd, uint32_t pid)
{
    return lock(fd, F_OFD_SETLK, F_UNLCK, FTR_LOCK_BASE + pid, 1);
}

int ftr_lock_holder(int fd, uint32_t *pid)
{
    struct flock fl = {.l_type = F_RDLCK, .l_whence = SEEK_SET, .l_start = FTR_LOCK_BASE};
    if (fcntl(fd, F_OFD_GETLK, &fl) < 0) return -1;
    if (fl.l_type == F_UNLCK) return 0;
    *pid = (uint32_t)(fl.l_start - FTR_LOCK_BASE);
    return 1;
}

int ftr_lock_wait(int fd)
{
    uint32_t pid;
    int held;
    while ((held = ftr_lock_holder(fd, &pid)) > 0) {
        /* until that writer's byte is free: then look again, for the others */
        while (lock(fd, F_OFD_SETLKW, F_RDLCK, FTR_LOCK_BASE + pid, 1) < 0)
            if (errno != EINTR) return -1;
        lock(fd, F_OFD_SETLK, F_UNLCK, FTR_LOCK_BASE + pid, 1);
    }
    return held;
}
