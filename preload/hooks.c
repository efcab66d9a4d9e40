/*
 * hooks.c - the tracing hot path: what runs at every traced function's entry and exit.
 *
 * Compiled with -mgeneral-regs-only (see preload/CMakeLists.txt): the trampolines save only
 * general registers, so this file must never touch vector or x87 state, and never calls libc
 * directly; the rare slow paths go through ftr_call_saving().
 *
 * No locks, no syscalls, no allocation, no formatting. Reentrancy: a signal handler may run
 * traced functions while this thread is anywhere inside these hooks. Every update is therefore
 * made so that a complete nested run of the hooks (which restores top) leaves it valid:
 *  - a record slot is reserved with one non-locked xadd (atomic against same-thread signals)
 *    before it is filled, and its head is stored last (a zero head = slot still unfilled);
 *  - a shadow entry is filled before top moves over it, and top is read once.
 */
#include "tracer.h"

/* Reserve one record: a single instruction, so a signal sees either before or after. */
static inline struct ftr_rec *reserve(struct ftr_tls *t)
{
    struct ftr_rec *r = (struct ftr_rec *)sizeof(struct ftr_rec);
    __asm__ volatile("xaddq %0, %1" : "+r"(r), "+m"(t->pos) : : "memory");
    return r;
}

static void record(struct ftr_tls *t, uint32_t head, uint64_t tsc)
{
    struct ftr_rec *r = reserve(t);
    if (unlikely(r >= t->end)) {
        /* Chunk full (or being replaced by a nested slow path): hand it off and retry once. */
        if (t->in_slow) {
            t->lost++;
            return;
        }
        ftr_call_saving(ftr_chunk_full_slow, NULL);
        r = reserve(t);
        if (unlikely(r >= t->end)) {
            t->lost++;
            return;
        }
    }
    r->tsc = tsc;
    r->arg = 0;
    __atomic_store_n(&r->head, head, __ATOMIC_RELEASE); /* the writer may read it now */
}

/* Frames whose hooked slot lies below sp (or at it, when inclusive) are dead: the stack was
 * unwound past them (longjmp, exception, thread cancellation). Close them, innermost first,
 * "now", and return the new top. */
static struct ftr_shadow *unwind_to(struct ftr_tls *t, struct ftr_shadow *top, uintptr_t sp,
                                    int inclusive, uint64_t tsc, int rec)
{
    while (top > t->shadow_base && (top[-1].slot < sp || (inclusive && top[-1].slot == sp))) {
        top--;
        if (rec)
            record(t, ftr_rec_head(top->site, FTR_EV_UNWIND), tsc);
    }
    return top;
}

void ftr_hook_entry(uint32_t site, uintptr_t *slot)
{
    struct ftr_tls *t = &ftr_tls;

    if (unlikely(t->state != FTR_T_ACTIVE)) {
        if (t->state != FTR_T_NEW || t->in_slow)
            return;
        ftr_call_saving(ftr_thread_init_slow, NULL);
        if (t->state != FTR_T_ACTIVE)
            return;
    }
    uint64_t tsc = ftr_rdtsc();
    int rec = atomic_load_explicit(&ftr_g.recording, memory_order_relaxed);
    uintptr_t s = (uintptr_t)slot, ret = *slot;

    struct ftr_shadow *top = t->top;
    if (unlikely(top > t->shadow_base && top[-1].slot <= s)) {
        /* Same slot, already hooked: a tail call (f jumped to g, g returns for both); both
         * entries stay and are closed together. Otherwise the frames there are dead. */
        int tail_call = top[-1].slot == s && ret == (uintptr_t)ftr_tramp_return;
        top = unwind_to(t, top, s, !tail_call, tsc, rec);
    }
    if (unlikely(top >= t->shadow_end)) {
        t->overruns++; /* like the kernel's trace_overrun: the call runs unhooked */
        t->top = top;
        return;
    }
    top->ret = ret;
    top->slot = s;
    top->site = site;
    t->top = top + 1;
    *slot = (uintptr_t)ftr_tramp_return;
    if (likely(rec))
        record(t, ftr_rec_head(site, FTR_EV_ENTRY), tsc);
}

uintptr_t ftr_hook_exit(uintptr_t sp)
{
    struct ftr_tls *t = &ftr_tls;
    uintptr_t slot = sp - sizeof(uintptr_t);
    uint64_t tsc = ftr_rdtsc();
    int rec = t->state == FTR_T_ACTIVE &&
              atomic_load_explicit(&ftr_g.recording, memory_order_relaxed);

    /* Entries below ours belong to frames skipped by a non-local exit. */
    struct ftr_shadow *top = unwind_to(t, t->top, slot, 0, tsc, rec);
    if (unlikely(top <= t->shadow_base || top[-1].slot != slot)) {
        /* Our return trampoline ran without an entry for it: the shadow stack is lost.
         * There is no address to return to; stop loudly rather than jump into nowhere. */
        static const char msg[] = "ftrace-run: fatal: shadow stack out of sync\n";
        __asm__ volatile("syscall" : : "a"(1), "D"(2), "S"(msg), "d"(sizeof msg - 1)
                         : "rcx", "r11", "memory");
        __builtin_trap();
    }
    /* Every entry of this slot returns now: the function and those it tail-called. The
     * bottom one holds the real return address. */
    uintptr_t ret;
    do {
        top--;
        ret = top->ret;
        if (likely(rec))
            record(t, ftr_rec_head(top->site, FTR_EV_EXIT), tsc);
    } while (top > t->shadow_base && top[-1].slot == slot);
    t->top = top;
    return ret;
}
