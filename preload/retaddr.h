/*
 * retaddr.h - the real return addresses of hooked frames, kept by the stack slot they were
 * taken from, process-wide (retaddr.c maps the book).
 *
 * The invariant (docs/design.md, "A return goes where it would untraced"): a hooked return
 * finds its address by the address of its own slot, never by a thread's shadow stack. At any
 * moment a stack slot belongs to at most one live frame, whichever thread runs it, and the last
 * hook of a slot is the one whose return comes through it: so the book is written by the hook
 * (before the slot is given our trampoline) and read by the return, on whatever thread the
 * frame returns (a coroutine resumed elsewhere), by unwinders, and by nothing else. Entries are
 * never taken out: a slot that is hooked again overwrites its address, and an entry whose frame
 * is gone (longjmp, an exception, a coroutine dropped) is never read again, since its slot no
 * longer holds our trampoline. So there is nothing to keep consistent with the shadow stacks,
 * which only decide what the trace records.
 *
 * Open addressing with linear probing over FTR_RET_N entries (a NORESERVE mapping: only the
 * pages a program's stacks map to are touched). A key goes from 0 to its slot once (a locked
 * cmpxchg, the first time a stack address is hooked) and never changes again: a reader that
 * meets 0 knows the key is not further on. Groups of 64 consecutive slots (512 bytes of stack)
 * hash to 64 consecutive entries, so the frames of one call chain share a few cache lines.
 *
 * Inlined into hooks.c (general registers only): integer code only.
 */
#ifndef FTR_RETADDR_H
#define FTR_RETADDR_H

#include <stdatomic.h>
#include <stdint.h>

#include "tracer.h"

#define FTR_RET_BITS 22u /* 4 Mi entries, 64 MiB of address space */
#define FTR_RET_N (1u << FTR_RET_BITS)
#define FTR_RET_PROBES 256u /* a key further than this from its home is not taken */

struct ftr_retaddr {
    _Atomic uintptr_t slot; /* the stack address of the return address (0: a free entry) */
    _Atomic uintptr_t ret;  /* the real return address last taken from it */
};
extern struct ftr_retaddr *ftr_ret_book FTR_HIDDEN;
extern _Atomic uint64_t ftr_ret_full FTR_HIDDEN; /* hooks refused: no entry within reach */

static inline uint32_t ftr_ret_home(uintptr_t slot)
{
    uint64_t group = (uint64_t)(slot >> 9) * 0x9e3779b97f4a7c15ull;
    return (uint32_t)((group >> (64u - (FTR_RET_BITS - 6u))) << 6 | ((slot >> 3) & 63u));
}

/* The entry of slot; with claim, a free one is taken for it. NULL: none (without claim: the
 * slot was never hooked; with claim: the book is full around its home, or not mapped). */
static inline struct ftr_retaddr *ftr_ret_entry(uintptr_t slot, int claim)
{
    struct ftr_retaddr *book = ftr_ret_book;
    if (__builtin_expect(!book, 0)) return NULL;
    uint32_t i = ftr_ret_home(slot);
    for (uint32_t n = 0; n < FTR_RET_PROBES; n++, i = (i + 1) & (FTR_RET_N - 1)) {
        uintptr_t k = atomic_load_explicit(&book[i].slot, memory_order_acquire);
        if (k == slot) return &book[i];
        if (k) continue;
        if (!claim) return NULL;
        if (atomic_compare_exchange_strong(&book[i].slot, &k, slot) || k == slot) return &book[i];
    }
    return NULL;
}

/* hint, if it is the entry of slot (keys never change: one compare proves it), else NULL. */
static inline struct ftr_retaddr *ftr_ret_hinted(struct ftr_retaddr *hint, uintptr_t slot)
{
    return hint && atomic_load_explicit(&hint->slot, memory_order_relaxed) == slot ? hint : NULL;
}

/* The hook of slot, taking ret from it (before the slot gets our trampoline). @return the
 * slot's entry (its key never changes: the shadow entry keeps it, so that the return reads the
 * address without a lookup), or NULL when it cannot be kept: the call must then run unhooked. */
static inline struct ftr_retaddr *ftr_ret_put(uintptr_t slot, uintptr_t ret,
                                              struct ftr_retaddr *hint)
{
    /* hint: the entry the shadow entry being reused kept (a loop calls at the same depth, from
     * the same slot, again and again) */
    struct ftr_retaddr *e = ftr_ret_hinted(hint, slot);
    if (!e) e = ftr_ret_entry(slot, 1);
    if (__builtin_expect(!e, 0)) {
        atomic_fetch_add_explicit(&ftr_ret_full, 1, memory_order_relaxed);
        return NULL;
    }
    atomic_store_explicit(&e->ret, ret, memory_order_relaxed);
    return e;
}

/* The real return address of the frame whose slot holds our trampoline (0: never hooked);
 * hint as for ftr_ret_put(), or NULL. */
static inline uintptr_t ftr_ret_get_hinted(uintptr_t slot, struct ftr_retaddr *hint)
{
    const struct ftr_retaddr *e = ftr_ret_hinted(hint, slot);
    if (!e) e = ftr_ret_entry(slot, 0);
    return e ? atomic_load_explicit(&e->ret, memory_order_relaxed) : 0;
}
static inline uintptr_t ftr_ret_get(uintptr_t slot)
{
    return ftr_ret_get_hinted(slot, NULL);
}

void ftr_retaddr_init(void) FTR_HIDDEN; /* constructor, before any site is patched */

#endif /* FTR_RETADDR_H */
