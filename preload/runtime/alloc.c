/*
 * alloc.c - the tracer's own heap: malloc() & co. of libftrace.so, on memory it maps itself.
 *
 * A program may define malloc/free itself (an arena, a pool, a counting wrapper): the tracer
 * must never call that from its own paths, nor show up in the counts or the trace. The
 * functions below have hidden visibility: every reference from libftrace.so's own objects, the
 * static libraries linked into it (ftr_patcher, ftr_format, libzstd, libelf, libz), binds to
 * them at link time and never to the program's. See docs/design.md, "Memory".
 *
 * Small blocks (up to 64 KiB) come from size classes (powers of two from 32 bytes), each with a
 * free list, carved from 1 MiB arenas; larger ones are mapped and unmapped whole. One spinlock
 * guards the classes: the callers are the constructor, the writer, control and patching
 * threads, dlopen() on the program's threads, never a hook (a hook allocates nothing). A fork
 * child whose parent had the lock taken (by a thread that is gone in the child) drops the free
 * lists and starts afresh: the blocks already handed out stay valid, at worst a few leak.
 */
#define _GNU_SOURCE
#include "forkpage.h"
#include "alloc.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tracer.h"

#define MIN_SHIFT 5  /* 32 bytes: 16 of header, 16 of data */
#define MAX_SHIFT 16 /* 64 KiB: beyond, blocks are mapped whole */
#define NCLASSES (MAX_SHIFT - MIN_SHIFT + 1)
#define ARENA_BYTES (1u << 20)
#define LARGE 0xffffffffu
#define HDR sizeof(struct hdr)

/* Right before every block handed out. */
struct hdr {
    uint32_t cls;  /* size class, or LARGE */
    uint32_t back; /* bytes from the start of the underlying block (or mapping) to the data */
    size_t size;   /* bytes usable from the data on */
};
_Static_assert(sizeof(struct hdr) == 16, "the header keeps the data 16-byte aligned");

struct free_block {
    struct free_block *next;
};

/* the fork page's first variable (alloc.c is linked first: preload/CMakeLists.txt): the page
 * starts here */
static atomic_int heap_lock FTR_FORK_PAGE __attribute__((aligned(4096)));
static struct free_block *free_list[NCLASSES];
static char *arena_pos, *arena_end;

static void lock(void)
{
    for (unsigned spins = 0; atomic_exchange_explicit(&heap_lock, 1, memory_order_acquire);)
        if (++spins % 64 == 0) sched_yield(); /* the holder may be off its CPU */
}

static void unlock(void)
{
    atomic_store_explicit(&heap_lock, 0, memory_order_release);
}

