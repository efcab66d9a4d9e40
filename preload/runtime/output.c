/*
 * output.c - the trace file's descriptor: opened by each image, made its own by each fork
 * child, and the lock that tells ftrace-report a process is still writing (formats/ftr_lock.c).
 *
 * The lock is on the open file description, so it lives as long as the last descriptor of it:
 *  - an image takes it before its writer starts, and drops it when its END is written, by
 *    closing the descriptor (ftr_output_release); at an exec, the exec drops it (O_CLOEXEC),
 *    and an exec that fails leaves it held;
 *  - a fork child shares its parent's description: until its fork handler, the parent's lock is
 *    held by both, so that there is no moment, even when the parent ends at once, when neither
 *    holds one; the handler then opens the file anew, locks that, and puts it in place of the
 *    inherited one, so that the parent's lock goes when the parent's END is written, and the
 *    child's when its own is;
 *  - a raw close of our number by the program (fdguard.c sees only libc's) loses the
 *    description; the writer opens the file again and locks that (writer.c, flush_out).
 * When the recorder process of docs/design.md writes the file, it takes the lock instead.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tracer.h"

/* The root process of a session creates the file and writes its header; every other process
 * of the session (fork children have the file already; exec'd images and spawned children
 * find FTRACE_SESSION in their environment) appends to it. Every write is a whole number of
 * chunks in one write() on an O_APPEND descriptor, so processes never interleave inside a
 * chunk. */
int ftr_output_open(void)
{
    int flags = O_WRONLY | O_APPEND | O_CLOEXEC | (ftr_is_root ? O_CREAT | O_TRUNC : O_CREAT);
    int fd = open(ftr_cfg.output, flags, 0644);
    if (fd < 0) return -1;
    fd = ftr_fd_high(fd);
    if (ftr_is_root) {
        struct ftr_buf hdr = {0};
        int ok =
            ftr_enc_file_header(&hdr) == FTR_OK && write(fd, hdr.data, hdr.len) == (ssize_t)hdr.len;
        ftr_buf_free(&hdr);
        if (!ok) {
            close(fd);
            return -1;
        }
    }
    return fd;
}

void ftr_output_lock(void)
{
    if (ftr_g.fd >= 0) ftr_lock_writer(ftr_g.fd, ftr_g.pid);
}

/* In a fork child, while it is one thread. Through /proc/self/fd, the file the parent writes
 * even if it was renamed or removed since. If that fails, the child writes through the
 * inherited description, unlocked, and its parent's lock lives as long as the child: the
 * report then says a process is still writing, which is true. Only a regular file is opened
 * again: opening a FIFO for writing waits for a reader (and a pipe has no lock to keep). A
 * child that will not write (tracing) only lets the inherited description go. */
void ftr_output_fork_child(int tracing)
{
    struct stat st;
    if (ftr_g.fd < 0) return;
    if (!tracing) {
        int fd = ftr_g.fd;
        ftr_g.fd = -1; /* no longer ours: fdguard.c's close() lets it go */
        close(fd);
        return;
    }
    if (fstat(ftr_g.fd, &st) != 0 || !S_ISREG(st.st_mode)) return;
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", ftr_g.fd);
    int fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
    if (fd < 0) return;
    /* the raw call: fdguard.c's dup3() would move ours away first */
    if (syscall(SYS_dup3, fd, ftr_g.fd, O_CLOEXEC) >= 0) ftr_output_lock();
    close(fd);
}

/* This image's END is written, and it was not an exec: nothing more goes to the file. */
void ftr_output_release(void)
{
    ftr_fd_lock();
    int fd = ftr_g.fd;
    ftr_g.fd = -1;
    ftr_fd_unlock();
    if (fd >= 0) close(fd);
}
