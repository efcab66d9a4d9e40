/*
 * libc_own.c - the C library functions that would allocate with the program's malloc, done
 * with the tracer's own heap (alloc.c): qsort (glibc's merge sort mallocs its buffer), setenv
 * (glibc mallocs the string and the array), asprintf/vasprintf. Hidden, like alloc.c's: the
 * tracer's own calls bind to these, the program's never do.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "alloc.h"

extern char **environ;

typedef int cmp_fn(const void *, const void *);

static void insertion_sort(char *b, size_t n, size_t sz, cmp_fn *cmp, char *one)
{
    for (size_t i = 1; i < n; i++) {
        size_t j = i;
        while (j > 0 && cmp(b + (j - 1) * sz, b + i * sz) > 0)
            j--;
        if (j == i) continue;
        memcpy(one, b + i * sz, sz);
        memmove(b + (j + 1) * sz, b + j * sz, (i - j) * sz);
        memcpy(b + j * sz, one, sz);
    }
}

/* Stable: b[0..n) sorted through tmp (room for n elements). */
static void merge_sort(char *b, size_t n, size_t sz, cmp_fn *cmp, char *tmp)
{
    if (n <= 8) {
        insertion_sort(b, n, sz, cmp, tmp);
        return;
    }
    size_t h = n / 2;
    merge_sort(b, h, sz, cmp, tmp);
    merge_sort(b + h * sz, n - h, sz, cmp, tmp);
    char *l = b, *le = b + h * sz, *r = le, *re = b + n * sz, *w = tmp;
    while (l < le && r < re) {
        char **from = cmp(l, r) <= 0 ? &l : &r;
        memcpy(w, *from, sz);
        w += sz, *from += sz;
    }
    memcpy(w, l, (size_t)(le - l));
    w += le - l;
    memcpy(w, r, (size_t)(re - r));
    memcpy(b, tmp, n * sz);
}

FTR_ALLOC_API void qsort(void *base, size_t n, size_t sz, cmp_fn *cmp)
{
    if (n < 2 || !sz) return;
    char *tmp = n <= SIZE_MAX / sz ? malloc(n * sz) : NULL;
    if (tmp) {
        merge_sort(base, n, sz, cmp, tmp);
        free(tmp);
        return;
    }
    char one[256]; /* no memory: in place, slowly */
    char *o = sz <= sizeof one ? one : NULL;
    if (o) insertion_sort(base, n, sz, cmp, o);
}

FTR_ALLOC_API int vasprintf(char **out, const char *fmt, va_list ap)
{
    va_list again;
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *s = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (s) vsnprintf(s, (size_t)n + 1, fmt, again);
    va_end(again);
    if (!s) return -1;
    *out = s;
    return n;
}

FTR_ALLOC_API int asprintf(char **out, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vasprintf(out, fmt, ap);
    va_end(ap);
    return n;
}

/* The variable's entry replaced in place, or a new array with it at the end. The strings and
 * arrays given up are left (as glibc leaves them): another thread may be reading them. */
FTR_ALLOC_API int setenv(const char *name, const char *value, int overwrite)
{
    if (!name || !*name || strchr(name, '=')) {
        errno = EINVAL;
        return -1;
    }
    size_t nl = strlen(name), i = 0;
    for (; environ && environ[i]; i++)
        if (!strncmp(environ[i], name, nl) && environ[i][nl] == '=') break;
    if (environ && environ[i] && !overwrite) return 0;
    char *s;
    if (asprintf(&s, "%s=%s", name, value) < 0) return -1;
    if (environ && environ[i]) {
        environ[i] = s;
        return 0;
    }
    char **e = malloc((i + 2) * sizeof *e);
    if (!e) {
        free(s);
        errno = ENOMEM;
        return -1;
    }
    if (i) memcpy(e, environ, i * sizeof *e);
    e[i] = s, e[i + 1] = NULL;
    environ = e;
    return 0;
}
