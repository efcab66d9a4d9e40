/* bmalloc: a program with an allocator of its own. usage: bmalloc
 * It defines malloc, calloc, realloc, free (and the aligned family) itself: a bump allocator on
 * mmap'ed memory, instrumented like the rest of the program, counting every call. main makes a
 * known number of calls, forks a child that makes its own, and both print their counts with
 * write(2) (no stdio: stdio would call malloc itself). The tracer must never call any of them:
 * its calls would show in the counts and as calls in the trace.
 * The counts start from zero in main and in child_main, and include any call in the meantime
 * (the tracer's fork handlers in the parent would be there).
 *   parent tree {main, main;malloc 5, main;calloc 2, main;realloc 3, main;free 4,
 *                main;counts 2, main;forker, main;parent_report}; outside main only what gprof's
 * start-up and exit code calls in a -pg build (calloc once, free once). child: child_main ->
 * malloc 3, calloc 1, realloc 2, posix_memalign 1, free 2, counts 1 (below what it inherited of
 * main;forker), then _exit(7) from child_main.
 * usage: bmalloc late — the child waits 150 ms before it counts (the tracer's writer begins the
 * child's trace meanwhile: nothing it does then may call the program's allocator).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>
#include "behave.h"

/* ---- the program's allocator ---- */
#define REGION (1ul << 30) /* address space reserved once; pages are touched as used */
struct hdr {
    size_t size;
    size_t pad;
};
static char *region, *bump;
static int lock;
static unsigned long n_malloc, n_calloc, n_realloc, n_free, n_aligned;

static inline __attribute__((always_inline)) void take(void)
{
    while (__atomic_exchange_n(&lock, 1, __ATOMIC_ACQUIRE))
        ;
}
static inline __attribute__((always_inline)) void give(void)
{
    __atomic_store_n(&lock, 0, __ATOMIC_RELEASE);
}

/* called with the lock held: size bytes aligned to align (a power of two >= 16) */
static inline __attribute__((always_inline)) void *carve(size_t size, size_t align)
{
    if (!region) {
        void *p = mmap(NULL, REGION, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) return NULL;
        region = bump = p;
    }
    uintptr_t at = ((uintptr_t)bump + sizeof(struct hdr) + align - 1) & ~(uintptr_t)(align - 1);
    if (size > REGION || at + size > (uintptr_t)region + REGION) return NULL;
    ((struct hdr *)at)[-1].size = size;
    bump = (char *)(at + size);
    return (void *)at;
}

static inline __attribute__((always_inline)) void *alloc(size_t size, size_t align,
                                                         unsigned long *count)
{
    take();
    ++*count;
    void *p = carve(size ? size : 1, align < 16 ? 16 : align);
    give();
    if (!p) errno = ENOMEM;
    return p;
}

NOINLINE void *malloc(size_t n)
{
    return alloc(n, 16, &n_malloc);
}
NOINLINE void *calloc(size_t k, size_t n)
{
    if (n && k > (size_t)-1 / n) {
        errno = ENOMEM;
        return NULL;
    }
    return alloc(k * n, 16, &n_calloc); /* fresh mmap'ed memory: already zero */
}
NOINLINE void *realloc(void *old, size_t n)
{
    void *p = alloc(n, 16, &n_realloc);
    if (p && old) {
        size_t had = ((struct hdr *)old)[-1].size;
        memcpy(p, old, had < n ? had : n);
    }
    return p;
}
NOINLINE void free(void *p)
{
    (void)p; /* never reused: the region is large enough for this program */
    take();
    n_free++;
    give();
}
NOINLINE void *memalign(size_t align, size_t n)
{
    return alloc(n, align, &n_aligned);
}
NOINLINE void *aligned_alloc(size_t align, size_t n)
{
    return alloc(n, align, &n_aligned);
}
NOINLINE int posix_memalign(void **out, size_t align, size_t n)
{
    void *p = alloc(n, align, &n_aligned);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}
NOINLINE void *valloc(size_t n)
{
    return alloc(n, 4096, &n_aligned);
}
NOINLINE void *pvalloc(size_t n)
{
    return alloc((n + 4095) & ~(size_t)4095, 4096, &n_aligned);
}
NOINLINE size_t malloc_usable_size(void *p)
{
    return p ? ((struct hdr *)p)[-1].size : 0;
}

/* ---- the program ---- */
static int late;                /* the child waits before it counts */
static void *volatile kept[16]; /* every block escapes: no call is optimised away */
#define KEPT(i, x) (kept[i] = (x))

static inline __attribute__((always_inline)) void put(const char *line, int n)
{
    if (n > 0 && write(1, line, (size_t)n) < 0) _exit(3);
}

NOINLINE void counts(const char *who)
{
    char line[256];
    put(line, snprintf(line, sizeof line,
                       "%s: malloc %lu calloc %lu realloc %lu free %lu "
                       "aligned %lu\n",
                       who, n_malloc, n_calloc, n_realloc, n_free, n_aligned));
}

NOINLINE void child_main(void)
{
    n_malloc = n_calloc = n_realloc = n_free = n_aligned = 0; /* from here on: the child's */
    char *a = KEPT(0, malloc(100)), *b = KEPT(1, malloc(200)), *c = KEPT(2, malloc(300));
    int *z = KEPT(3, calloc(8, sizeof *z));
    a = KEPT(4, realloc(a, 1000));
    b = KEPT(5, realloc(b, 2000));
    void *al = NULL;
    if (posix_memalign(&al, 64, 128)) _exit(4);
    memset(a, 'a', 1000);
    memset(b, 'b', 2000);
    free(a);
    free(c);
    if (late) {
        struct timespec d = {0, 150 * 1000 * 1000};
        while (nanosleep(&d, &d) < 0 && errno == EINTR)
            ;
    }
    counts("child");
    _exit(z[3] == 0 && b[1999] == 'b' && ((uintptr_t)al & 63) == 0 ? 7 : 5);
}

NOINLINE pid_t forker(void)
{
    pid_t p = fork();
    if (p == 0) child_main();
    return p;
}

NOINLINE void parent_report(int st)
{
    char line[64];
    put(line, snprintf(line, sizeof line, "parent: child exit %d\n",
                       WIFEXITED(st) ? WEXITSTATUS(st) : -1));
}

int main(int argc, char **argv)
{
    late = argc > 1 && strcmp(argv[1], "late") == 0;
    /* counted from here on (before main, the C library may call it: gprof's setup; the TLS
     * of the tracer's threads, which glibc's pthread_create allocates with our calloc) */
    n_malloc = n_calloc = n_realloc = n_free = n_aligned = 0;
    char *p[5];
    for (int i = 0; i < 5; i++) {
        p[i] = KEPT(i, malloc(64 << i));
        memset(p[i], i, 64u << i);
    }
    long *z1 = KEPT(5, calloc(16, sizeof *z1)), *z2 = KEPT(6, calloc(4, 4096));
    for (int i = 0; i < 3; i++)
        p[i] = KEPT(7 + i, realloc(p[i], 4096u << i));
    for (int i = 0; i < 4; i++)
        free(p[i]);
    counts("parent");
    pid_t c = forker();
    int st = 0;
    if (c > 0) waitpid(c, &st, 0);
    parent_report(st);
    counts("parent");
    return z1[15] == 0 && z2[1000] == 0 && p[4][100] == 4 ? 0 : 1;
}
