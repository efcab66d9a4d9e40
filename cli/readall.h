/*
 * readall.h - a file read whole, for the command-line tools (ftrace-ctl, the injector): /proc
 * files, whose size stat() does not tell.
 */
#ifndef FTR_READALL_H
#define FTR_READALL_H

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

/* The file at path, whole. @return malloc'ed text, NUL-terminated (its length in *len if len),
 * or NULL with errno */
static inline char *ftr_read_all(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return NULL;
    size_t cap = 8192, n = 0;
    char *buf = malloc(cap);
    while (buf) {
        if (n + 1 >= cap) {
            char *bigger = realloc(buf, cap *= 2);
            if (!bigger) free(buf);
            buf = bigger;
            continue;
        }
        ssize_t r = read(fd, buf + n, cap - n - 1);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            close(fd);
            errno = e;
            return NULL;
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    close(fd);
    if (!buf) {
        errno = ENOMEM;
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

#endif /* FTR_READALL_H */
