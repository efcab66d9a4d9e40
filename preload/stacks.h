/*
 * stacks.h - which stack an address is on (stacks.c).
 *
 * A thread runs on its own stack, on its sigaltstack in a signal handler, and on coroutine
 * stacks (makecontext). The shadow stack holds entries of all of them, interleaved: a frame is
 * dead only when an address below it *on the same stack* is live, and a return on one stack
 * never closes entries of another. Stacks the program declares (sigaltstack(), makecontext())
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
#define FTR_STACK_RANGES_MAX 65536u

struct ftr_stack_range {
    atomic_uint seq; /* odd while being rewritten: readers skip it */
    uint32_t pad;
    _Atomic uintptr_t lo, hi;
};
extern struct ftr_stack_range *ftr_stack_ranges FTR_HIDDEN;
extern atomic_uint ftr_stack_nranges FTR_HIDDEN;
extern atomic_int ftr_stack_any_inside FTR_HIDDEN; /* a declared stack lies in a thread's own */

/* 1 + the index of the declared stack holding a, or 0. Newest first. */
static inline uint32_t ftr_stack_declared(uintptr_t a)
{
    uint32_t n = atomic_load_explicit(&ftr_stack_nranges, memory_order_acquire);
    for (uint32_t i = n; i-- > 0;) {
        struct ftr_stack_range *r = &ftr_stack_ranges[i];
        uint32_t s = atomic_load_explicit(&r->seq, memory_order_acquire);
        uintptr_t lo = atomic_load_explicit(&r->lo, memory_order_relaxed);
        uintptr_t hi = atomic_load_explicit(&r->hi, memory_order_relaxed);
        if (!(s & 1) && a - lo < hi - lo &&
            atomic_load_explicit(&r->seq, memory_order_acquire) == s)
            return i + 1;
    }
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
