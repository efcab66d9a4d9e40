/*
 * stacks.h - which stack an address is on (stacks.c).
 *
 * A thread runs on its own stack, on its sigaltstack in a signal handler, and on coroutine
 * stacks (makecontext). The shadow stack holds entries of those it runs, interleaved (the
 * entries of a declared stack a switch leaves are parked with it: park.h): a frame is dead only
 * when an address below it *on the same stack* is live, and a return on one stack never closes
 * entries of another. Stacks the program declares (sigaltstack(), makecontext())
 * are remembered as ranges; everything else is the thread's own stack (its bounds in ftr_tls)
 * or unknown.
 *
 * The lookup is inlined into hooks.c, which is compiled general-registers-only: integer code
 * only here.
 */
#ifndef FTR_STACKS_H
#define FTR_STACKS_H

#include <stdatomic.h>
#include <stdint.h>

#include "tracer.h"

#define FTR_STACK_OWN 0u
#define FTR_STACK_UNKNOWN                                                                          \
    0xffffffffu /* not the thread's own, not declared: as before, one class                        \
                 */
#define FTR_STACK_RANGES_MAX (1u << 20)

struct ftr_stack_range {
    atomic_uint seq;         /* odd while being rewritten: readers skip it */
    _Atomic uint32_t parked; /* park.h: the entries of its suspended coroutine (0: none) */
    _Atomic uintptr_t lo, hi;
};
extern struct ftr_stack_range *ftr_stack_ranges FTR_HIDDEN;
extern atomic_uint ftr_stack_nranges FTR_HIDDEN;
extern atomic_int ftr_stack_any_inside FTR_HIDDEN; /* a declared stack lies in a thread's own */

/* Where the declared stacks are, in O(1): a table of 16 KiB granules of the address space
 * (open addressing, a key claimed once and never removed, like retaddr.h's), each naming up to
 * FTR_GRAN_RANGES declared stacks that overlap it (1 + index; a stale one, whose range was
 * reused elsewhere, fails the bounds check). Only a granule that more stacks overlap (stacks
 * under 8 KiB) sends lookups to the full search (ftr_stack_crowded). */
#define FTR_GRAN_SHIFT 14u
#define FTR_GRAN_BITS 21u
#define FTR_GRAN_N (1u << FTR_GRAN_BITS)
#define FTR_GRAN_PROBES 64u
#define FTR_GRAN_RANGES 4u
struct ftr_granule {
    _Atomic uintptr_t key; /* granule number + 1 (0: free) */
    _Atomic uint32_t range[FTR_GRAN_RANGES];
};
extern struct ftr_granule *_Atomic ftr_stack_granules FTR_HIDDEN;
extern atomic_int ftr_stack_crowded FTR_HIDDEN;

static inline struct ftr_granule *ftr_granule_find(uintptr_t a)
{
    struct ftr_granule *g = atomic_load_explicit(&ftr_stack_granules, memory_order_acquire);
    if (!g) return NULL;
    uintptr_t key = (a >> FTR_GRAN_SHIFT) + 1;
    uint32_t i = (uint32_t)((key * 0x9e3779b97f4a7c15ull) >> (64u - FTR_GRAN_BITS));
    for (uint32_t n = 0; n < FTR_GRAN_PROBES; n++, i = (i + 1) & (FTR_GRAN_N - 1)) {
        uintptr_t k = atomic_load_explicit(&g[i].key, memory_order_acquire);
        if (k == key) return &g[i];
        if (!k) return NULL;
    }
    return NULL;
}

/* Does declared stack d (1 + index) hold a, read consistently? */
static inline int ftr_stack_range_has(uint32_t d, uintptr_t a)
{
    struct ftr_stack_range *r = &ftr_stack_ranges[d - 1];
    uint32_t s = atomic_load_explicit(&r->seq, memory_order_acquire);
    uintptr_t lo = atomic_load_explicit(&r->lo, memory_order_relaxed);
    uintptr_t hi = atomic_load_explicit(&r->hi, memory_order_relaxed);
    return !(s & 1) && a - lo < hi - lo && atomic_load_explicit(&r->seq, memory_order_acquire) == s;
}

/* 1 + the index of the declared stack holding a, or 0. */
static inline uint32_t ftr_stack_declared(uintptr_t a)
{
    const struct ftr_granule *g = ftr_granule_find(a);
    if (g)
        for (uint32_t k = 0; k < FTR_GRAN_RANGES; k++) {
            uint32_t d = atomic_load_explicit(&g->range[k], memory_order_acquire);
            if (d && d <= FTR_STACK_RANGES_MAX && ftr_stack_range_has(d, a)) return d;
        }
    if (__builtin_expect(!atomic_load_explicit(&ftr_stack_crowded, memory_order_relaxed), 1))
        return 0;
    uint32_t n = atomic_load_explicit(&ftr_stack_nranges, memory_order_acquire);
    for (uint32_t i = n; i-- > 0;) /* newest first */
        if (ftr_stack_range_has(i + 1, a)) return i + 1;
    return 0;
}

/* Is a on the stack of class cls? A declared stack is checked against its bounds alone. */
static inline int ftr_stack_is(uintptr_t a, uint32_t cls)
{
    if (cls != FTR_STACK_OWN && cls != FTR_STACK_UNKNOWN) {
        const struct ftr_stack_range *r = &ftr_stack_ranges[cls - 1];
        uintptr_t lo = atomic_load_explicit(&r->lo, memory_order_relaxed);
        uintptr_t hi = atomic_load_explicit(&r->hi, memory_order_relaxed);
        return a - lo < hi - lo;
    }
    return 0;
}