static void *map(size_t n)
{
    void *p = mmap(NULL, n, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

static size_t page_round(size_t n)
{
    size_t pg = 4096;
    return (n + pg - 1) & ~(pg - 1);
}

/* A block of class c (1 << (c + MIN_SHIFT) bytes, aligned to its size up to 4 KiB). */
static void *class_take(unsigned c)
{
    size_t bytes = (size_t)1 << (c + MIN_SHIFT);
    lock();
    struct free_block *b = free_list[c];
    if (b) {
        free_list[c] = b->next;
    } else {
        size_t align = bytes < 4096 ? bytes : 4096;
        char *at = (char *)(((uintptr_t)arena_pos + align - 1) & ~(uintptr_t)(align - 1));
        if (!arena_pos || at + bytes > arena_end) {
            char *a = map(ARENA_BYTES);
            if (!a) {
                unlock();
                return NULL;
            }
            arena_pos = a, arena_end = a + ARENA_BYTES, at = a;
        }
        arena_pos = at + bytes;
        b = (struct free_block *)at;
    }
    unlock();
    return b;
}

static void class_give(unsigned c, void *base)
{
    struct free_block *b = base;
    lock();
    b->next = free_list[c];
    free_list[c] = b;
    unlock();
}

/* n bytes aligned to align (a power of two, at least 16). */
static void *take(size_t n, size_t align)
{
    if (n > ((size_t)1 << 46) || align > ((size_t)1 << 30)) {
        errno = ENOMEM;
        return NULL;
    }
    size_t need = n + HDR + (align > 16 ? align : 0); /* room to move the data up to align */
    char *base;
    uint32_t cls = LARGE;
    size_t room;
    if (need <= ((size_t)1 << MAX_SHIFT)) {
        cls = 0;
        while (((size_t)1 << (cls + MIN_SHIFT)) < need)
            cls++;
        room = (size_t)1 << (cls + MIN_SHIFT);
        base = class_take(cls);
    } else {
        room = page_round(need);
        base = map(room);
    }
    if (!base) {
        errno = ENOMEM;
        return NULL;
    }
    uintptr_t data = ((uintptr_t)base + HDR + align - 1) & ~(uintptr_t)(align - 1);
    struct hdr *h = (struct hdr *)data - 1;
    h->cls = cls;
    h->back = (uint32_t)(data - (uintptr_t)base);
    h->size = room - h->back;
    return (void *)data;
}

FTR_ALLOC_API void free(void *p)
{
    if (!p) return;
    struct hdr *h = (struct hdr *)p - 1;
    char *base = (char *)p - h->back;
    if (h->cls == LARGE)
        munmap(base, h->back + h->size);
    else
        class_give(h->cls, base);
}

FTR_ALLOC_API void *malloc(size_t n)
{
    return take(n, 16);
}

FTR_ALLOC_API void *calloc(size_t k, size_t n)
{
    if (n && k > SIZE_MAX / n) {
        errno = ENOMEM;
        return NULL;
    }
    void *p = take(k * n, 16);
    if (p && ((struct hdr *)p - 1)->cls != LARGE) memset(p, 0, k * n); /* fresh maps are 0 */
    return p;
}

FTR_ALLOC_API void *realloc(void *old, size_t n)
{
    if (!old) return take(n, 16);
    struct hdr *h = (struct hdr *)old - 1;
    if (n <= h->size && (h->cls != LARGE || n > h->size / 2)) return old; /* fits, not wasteful */
    if (h->cls == LARGE && h->back == HDR) { /* a mapping of its own: grow or shrink in place */
        size_t room = page_round(n + HDR);
        void *m = mremap((char *)h, HDR + h->size, room, MREMAP_MAYMOVE);
        if (m != MAP_FAILED) {
            h = m;
            h->size = room - HDR;
            return h + 1;
        }
    }
    void *p = take(n, 16);
    if (!p) return NULL;
    memcpy(p, old, n < h->size ? n : h->size);
    free(old);
    return p;
}

FTR_ALLOC_API int posix_memalign(void **out, size_t align, size_t n)
{
    if (align < sizeof(void *) || (align & (align - 1))) return EINVAL;
    void *p = take(n, align < 16 ? 16 : align);
    if (!p) return ENOMEM;
    *out = p;
    return 0;
}

FTR_ALLOC_API void *aligned_alloc(size_t align, size_t n)
{
    if (!align || (align & (align - 1))) {
        errno = EINVAL;
        return NULL;
    }
    return take(n, align < 16 ? 16 : align);
}

FTR_ALLOC_API void *memalign(size_t align, size_t n)
{
    return aligned_alloc(align, n);
}

FTR_ALLOC_API void *reallocarray(void *old, size_t k, size_t n)
{
    if (n && k > SIZE_MAX / n) {
        errno = ENOMEM;
        return NULL;
    }
    return realloc(old, k * n);
}

FTR_ALLOC_API char *strndup(const char *s, size_t max)
{
    size_t n = strnlen(s, max);
    char *d = take(n + 1, 16);
    if (d) memcpy(d, s, n), d[n] = '\0';
    return d;
}

FTR_ALLOC_API char *strdup(const char *s)
{
    return strndup(s, strlen(s));
}

/* In a fork child only the forking thread is left: a lock taken elsewhere stays taken. */
static void child_after_fork(void)
{
    if (atomic_load_explicit(&heap_lock, memory_order_relaxed)) {
        memset(free_list, 0, sizeof free_list);
        arena_pos = arena_end = NULL;
        unlock();
    }
}

/* First of libftrace.so's constructors, so that its fork child handler runs before any other
 * of ours (they run in the order registered), whichever of them allocates. */
__attribute__((constructor(101))) static void alloc_init(void)
{
    pthread_atfork(NULL, NULL, child_after_fork);
}
