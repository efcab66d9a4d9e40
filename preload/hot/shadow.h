/*
 * shadow.h - a thread's shadow stack and record stream: the primitives the hooks (hooks.c:
 * entry, exit, jumps out of frames) and the coroutine switches (switch.c) share.
 *
 * A stack is a class (stacks.h): the thread's own, a declared one (sigaltstack, makecontext),
 * or unknown; frames are ordered by address only on one stack. An entry (struct ftr_shadow,
 * tracer.h) is a traced frame the thread runs: its slot (the stack address of its return
 * address), the real return address, its site and flags, from ftr_tls.shadow_base up to .top;
 * where a hooked frame returns is kept apart, in the book (retaddr.h). A switch (switch.c)
 * moves the entries of the stacks it leaves out of the recorded stream (parked with a declared
 * stack: park.h) and those of the stack it resumes back in. Records are 16 bytes in the
 * thread's current chunk, reserved with one non-locked xadd and filled head last.
 *
 * Everything here may be interrupted by a signal handler that runs hooks of its own, and maybe
 * jumps out for good: see the marks in hooks.c. Inlined into files compiled
 * general-registers-only (hooks.c, switch.c): integer code only.
 */
#ifndef FTR_SHADOW_H
#define FTR_SHADOW_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "stacks.h"
#include "tracer.h"

#define SIGNAL_FENCE() __atomic_signal_fence(__ATOMIC_SEQ_CST)

/* Reserve n records at once: a single instruction, so a signal sees either before or after
 * (a signal handler's records go before or after them, never between). */
static inline struct ftr_rec *reserve_n(struct ftr_tls *t, size_t n)
{
    struct ftr_rec *r = (struct ftr_rec *)(n * sizeof(struct ftr_rec));
    __asm__ volatile("xaddq %0, %1" : "+r"(r), "+m"(t->pos) : : "memory");
    return r;
}

static inline struct ftr_rec *reserve(struct ftr_tls *t)
{
    return reserve_n(t, 1);
}

/* The n records reserved at r lie inside the current chunk */
static inline int fits(const struct ftr_tls *t, const struct ftr_rec *r, size_t n)
{
    return r < t->end && (size_t)(t->end - r) >= n;
}

#define HOT_INLINE inline __attribute__((always_inline))

/* t->inflight once its record is written. The head cannot tell it for long: a signal handler
 * that fills the chunk after the record's filling ends hands the chunk to the writer, which
 * writes it and zeroes it for reuse, before the handler's jump asks (hostile-jmpfill). */
#define INFLIGHT_WRITTEN ((struct ftr_rec *)1)

/* Fills a reserved record slot: the head last (the writer may read the record once it is set).
 * Called with t->filling raised: a chunk switch in a signal handler until the caller lowers it
 * holds this chunk back, so the head is the answer until t->inflight says written. */
static HOT_INLINE void fill(struct ftr_tls *t, struct ftr_rec *r, uint32_t head, uint64_t tsc,
                            uint32_t arg)
{
    t->inflight = r;
    SIGNAL_FENCE();
    /* plain moves on x86; atomics so that the writer's concurrent reads are defined */
    __atomic_store_n(&r->tsc, tsc, __ATOMIC_RELAXED);
    __atomic_store_n(&r->arg, arg, __ATOMIC_RELAXED);
    __atomic_store_n(&r->head, head, __ATOMIC_RELEASE);
    SIGNAL_FENCE();
    t->inflight = INFLIGHT_WRITTEN;
}

/* hooks.c: the chunk is full (or being replaced by a nested slow path): hand it off and
 * reserve n records again (what was reserved of the full chunk stays unfilled: skipped).
 * @return them, or NULL when the event is lost (counted; a LOST event marks it). */
struct ftr_rec *ftr_reserve_slow(struct ftr_tls *t, size_t n) FTR_HIDDEN;
/* hooks.c: record_arg() found the chunk full. Entered with t->filling raised, which it lowers. */
int ftr_record_slow(struct ftr_tls *t, uint32_t head, uint64_t tsc, uint32_t arg) FTR_HIDDEN;

