/*
 * retaddr.h - the real return addresses of hooked frames, kept by the stack slot they were
 * taken from, process-wide (retaddr.c maps the book).
 *
 * The invariant (docs/design.md, "A return goes where it would untraced"): a hooked return
 * finds its address by the address of its own slot, never by a thread's shadow stack. The book
 * is written by the hook (before the slot is given our trampoline) and read by the return, on
 * whatever thread the frame returns (a coroutine resumed elsewhere), by unwinders, and by
 * nothing else. A slot usually belongs to one live frame at a time, and the last hook of a slot
 * is the one whose return comes through it; copied stacks break that (libco: coroutines take
 * turns on one stack, each copied out and back in, so a frame suspended in its copy and a
 * running one share a slot). So each entry also counts the hooks of its slot whose return has
 * not come yet, and while it is not zero, a hook of another address on a stack other than the
 * thread's own is refused (the call runs unhooked): the suspended frame finds its address when
 * it is copied back. Returns lower the count, and so do the jumps and catches that leave
 * frames for good (unwind.c); a frame that dies without a word keeps its count, and the slot
 * then takes only hooks of the same address. Entries are never taken out: a slot hooked again
 * overwrites its address. The shadow stacks only decide what the trace records.
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
    /* the real return address last taken from it (bits 0-47: user space on x86_64), and in
     * bits 48-63 how many hooks of the slot have not seen their return come through it yet */
    _Atomic uintptr_t ret;
};
#define FTR_RET_ADDR(w) ((w) & ((1ull << 48) - 1))
#define FTR_RET_LIVE(w) ((w) >> 48)
#define FTR_RET_LIVE_1 (1ull << 48)
extern struct ftr_retaddr *ftr_ret_book FTR_HIDDEN;
extern _Atomic uint64_t ftr_ret_full FTR_HIDDEN; /* hooks refused: no entry within reach */
extern _Atomic uint64_t ftr_ret_held FTR_HIDDEN; /* hooks refused: a suspended frame's slot */

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
 * address without a lookup), or NULL when it cannot be kept: the call must then run unhooked.
 * A slot whose earlier hook has not returned yet, with another address, is a frame alive in a
 * copy (copied stacks: docs/design.md, "Copied stacks"), or one that died without a word: on
 * a stack other than the thread's own (strict(slot), asked only then), the new hook is
 * refused, so that the earlier frame still finds its address when it comes back. */
static __attribute__((noinline, cold)) struct ftr_retaddr *
ftr_ret_put_held(struct ftr_retaddr *e, uintptr_t slot, uintptr_t ret, int (*strict)(uintptr_t))
{
    uintptr_t w = atomic_load_explicit(&e->ret, memory_order_relaxed);
    if (FTR_RET_LIVE(ret)) { /* an address past 48 bits: no room for it */
        atomic_fetch_add_explicit(&ftr_ret_full, 1, memory_order_relaxed);
        return NULL;
    }
    if (FTR_RET_ADDR(w) != ret && strict(slot)) {
        atomic_fetch_add_explicit(&ftr_ret_held, 1, memory_order_relaxed);
        return NULL;
    }
    /* (65 536 hooks of one slot that never return wrap the count to 0) */
    atomic_store_explicit(&e->ret, ret | ((w & ~FTR_RET_ADDR(~0ull)) + FTR_RET_LIVE_1),
                          memory_order_relaxed);
    return e;
}

static inline struct ftr_retaddr *ftr_ret_put(uintptr_t slot, uintptr_t ret,
                                              struct ftr_retaddr *hint, int (*strict)(uintptr_t))
{
    /* hint: the entry the shadow entry being reused kept (a loop calls at the same depth, from
     * the same slot, again and again) */
    struct ftr_retaddr *e = ftr_ret_hinted(hint, slot);
    if (!e) e = ftr_ret_entry(slot, 1);
    if (__builtin_expect(!e, 0)) {
        atomic_fetch_add_explicit(&ftr_ret_full, 1, memory_order_relaxed);
        return NULL;
    }
    if (__builtin_expect(FTR_RET_LIVE(atomic_load_explicit(&e->ret, memory_order_relaxed) | ret),
                         0))
        return ftr_ret_put_held(e, slot, ret, strict);
    atomic_store_explicit(&e->ret, ret | FTR_RET_LIVE_1, memory_order_relaxed);
    return e;
}

/* The return of a hooked slot came through it (e: its entry, from ftr_ret_lookup()): its real
 * address, and one hook fewer not returned. */
static inline uintptr_t ftr_ret_returned(struct ftr_retaddr *e)
{
    uintptr_t w = atomic_load_explicit(&e->ret, memory_order_relaxed);
    if (FTR_RET_LIVE(w)) atomic_store_explicit(&e->ret, w - FTR_RET_LIVE_1, memory_order_relaxed);
    return FTR_RET_ADDR(w);
}

/* Shadow entry e's frame is gone for good (a jump or a catch left it, or makecontext() remade
 * the coroutine it was suspended in): its hook counts as returned. */
static inline void ftr_ret_gone(const struct ftr_shadow *e)
{
    if (e->slot && e->book && ftr_ret_hinted(e->book, e->slot)) ftr_ret_returned(e->book);
}

/* The entry of slot (hint first), or NULL: never hooked. */
static inline struct ftr_retaddr *ftr_ret_lookup(uintptr_t slot, struct ftr_retaddr *hint)
{
    struct ftr_retaddr *e = ftr_ret_hinted(hint, slot);
    return e ? e : ftr_ret_entry(slot, 0);
}

/* The frame of slot, if our trampoline is its address, never returns through it (a library
 * call of longjmp & co, hooked, jumps away): its hook counts as returned. */
static inline void ftr_ret_release(uintptr_t slot)
{
    if (!ftr_hooked_word(*(volatile uintptr_t *)slot)) return;
    struct ftr_retaddr *e = ftr_ret_lookup(slot, NULL);
    if (e) ftr_ret_returned(e);
}

/* The real return address of the frame whose slot holds our trampoline (0: never hooked);
 * hint as for ftr_ret_put(), or NULL. */
static inline uintptr_t ftr_ret_get_hinted(uintptr_t slot, struct ftr_retaddr *hint)
{
    const struct ftr_retaddr *e = ftr_ret_hinted(hint, slot);
    if (!e) e = ftr_ret_entry(slot, 0);
    return e ? FTR_RET_ADDR(atomic_load_explicit(&e->ret, memory_order_relaxed)) : 0;
}
static inline uintptr_t ftr_ret_get(uintptr_t slot)
{
    return ftr_ret_get_hinted(slot, NULL);
}

void ftr_retaddr_init(void) FTR_HIDDEN; /* constructor, before any site is patched */

#endif /* FTR_RETADDR_H */