/* The stack class of a (0: the thread's own): equal classes, same stack. */
static inline uint32_t ftr_stack_class(const struct ftr_tls *t, uintptr_t a)
{
    int own = a - t->stack_lo < t->stack_hi - t->stack_lo;
    /* the thread's own stack, and no declared stack inside any: no search (with thousands of
     * coroutines declared, most calls are on the thread's own stack) */
    if (own && !atomic_load_explicit(&ftr_stack_any_inside, memory_order_relaxed))
        return FTR_STACK_OWN;
    if (__builtin_expect(atomic_load_explicit(&ftr_stack_nranges, memory_order_relaxed) != 0, 0)) {
        uint32_t d = ftr_stack_declared(a);
        if (d) return d;
    }
    return own || t->stack_hi == 0 ? FTR_STACK_OWN : FTR_STACK_UNKNOWN;
}

/* The bounds of the stack holding a, when known (the thread's own, or a declared one): 1 and
 * [*lo, *hi), else 0. */
static inline int ftr_stack_bounds_of(const struct ftr_tls *t, uintptr_t a, uintptr_t *lo,
                                      uintptr_t *hi)
{
    uint32_t cls = ftr_stack_class(t, a);
    if (cls == FTR_STACK_UNKNOWN || (cls == FTR_STACK_OWN && !t->stack_hi)) return 0;
    if (cls == FTR_STACK_OWN) {
        *lo = t->stack_lo, *hi = t->stack_hi;
        return 1;
    }
    *lo = atomic_load_explicit(&ftr_stack_ranges[cls - 1].lo, memory_order_relaxed);
    *hi = atomic_load_explicit(&ftr_stack_ranges[cls - 1].hi, memory_order_relaxed);
    return 1;
}

/* The word at a, read without faulting (process_vm_readv on ourselves: a raw system call, any
 * context): a shadow entry may name a slot on a stack the program has freed since (a
 * coroutine's, dropped). @return 1 and *v, or 0 (not readable, or the call refused). */
static inline int ftr_peek(uintptr_t a, uintptr_t *v)
{
    struct {
        void *base;
        unsigned long len;
    } local = {v, sizeof *v}, remote = {(void *)a, sizeof *v};
    long pid, rc;
    __asm__ volatile("syscall" : "=a"(pid) : "a"(39 /* getpid */) : "rcx", "r11", "memory");
    register long r10 __asm__("r10") = (long)&remote;
    register long r8 __asm__("r8") = 1;
    register long r9 __asm__("r9") = 0;
    __asm__ volatile("syscall"
                     : "=a"(rc)
                     : "a"(310 /* process_vm_readv */), "D"(pid), "S"(&local), "d"(1), "r"(r10),
                       "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return rc == (long)sizeof *v;
}

/* Stacks of threads that share their creator's TLS (clone() with CLONE_VM and without
 * CLONE_SETTLS): every ftr_tls field would be shared with a thread running at the same time.
 * A hook on such a stack does nothing at all, before touching the TLS (hooks.c). */
#define FTR_ASIDE_MAX 64u
extern struct ftr_stack_range ftr_stack_aside_ranges[FTR_ASIDE_MAX] FTR_HIDDEN;
extern atomic_uint ftr_stack_naside FTR_HIDDEN;
static inline int ftr_stack_aside(uintptr_t a)
{
    uint32_t n = atomic_load_explicit(&ftr_stack_naside, memory_order_acquire);
    for (uint32_t i = 0; i < n && i < FTR_ASIDE_MAX; i++) {
        uintptr_t lo = atomic_load_explicit(&ftr_stack_aside_ranges[i].lo, memory_order_relaxed);
        uintptr_t hi = atomic_load_explicit(&ftr_stack_aside_ranges[i].hi, memory_order_relaxed);
        if (a - lo < hi - lo) return 1;
    }
    return 0;
}
/* The stack that ends at top (a clone() child's) is set aside: its mapping, at most 8 MiB of
 * it below top (from the creator's stack pointer up, when it is an array on the creator's
 * stack). @return its number, or -1 (no room: 64 such stacks at once). */
int ftr_stack_set_aside(uintptr_t top) FTR_HIDDEN;
/* [lo, hi) is set aside as well: a coroutine stack such a thread made or switched to. */
int ftr_stack_set_aside_range(uintptr_t lo, uintptr_t hi) FTR_HIDDEN;
/* Set aside no more (the child returned from its function): any context, no lock. */
void ftr_stack_unset_aside(int i) FTR_HIDDEN;

void ftr_stacks_init(void) FTR_HIDDEN; /* constructor: the main thread's stack, the default size */
/* The calling thread's own stack: the main thread's (found at start), or the one around its
 * thread descriptor (size: the start wrapper's hint, 0 for the default). (0, 0) if sp (the
 * thread's stack pointer; 0: the caller's own frame) is not in it. Any context. */
void ftr_stack_bounds_here(size_t size, uintptr_t sp, uintptr_t *lo, uintptr_t *hi) FTR_HIDDEN;
void ftr_stack_declare(uintptr_t lo, uintptr_t hi) FTR_HIDDEN; /* a stack the program made */
/* hooks.c: makecontext() on [lo, hi) makes a coroutine afresh there: this thread's entries of
 * frames on that memory (a coroutine abandoned suspended) are dropped */
void ftr_context_made(uintptr_t lo, uintptr_t hi) FTR_HIDDEN;

#endif /* FTR_STACKS_H */