/* @return 1, or 0 when the event was lost (no room: counted, and a LOST event marks it) */
static HOT_INLINE int record_arg(struct ftr_tls *t, uint32_t head, uint64_t tsc, uint32_t arg)
{
    t->filling++; /* a nested run restores it; it tells the slow path a slot is in flight */
    SIGNAL_FENCE();
    struct ftr_rec *r = reserve(t);
    if (unlikely(r >= t->end)) return ftr_record_slow(t, head, tsc, arg);
    fill(t, r, head, tsc, arg);
    SIGNAL_FENCE();
    t->filling--;
    return 1;
}

static HOT_INLINE int record(struct ftr_tls *t, uint32_t head, uint64_t tsc)
{
    return record_arg(t, head, tsc, 0);
}

/* Entries hooked on another stack (a sigaltstack handler, a swapcontext coroutine) are never
 * judged dead by addresses on this one: stacks are not ordered with each other (stacks.h). */
static inline int same_stack(const struct ftr_tls *t, uintptr_t a, uint32_t cls)
{
    if (!a) return 0;
    if (cls != FTR_STACK_OWN && cls != FTR_STACK_UNKNOWN) return ftr_stack_is(a, cls);
    return ftr_stack_class(t, a) == cls;
}

/* The --graph-function and --notrace counters: entry e counted in (d = 1) or out (-1). The
 * frames of a suspended coroutine are out (FTR_SH_UNCOUNTED): a --notrace function that yields
 * hides nothing of its resumer's, until its stack is resumed. */
static inline void graph_count(struct ftr_tls *t, const struct ftr_shadow *e, int d)
{
    if (unlikely(e->flags & (FTR_SH_TRIGGER | FTR_SH_NOTRACE)) && !(e->flags & FTR_SH_UNCOUNTED)) {
        t->graph_open += (uint32_t)(d * !!(e->flags & FTR_SH_TRIGGER));
        t->notrace_open += (uint32_t)(d * !!(e->flags & FTR_SH_NOTRACE));
    }
}

/* Takes entry e off the books: its exit (kind EXIT or UNWIND) is recorded when its entry was,
 * and the per-thread counters forget it. */
static inline void retire(struct ftr_tls *t, const struct ftr_shadow *e, unsigned kind,
                          uint64_t tsc)
{
    if (e->flags & FTR_SH_RECORDED) {
        t->rec_depth--;
        record(t, ftr_rec_head(e->site, kind), tsc);
    }
    graph_count(t, e, -1);
}

/* (a switch under way is an active thread's: a fork child of a handler in it reopens frames) */
static inline int recording(const struct ftr_tls *t)
{
    return (t->state == FTR_T_ACTIVE || t->state == FTR_T_SWITCHING) &&
           atomic_load_explicit(&ftr_hot.recording, memory_order_relaxed);
}

/* One line on stderr with a raw write (no libc: any context, any register state) */
static inline void say_raw(const char *msg, unsigned long len)
{
    long rc;
    __asm__ volatile("syscall"
                     : "=a"(rc)
                     : "a"(1), "D"(2), "S"(msg), "d"(len)
                     : "rcx", "r11", "memory");
    (void)rc;
}

/* A thread that shares its creator's TLS (stacks.h) must not touch it: nothing is done. */
static inline int aside(const uintptr_t *slot)
{
    return unlikely(atomic_load_explicit(&ftr_hot.aside, memory_order_relaxed)) &&
           ftr_stack_aside((uintptr_t)slot);
}

/* switch.c: a signal handler that interrupted a coroutine switch switched too, or jumped out of
 * it, or returned through a hooked frame: the thread steps aside. */
void ftr_switch_spoiled(struct ftr_tls *t) FTR_HIDDEN;
/* switch.c: a signal handler that interrupted a hook switched stacks by hand (handlers.h):
 * the thread steps aside. */
void ftr_handler_switched(struct ftr_tls *t) FTR_HIDDEN;

#endif /* FTR_SHADOW_H */
