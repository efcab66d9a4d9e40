/*
 * stacks.c - the stacks of the program's threads: their own, their sigaltstacks, coroutine
 * stacks (see stacks.h for why the shadow stack needs to tell them apart).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "stacks.h"

#define EXPORT __attribute__((visibility("default")))

struct ftr_stack_range *ftr_stack_ranges;
atomic_uint ftr_stack_nranges;
atomic_int ftr_stack_any_inside;
static atomic_flag declaring = ATOMIC_FLAG_INIT;

/* The declaring flag, waited for a little: a signal handler's declaration inside another's
 * on the same thread would wait for good. @return 0 if not taken. */
static int declaring_take(void)
{
    for (int tries = 0; atomic_flag_test_and_set(&declaring); tries++) {
        if (tries == 10000) return 0;
        __builtin_ia32_pause();
    }
    return 1;
}

static uintptr_t main_lo, main_hi;
static size_t default_size = 8u << 20;

int ftr_mapping_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi, int *prot)
{
    int fd = (int)syscall(SYS_openat, AT_FDCWD, "/proc/self/maps", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    char buf[4096];
    size_t have = 0;
    int found = -1;
    for (;;) {
        ssize_t n = syscall(SYS_read, fd, buf + have, sizeof buf - 1 - have);
        if (n <= 0) break;
        have += (size_t)n;
        buf[have] = 0;
        char *line = buf, *nl;
        while ((nl = strchr(line, '\n'))) {
            char *e;
            uintptr_t a = strtoul(line, &e, 16), b = *e == '-' ? strtoul(e + 1, &e, 16) : 0;
            if (addr >= a && addr < b) { /* "lo-hi rwxp ..." */
                *lo = a, *hi = b, found = 0;
                if (prot)
                    *prot = *e != ' '
                                ? -1
                                : (e[1] == 'r' ? PROT_READ : 0) | (e[2] == 'w' ? PROT_WRITE : 0) |
                                      (e[3] == 'x' ? PROT_EXEC : 0);
                break;
            }
            line = nl + 1;
        }
        if (!found) break;
        have -= (size_t)(line - buf);
        memmove(buf, line, have);
        if (have == sizeof buf - 1) have = 0; /* a line longer than the buffer: not ours */
    }
    syscall(SYS_close, fd);
    return found;
}

void ftr_stacks_init(void)
{
    ftr_stack_ranges =
        mmap(NULL, FTR_STACK_RANGES_MAX * sizeof *ftr_stack_ranges, PROT_READ | PROT_WRITE,
             MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (ftr_stack_ranges == MAP_FAILED) ftr_stack_ranges = NULL;
    /* the main thread's stack grows down from the top of its mapping, up to RLIMIT_STACK */
    uintptr_t lo, hi, sp = (uintptr_t)__builtin_frame_address(0);
    struct rlimit rl;
    if ((uint32_t)syscall(SYS_gettid) == ftr_getpid() && ftr_mapping_of(sp, &lo, &hi, NULL) == 0) {
        uintptr_t lim = 1ull << 30;
        if (getrlimit(RLIMIT_STACK, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY && rl.rlim_cur < lim)
            lim = rl.rlim_cur;
        main_hi = hi;
        main_lo = hi - lo > lim ? lo : hi - lim;
    }
    pthread_attr_t a;
    size_t sz;
    if (pthread_getattr_default_np(&a) == 0) {
        if (pthread_attr_getstacksize(&a, &sz) == 0 && sz) default_size = sz;
        pthread_attr_destroy(&a);
    }
}

void ftr_stack_bounds_here(size_t size, uintptr_t sp, uintptr_t *lo, uintptr_t *hi)
{
    uintptr_t l, h;
    if (!sp) sp = (uintptr_t)__builtin_frame_address(0);
    if ((uint32_t)syscall(SYS_gettid) == ftr_getpid()) {
        l = main_lo, h = main_hi;
    } else {
        /* glibc puts the thread descriptor at the top of the thread's stack block, the stack
         * below it (x86_64: TLS_TCB_AT_TP); the block ends at the next page boundary. */
        h = ((uintptr_t)pthread_self() + 4096) & ~(uintptr_t)4095;
        l = h - (size ? size : default_size);
    }
    if (sp - l < h - l) {
        *lo = l, *hi = h;
    } else {
        *lo = *hi = 0; /* unknown: everything counts as this thread's own (the old rule) */
    }
}

struct ftr_granule *_Atomic ftr_stack_granules;
atomic_int ftr_stack_crowded;
#define GRAN ((uintptr_t)1 << FTR_GRAN_SHIFT)
#define INDEXED_MAX ((uintptr_t)64 << 20) /* a larger declared stack is only searched for */

/* The granule table, mapped with the first declaration (under the declaring flag). */
static struct ftr_granule *granules(void)
{
    struct ftr_granule *g = atomic_load(&ftr_stack_granules);
    if (g) return g;
    void *m = mmap(NULL, (size_t)FTR_GRAN_N * sizeof *g, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return NULL;
    atomic_store(&ftr_stack_granules, (struct ftr_granule *)m);
    return m;
}

static struct ftr_granule *granule_claim(struct ftr_granule *g, uintptr_t a)
{
    uintptr_t key = (a >> FTR_GRAN_SHIFT) + 1;
    uint32_t i = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> (64u - FTR_GRAN_BITS));
    for (uint32_t n = 0; n < FTR_GRAN_PROBES; n++, i = (i + 1) & (FTR_GRAN_N - 1)) {
        uintptr_t k = atomic_load(&g[i].key);
        if (k == key) return &g[i];
        if (k) continue;
        atomic_store(&g[i].key, key); /* only the declarer writes keys (the flag) */
        return &g[i];
    }
    return NULL;
}

static int overlaps(uint32_t d, uintptr_t lo, uintptr_t hi)
{
    return atomic_load(&ftr_stack_ranges[d - 1].lo) < hi &&
           lo < atomic_load(&ftr_stack_ranges[d - 1].hi);
}

/* 1 + the index of a declared stack that overlaps [lo, hi), or 0. */
static uint32_t overlapping(uintptr_t lo, uintptr_t hi)
{
    if (hi - lo <= INDEXED_MAX)
        for (uintptr_t a = lo & ~(GRAN - 1); a < hi; a += GRAN) {
            const struct ftr_granule *g = ftr_granule_find(a);
            for (uint32_t k = 0; g && k < FTR_GRAN_RANGES; k++) {
                uint32_t d = atomic_load(&g->range[k]);
                if (d && overlaps(d, lo, hi)) return d;
            }
        }
    if (!atomic_load(&ftr_stack_crowded) && hi - lo <= INDEXED_MAX) return 0;
    uint32_t n = atomic_load(&ftr_stack_nranges);
    for (uint32_t i = 0; i < n; i++)
        if (overlaps(i + 1, lo, hi)) return i + 1;
    return 0;
}

/* Declared stack d, now [lo, hi), named in each granule it overlaps. */
static void index_range(uint32_t d, uintptr_t lo, uintptr_t hi)
{
    struct ftr_granule *g = granules();
    if (!g || hi - lo > INDEXED_MAX) {
        atomic_store(&ftr_stack_crowded, 1);
        return;
    }
    for (uintptr_t a = lo & ~(GRAN - 1); a < hi; a += GRAN) {
        struct ftr_granule *e = granule_claim(g, a);
        uint32_t k = 0, free = FTR_GRAN_RANGES;
        for (; e && k < FTR_GRAN_RANGES; k++) {
            uint32_t o = atomic_load(&e->range[k]);
            if (o == d) break;
            if (free == FTR_GRAN_RANGES && (!o || !overlaps(o, a, a + GRAN))) free = k;
        }
        if (e && k < FTR_GRAN_RANGES) continue;
        if (!e || free == FTR_GRAN_RANGES)
            atomic_store(&ftr_stack_crowded, 1);
        else
            atomic_store(&e->range[free], d);
    }
}

/* A new stack replaces a declared one it overlaps (the memory was reused); else it is added.
 * Declarations come from the program's normal code (makecontext, sigaltstack): a flag keeps
 * two of them apart (a declaration that waits too long for it, a signal handler's inside
 * another's, is not made), readers skip an entry while it changes. */
void ftr_stack_declare(uintptr_t lo, uintptr_t hi)
{
    if (!ftr_stack_ranges || hi <= lo || !declaring_take()) return;
    const struct ftr_tls *t = &ftr_tls; /* a stack made inside the declaring thread's own */
    if (t->stack_hi && lo < t->stack_hi && t->stack_lo < hi) atomic_store(&ftr_stack_any_inside, 1);
    uint32_t n = atomic_load(&ftr_stack_nranges), d = overlapping(lo, hi);
    if (!d && n < FTR_STACK_RANGES_MAX) d = n + 1;
    if (d) {
        struct ftr_stack_range *r = &ftr_stack_ranges[d - 1];
        atomic_fetch_add(&r->seq, 1);
        atomic_store(&r->lo, lo);
        atomic_store(&r->hi, hi);
        atomic_fetch_add(&r->seq, 1);
        index_range(d, lo, hi);
        if (d == n + 1) atomic_store(&ftr_stack_nranges, n + 1);
    }
    atomic_flag_clear(&declaring);
}

struct ftr_stack_range ftr_stack_aside_ranges[FTR_ASIDE_MAX];
atomic_uint ftr_stack_naside;

int ftr_stack_set_aside_range(uintptr_t lo, uintptr_t hi)
{
    if (!declaring_take()) return -1;
    uint32_t n = atomic_load(&ftr_stack_naside), i = 0;
    while (i < n && atomic_load(&ftr_stack_aside_ranges[i].hi)) /* a free one: given back */
        i++;
    int rc = -1;
    if (i < FTR_ASIDE_MAX) {
        atomic_store(&ftr_stack_aside_ranges[i].lo, lo);
        atomic_store(&ftr_stack_aside_ranges[i].hi, hi);
        if (i == n) atomic_store(&ftr_stack_naside, n + 1);
        atomic_store_explicit(&ftr_hot.aside, 1, memory_order_release);
        rc = (int)i;
    }
    atomic_flag_clear(&declaring);
    return rc;
}

void ftr_stack_unset_aside(int i)
{
    if (i < 0 || (uint32_t)i >= FTR_ASIDE_MAX) return;
    atomic_store(&ftr_stack_aside_ranges[i].lo, 0);
    atomic_store(&ftr_stack_aside_ranges[i].hi, 0);
}

int ftr_stack_set_aside(uintptr_t top)
{
    uintptr_t lo, hi, cap = 8u << 20;
    if (ftr_mapping_of(top - 1, &lo, &hi, NULL) < 0) lo = top > cap ? top - cap : 0;
    if (top - lo > cap) lo = top - cap;
    /* an array in the creating thread's own stack: it lies above that thread's stack pointer */
    uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
    const struct ftr_tls *t = &ftr_tls;
    if (t->stack_hi && top - t->stack_lo <= t->stack_hi - t->stack_lo && sp < top && lo < sp)
        lo = sp;
    return ftr_stack_set_aside_range(lo, top);
}

/* ---- where the program declares stacks (not in tests that link this file into a program) ---- */
#ifndef FTR_NO_WRAPPERS

typedef int (*sigaltstack_fn)(const stack_t *, stack_t *);
static sigaltstack_fn real_sigaltstack;

EXPORT int sigaltstack(const stack_t *ss, stack_t *old)
{
    if (!real_sigaltstack) real_sigaltstack = (sigaltstack_fn)dlsym(RTLD_NEXT, "sigaltstack");
    if (!real_sigaltstack) return (int)syscall(SYS_sigaltstack, ss, old);
    int rc = real_sigaltstack(ss, old);
    if (rc == 0 && ss && !(ss->ss_flags & SS_DISABLE))
        ftr_stack_declare((uintptr_t)ss->ss_sp, (uintptr_t)ss->ss_sp + ss->ss_size);
    return rc;
}

/* makecontext() is variadic: ucontext_x86_64.S wraps it, calls this with its ucontext, then
 * jumps to the address returned, the real makecontext, with every register as it came. */
typedef void (*makecontext_fn)(void);
static makecontext_fn real_makecontext;

FTR_HIDDEN makecontext_fn ftr_makecontext_note(ucontext_t *ucp)
{
    if (!real_makecontext) real_makecontext = (makecontext_fn)dlsym(RTLD_NEXT, "makecontext");
    if (ucp) {
        uintptr_t lo = (uintptr_t)ucp->uc_stack.ss_sp, hi = lo + ucp->uc_stack.ss_size;
        ftr_context_made(lo, hi); /* before: the entries there are found by the old range */
        ftr_stack_declare(lo, hi);
    }
    return real_makecontext;
}
#endif /* FTR_NO_WRAPPERS */
