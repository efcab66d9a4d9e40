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
 *  - a shadow entry is reserved first (top moves over it), filled, and its slot stored last;
 *    a free or half-filled entry has slot 0, which every scan skips, and pops clear it.
 */
#include "ftr_values.h"
#include "handlers.h"
#include "park.h"
#include "retaddr.h"
#include "sigguard.h"
#include "shadow.h"
#include "stacks.h"
#include "tracer.h"
#include "values.h"

__attribute__((noinline, cold)) struct ftr_rec *ftr_reserve_slow(struct ftr_tls *t, size_t n)
{
    if (!t->in_slow) {
        t->slow_sp = (uintptr_t)__builtin_frame_address(0);
        ftr_call_saving(ftr_chunk_full_slow, NULL);
        t->slow_sp = 0;
        struct ftr_rec *r = reserve_n(t, n);
        if (fits(t, r, n)) return r;
    }
    t->lost++;
    return NULL;
}

__attribute__((noinline, cold)) int ftr_record_slow(struct ftr_tls *t, uint32_t head, uint64_t tsc,
                                                    uint32_t arg)
{
    struct ftr_rec *r = ftr_reserve_slow(t, 1);
    if (r) fill(t, r, head, tsc, arg);
    SIGNAL_FENCE();
    t->filling--;
    return r != NULL;
}

/* A value list (values.h) of site: one VALUES record and its payload slots (12 bytes of the
 * list each, head left 0), reserved together; the payload is written first and the VALUES head
 * last, so that the writer, which stops at the first unfilled slot, takes a list whole. A list
 * cut short by a jump out of a signal handler leaves only unfilled slots (skipped).
 * t->inflight is left alone: it tells whether the ENTRY or EXIT beside the list was written. */
static __attribute__((noinline)) void record_values(struct ftr_tls *t, uint32_t site,
                                                    const uint8_t *buf, size_t nbytes, uint64_t tsc)
{
    size_t ns = nbytes / FTR_VALUES_SLOT_BYTES;
    if (!ns) return;
    t->filling++;
    SIGNAL_FENCE();
    struct ftr_rec *r = reserve_n(t, 1 + ns);
    if (unlikely(!fits(t, r, 1 + ns)) && !(r = ftr_reserve_slow(t, 1 + ns))) goto out;
    for (size_t i = 0; i < ns; i++) {
        struct ftr_rec *w = &r[1 + i];
        const uint8_t *b = buf + FTR_VALUES_SLOT_BYTES * i;
        __atomic_store_n(&w->tsc, ftr_rd_le64(b), __ATOMIC_RELAXED);
        __atomic_store_n(&w->arg, ftr_rd_le32(b + 8), __ATOMIC_RELAXED);
    }
    __atomic_store_n(&r->tsc, tsc, __ATOMIC_RELAXED);
    __atomic_store_n(&r->arg, ftr_values_arg(site, (uint32_t)ns), __ATOMIC_RELAXED);
    __atomic_store_n(&r->head, ftr_rec_head(FTR_SP_VALUES, FTR_EV_SPECIAL), __ATOMIC_RELEASE);
out:
    SIGNAL_FENCE();
    t->filling--;
}

static __attribute__((noinline)) void record_args(struct ftr_tls *t, uint32_t site,
                                                  const uintptr_t *regs, const uintptr_t *slot,
                                                  uint64_t tsc)
{
    unsigned idx = __atomic_load_n(&ftr_site_prog[site], __ATOMIC_ACQUIRE);
    if (!idx) return;
    uint8_t buf[FTR_VALUES_MAX_BYTES] __attribute__((aligned(4)));
    record_values(t, site, buf, ftr_capture_args(&ftr_valprogs[idx], regs, slot, buf), tsc);
}

/* Entry e returns: its return value first (its EXIT follows), if it records one */
static inline void record_ret(struct ftr_tls *t, const struct ftr_shadow *e, const uintptr_t *ret,
                              uint64_t tsc)
{
    if (likely(!(e->flags & FTR_SH_RETVAL)) || !(e->flags & FTR_SH_RECORDED) || !ret) return;
    unsigned idx = __atomic_load_n(&ftr_site_prog[e->site], __ATOMIC_ACQUIRE);
    if (!idx || !ftr_valprogs[idx].has_ret) return;
    uint8_t buf[24 + FTR_VALUES_STR_MAX] __attribute__((aligned(4)));
    record_values(t, e->site, buf, ftr_capture_ret(&ftr_valprogs[idx], ret, buf), tsc);
}

void ftr_record_special(unsigned subtype, uint32_t arg)
{
    record_arg(&ftr_tls, ftr_rec_head(subtype, FTR_EV_SPECIAL), ftr_rdtsc(), arg);
}

/* Closes entry e as unwound and empties it, under the marks a jump that abandons this (from a
 * signal handler) reads: its UNWIND is written or not, never twice. gone: the frame is known to
 * be gone (a jump or a catch left it), and its hook's book entry counts it returned; a frame a
 * hook only finds below the stack pointer may live on in a copy (copied stacks: retaddr.h). */
static inline void close_one(struct ftr_tls *t, struct ftr_shadow *e, uint64_t tsc, int gone)
{
    if (gone) ftr_ret_gone(e);
    struct ftr_shadow *outer = t->exiting;
    t->inflight = NULL; /* first: see exit_hook */
    SIGNAL_FENCE();
    t->exiting = e;
    SIGNAL_FENCE();
    retire(t, e, FTR_EV_UNWIND, tsc);
    e->slot = 0;
    SIGNAL_FENCE();
    t->exiting = outer;
}

/* The writer's claim on chunk c covers r, whose head was just cleared (it copied the ENTRY
 * before): the head goes back. @return 1 if so, 0 if r is taken back. */
static inline int writer_has(struct ftr_chunk *c, struct ftr_rec *r, uint32_t head)
{
    if (__atomic_load_n(&c->flushed, __ATOMIC_SEQ_CST) <= (size_t)(r - c->rec)) return 0;
    __atomic_store_n(&r->head, head, __ATOMIC_SEQ_CST);
    return 1;
}

/* --threshold: a call shorter than the threshold whose entry record is still the last one in
 * the chunk (so it has no recorded children) is taken back instead of closed. The writer
 * leaves records younger than twice the threshold alone (writer.c), so it rarely has the
 * entry; for when it does (this thread was stopped between its clock read and here), the two
 * sides settle it like Dekker's protocol: the thread clears the head, then reads the writer's
 * claim (c->flushed); the writer raises its claim, then reads the heads again. At least one
 * sees the other: the thread keeps the entry (and records the exit) or the writer leaves it.
 *
 * A signal handler may jump out of this for good at any instruction: e's marks and t->rw_rec
 * tell settle_abandoned() how far it came (rewind_decide() finishes the decision for it). */
static inline int rewind_short(struct ftr_tls *t, struct ftr_shadow *e, uint64_t tsc)
{
    if (!(e->flags & FTR_SH_RECORDED) || tsc - e->tsc >= ftr_hot.threshold_ticks ||
        e->tsc < ftr_hot.threshold_from)
        return 0;
    /* Raised until the decision: a signal handler that fills the chunk meanwhile holds it back
     * (threads.c) instead of handing it to the writer, which takes a full chunk whole and
     * would write the entry; nor may the chunk be recycled while it is looked at. */
    t->filling++;
    SIGNAL_FENCE();
    struct ftr_rec *last = t->pos - 1;
    struct ftr_chunk *c = t->thr->cur;
    uint32_t head = ftr_rec_head(e->site, FTR_EV_ENTRY);
    if (!c || t->pos > t->end || last < c->rec || last >= c->rec + c->nrec || last->head != head ||
        last->tsc != e->tsc) {
        SIGNAL_FENCE();
        t->filling--;
        return 0;
    }
    /* a handler's own exits, nested in here, save and restore these around theirs */
    struct ftr_rec *outer_rec = t->rw_rec;
    struct ftr_chunk *outer_chunk = t->rw_chunk;
    t->rw_rec = last;
    t->rw_chunk = c;
    SIGNAL_FENCE();
    e->flags |= FTR_SH_REWINDING;
    SIGNAL_FENCE();
    __atomic_exchange_n(&last->head, 0, __ATOMIC_SEQ_CST);
    int kept = writer_has(c, last, head);
    if (kept) {
        SIGNAL_FENCE();
        e->flags &= ~FTR_SH_REWINDING;
    } else {
        e->flags |= FTR_SH_TAKEN_BACK;
    }
    SIGNAL_FENCE();
    t->filling--;
    t->rw_rec = outer_rec;
    t->rw_chunk = outer_chunk;
    if (kept) return 0;
    /* Dropping the head dropped the entry; giving the slot back must not undo records a signal
     * handler added meanwhile: one non-locked cmpxchg, atomic against this thread's signals. */
    struct ftr_rec *expect = last + 1;
    __asm__ volatile("cmpxchgq %2, %1" : "+a"(expect), "+m"(t->pos) : "r"(last) : "memory", "cc");
    t->rec_depth--;
    graph_count(t, e, -1);
    return 1;
}

/* A jump left rewind_short() for good, after it marked e REWINDING and before it decided:
 * decides as it would have, with a fresh read of the writer's claim (any answer agrees with the
 * writer, which checks the heads again after raising its claim). The slot of an entry taken back
 * here stays a hole (the writer skips it). @return whether e's ENTRY stays recorded. */
static int rewind_decide(struct ftr_tls *t, const struct ftr_shadow *e)
{
    struct ftr_rec *r = t->rw_rec;
    struct ftr_chunk *c = t->rw_chunk;
    if (!r || !c) return 1;
    if (__atomic_load_n(&r->head, __ATOMIC_SEQ_CST) != 0) return 1; /* not cleared, or put back */
    return writer_has(c, r, ftr_rec_head(e->site, FTR_EV_ENTRY));
}

/* Closes, innermost first, the entries at the top whose hooked slot lies on this stack below
 * sp (or at it, when inclusive): frames unwound without returning (longjmp, exception,
 * cancellation). Stops at the first entry of another stack. @return the new top. */
static struct ftr_shadow *close_dead(struct ftr_tls *t, struct ftr_shadow *top, uintptr_t sp,
                                     int inclusive, uint64_t tsc, int gone)
{
    uint32_t cls = ftr_stack_class(t, sp);
    if (cls == FTR_STACK_UNKNOWN) return top;
    while (top > t->shadow_base && same_stack(t, top[-1].slot, cls) &&
           (top[-1].slot < sp || (inclusive && top[-1].slot == sp))) {
        top--;
        close_one(t, top, tsc, gone);
    }
    return top;
}

/* What an entry did: nothing (the call runs unseen), hooked its return, or (call-through) made
 * an entry whose exit the through trampoline reports. */
enum { ENTRY_NONE, ENTRY_HOOKED, ENTRY_THROUGH };

/* Call-through adds 16 bytes to every traced frame. It is used while the frame lies in the top
 * 32nd of the thread's own stack (256 KiB of the usual 8 MiB): a program that recurses deeper
 * gets the return hook, which adds nothing, so that a program which fits its stack untraced (up
 * to 63/64 of it full with the smallest frames, 16 bytes) fits traced. Not on another stack (a
 * sigaltstack's or a coroutine's size is the program's own choice), also one the program made
 * inside the thread's own (an array in main's frame), unless the thread's bounds are unknown. */
/* Is s on a stack other than this thread's own (its bounds known)? For ftr_ret_put(). */
static __attribute__((noinline, cold)) int not_own_stack(uintptr_t s)
{
    const struct ftr_tls *t = &ftr_tls;
    return t->stack_lo && (s < t->stack_lo || s >= t->stack_hi);
}

static inline int room_for_through(const struct ftr_tls *t, uintptr_t s)
{
    if (!t->stack_lo) return 1;
    if (s >= t->stack_hi || s < t->stack_lo || t->stack_hi - s >= (t->stack_hi - t->stack_lo) / 32)
        return 0;
    return likely(!atomic_load_explicit(&ftr_stack_any_inside, memory_order_relaxed)) ||
           ftr_stack_class(t, s) == FTR_STACK_OWN;
}

/* The slow-path area that ftr_tramp_sigret runs a handler's exit hook on is there (mapped by
 * a first slow path if not). @return 0: none (no memory, or inside a slow path): the handler's
 * return is hooked as any other. */
static __attribute__((noinline, cold)) int sig_area_map(struct ftr_tls *t)
{
    if (!t->in_slow && !ftr_slow_busy) {
        t->slow_sp = (uintptr_t)__builtin_frame_address(0);
        ftr_call_saving(ftr_slow_nothing, NULL);
        t->slow_sp = 0;
    }
    return ftr_slow_area != NULL;
}
static inline int sig_area(struct ftr_tls *t)
{
    return likely(ftr_slow_area != NULL) || sig_area_map(t);
}

_Atomic uint64_t ftr_switch_missed;

/* A call in a signal handler that landed while a coroutine switch moves this thread's shadow
 * entries (FTR_T_SWITCHING): it runs untraced, and is counted as such. */
static __attribute__((noinline, cold)) int switch_missed(struct ftr_tls *t)
{
    if (atomic_load_explicit(&ftr_hot.recording, memory_order_relaxed)) {
        t->overruns++;
        atomic_fetch_add_explicit(&ftr_switch_missed, 1, memory_order_relaxed);
    }
    return ENTRY_NONE;
}

static HOT_INLINE int entry(struct ftr_tls *t, uint32_t site, uintptr_t *slot,
                            const uintptr_t *regs, int through, uintptr_t outer_hook)
{
    if (unlikely(t->state != FTR_T_ACTIVE)) {
        if (t->state == FTR_T_SWITCHING) return switch_missed(t);
        if (t->state != FTR_T_NEW || t->in_slow) return ENTRY_NONE;
        t->slow_sp = (uintptr_t)slot;
        ftr_call_saving(ftr_thread_init_slow, NULL);
        t->slow_sp = 0;
        if (t->state != FTR_T_ACTIVE) return ENTRY_NONE;
    }
    uint64_t tsc = ftr_rdtsc();
    uintptr_t s = (uintptr_t)slot, ret = *slot;

    struct ftr_shadow *top = t->top;
    if (unlikely(top > t->shadow_base && top[-1].slot <= s)) {
        /* Same slot, already hooked: a tail call (f jumped to g, g returns for both); both
         * entries stay and are closed together. Otherwise the frames there are dead. */
        int tail_call = top[-1].slot == s && ftr_hooked_word(ret);
        /* a signal handler's tail call returns through the handler's trampoline, never
         * called through: its return is the handler's (handlers.h) */
        if (tail_call && ret == (uintptr_t)ftr_tramp_sigret) through = 0;
        top = t->top = close_dead(t, top, s, !tail_call, tsc, 0);
    }

    /* Should this call be seen? The graph knobs decide; a call that is not seen and needs no
     * bookkeeping is not hooked at all. */
    uint32_t flags = 0;
    unsigned sf = 0;
    if (unlikely(ftr_hot.site_flags_used)) {
        sf = site < FTR_SITE_FLAGS_MAX ? ftr_site_flags[site] : 0;
        if (t->notrace_open) return ENTRY_NONE; /* inside a hidden subtree */
        if (sf & FTR_SF_NOTRACE) flags |= FTR_SH_NOTRACE;
        if (sf & FTR_SF_TRIGGER)
            flags |= FTR_SH_TRIGGER;
        else if (ftr_hot.graph_mode && !t->graph_open)
            return ENTRY_NONE; /* outside every --graph-function tree */
    }
    int rec = !(flags & FTR_SH_NOTRACE) &&
              atomic_load_explicit(&ftr_hot.recording, memory_order_relaxed) &&
              (!ftr_hot.max_depth || t->rec_depth < ftr_hot.max_depth);
    if (!rec && !flags) return ENTRY_NONE; /* nothing to record or count: return left alone */

    if (unlikely(top >= t->shadow_end)) {
        t->overruns++; /* like the kernel's trace_overrun: the call runs unhooked */
        return ENTRY_NONE;
    }
    /* A signal handler's return (to the restorer) is hooked with ftr_tramp_sigret, which runs
     * the exit hook off its stack (tramp_x86_64.S): not called through, whose exit runs below. */
    uintptr_t tramp = (uintptr_t)ftr_tramp_return;
    if (unlikely(ret == ftr_hot.sig_restorer) && sig_area(t)) {
        tramp = (uintptr_t)ftr_tramp_sigret;
        through = 0;
    }
    through = through && room_for_through(t, s);
    /* A hooked return finds its real address in the book by its slot (retaddr.h), never in a
     * shadow stack; a tail call's slot (already ours) keeps the address its first hook put, and
     * gets no book entry. */
    struct ftr_retaddr *book = NULL;
    if (!through && likely(!ftr_hooked_word(ret)) &&
        unlikely(!(book = ftr_ret_put(s, ret, top->book, not_own_stack)))) {
        t->overruns++; /* no room in the book, or a suspended frame's slot: runs unhooked */
        return ENTRY_NONE;
    }
    /* Reserved first, marked as being built after: a signal handler whose jump abandons this
     * hook between the two leaves an empty entry (slot 0: dropped with the frames left). The
     * other order would mark the entry a handler's own hooks are about to take: that one's
     * RECORDED mark would be cleared with its ENTRY written (its UNWIND then missing). */
    t->top = top + 1; /* a signal handler from here on pushes above it */
    SIGNAL_FENCE();
    t->inflight = NULL; /* first: see exit_hook */
    SIGNAL_FENCE();
    t->building = top;
    SIGNAL_FENCE();
    top->ret = ret;
    top->site = site;
    top->flags = flags | (rec ? FTR_SH_RECORDED : 0) | (through ? FTR_SH_THROUGH : 0) |
                 (sf & FTR_SF_RETVAL ? FTR_SH_RETVAL : 0);
    top->tsc = tsc;
    top->book = book;
    SIGNAL_FENCE();
    top->slot = s; /* complete */
    SIGNAL_FENCE();
    if (book) *slot = tramp;
    if (unlikely(tramp == (uintptr_t)ftr_tramp_sigret))
        ftr_handler_entered(t, s, outer_hook || t->in_slow);
    graph_count(t, top, 1);
    if (likely(rec)) {
        t->rec_depth++;
        if (unlikely(!record(t, ftr_rec_head(site, FTR_EV_ENTRY), tsc))) {
            /* the ENTRY was lost (counted): its end is not recorded either (counted too) */
            top->flags &= ~FTR_SH_RECORDED;
            t->lost++;
            t->lost_calls++;
            t->rec_depth--;
        } else if (unlikely(sf & FTR_SF_ARGS)) {
            /* The entry is whole and its ENTRY written: a jump out of a signal handler that
             * interrupts the capture closes it like any other frame, without asking whether
             * its ENTRY was written (the slot t->inflight names may be in a chunk the list's
             * chunk switch gave to the writer, and the writer back to the pool). */
            t->building = NULL;
            SIGNAL_FENCE();
            record_args(t, site, regs, slot, tsc);
        }
    }
    return through ? ENTRY_THROUGH : ENTRY_HOOKED;
}

/* The markers tell a jump out of a signal handler that it abandons a hook it interrupted
 * (ftr_close_frames_below): a nested run (the handler's own hooks) puts the outer's back. */
struct marks {
    uintptr_t hook_sp;
    struct ftr_shadow *building, *exiting;
    struct ftr_rec *inflight;
};
static int settle_abandoned(struct ftr_tls *t, uintptr_t sp, uintptr_t here);

/* A hook that runs above the stack address of a hook still marked as running, on the same
 * stack, runs in a frame that hook's is gone from: it was left for good (an asynchronous
 * cancellation unwound it, and this runs in a cleanup handler). "Above" has 8 bytes of slack:
 * an entry hook is marked at its slot and an exit hook at its slot + 8, and a cleanup handler
 * called from the same frame has its slot at that very slot; a hook nested in a signal handler
 * runs hundreds of bytes below (the signal frame lies between). */
#define LEFT_SLACK 8u
static inline int left_above(uintptr_t sp, uintptr_t hook_sp)
{
    return sp + LEFT_SLACK >= hook_sp;
}
static __attribute__((noinline)) void left_behind(struct ftr_tls *t, uintptr_t sp)
{
    /* The stacks of the words below the marks: an exit hook's mark is its slot + 8, which may
     * be the first byte of an array at the bottom of the caller's frame, a sigaltstack (its
     * SIGSEGV handler's hooks, at the top of that array, settled an exit hook the SIGALRM
     * handler of the program had interrupted: handler-altjmp built by clang) */
    if (ftr_stack_class(t, sp - 8) == ftr_stack_class(t, t->hook_sp - 8))
        settle_abandoned(t, sp, t->hook_sp);
}

static inline struct marks marks_enter(struct ftr_tls *t, uintptr_t sp)
{
    if (unlikely(t->hook_sp) && left_above(sp, t->hook_sp)) left_behind(t, sp);
    struct marks m = {t->hook_sp, t->building, t->exiting, t->inflight};
    t->building = t->exiting = NULL;
    SIGNAL_FENCE();
    t->hook_sp = sp;
    SIGNAL_FENCE();
    return m;
}
/* No hook marked running any more (the ones marked were left for good). */
static inline void marks_clear(struct ftr_tls *t)
{
    t->building = t->exiting = NULL;
    t->inflight = NULL;
    t->hook_sp = 0;
}
static inline void marks_leave(struct ftr_tls *t, const struct marks *m)
{
    SIGNAL_FENCE();
    t->hook_sp = m->hook_sp;
    SIGNAL_FENCE();
    t->building = m->building;
    t->exiting = m->exiting;
    t->inflight = m->inflight;
}

void ftr_hook_entry(uint32_t site, uintptr_t *slot, const uintptr_t *regs)
{
    struct ftr_tls *t = &ftr_tls;
    if (aside(slot)) return;
    struct marks m = marks_enter(t, (uintptr_t)slot);
    entry(t, site, slot, regs, 0, m.hook_sp);
    marks_leave(t, &m);
}

struct ftr_through ftr_hook_through_entry(uint32_t site, uintptr_t *slot, const uintptr_t *regs)
{
    struct ftr_tls *t = &ftr_tls;
    if (aside(slot)) return (struct ftr_through){ftr_site_body[site], 0};
    struct marks m = marks_enter(t, (uintptr_t)slot);
    int how = entry(t, site, slot, regs, 1, m.hook_sp);
    marks_leave(t, &m);
    return (struct ftr_through){ftr_site_body[site], how == ENTRY_THROUGH};
}

uintptr_t ftr_hook_libcall(uint32_t site, uintptr_t *slot, const uintptr_t *regs)
{
    struct ftr_tls *t = &ftr_tls;
    if (aside(slot)) return ftr_site_body[site];
    struct marks m = marks_enter(t, (uintptr_t)slot);
    entry(t, site, slot, regs, 0, m.hook_sp);
    marks_leave(t, &m);
    return ftr_site_body[site];
}

static __attribute__((noreturn)) void lost_return(void)
{
    /* Our return trampoline ran with no entry for it anywhere: there is no address to return
     * to; stop loudly rather than jump into nowhere. */
    static const char msg[] = "ftrace-run: fatal: return address of a traced call lost\n";
    say_raw(msg, sizeof msg - 1);
    __builtin_trap();
}

/* The entries of slot from e down that return now: the function and those it tail-called
 * (made while the slot was ours already, they hold our trampoline as their address); the
 * lowest holds the real one. */
static inline struct ftr_shadow *group_bottom(const struct ftr_tls *t, struct ftr_shadow *e,
                                              uintptr_t slot)
{
    while (e > t->shadow_base && e[-1].slot == slot && ftr_hooked_word(e->ret))
        e--;
    return e;
}

/* The return's frame is not at the top of the shadow stack: entries above it are frames that
 * were skipped (dead, closed as unwound) or live on another stack (kept); or it is not on this
 * thread's shadow stack at all (a frame closed too early, or entered on another thread by a
 * coroutine that moved here): then nothing is recorded. Where it returns to is decided already
 * (ret, from the book or the slot): the shadow stack only decides what the trace says. An
 * entry of this slot with another address is a frame that was here before (left by a longjmp,
 * or gone with a coroutine that moved): it is not this one. */
static __attribute__((noinline)) uintptr_t
exit_slow(struct ftr_tls *t, uintptr_t slot, uintptr_t ret, uint64_t tsc, const uintptr_t *rv)
{
    struct ftr_shadow *base = t->shadow_base, *top = t->top, *m = top, *lo = NULL;
    if (!base || top < base) return ret;
    while (m > base) {
        if (m[-1].slot != slot) {
            m--;
            continue;
        }
        lo = group_bottom(t, m - 1, slot);
        if (lo->ret == ret) break;
        m = lo;
        lo = NULL;
    }
    if (!lo) return ret;
    /* m[-1] matches. Above it, innermost first: close this stack's dead frames; keep other
     * stacks' entries (a coroutine suspended inside this call, which its stack may resume),
     * but end them in the recorded stream, where they nest inside the returning call. */
    uint32_t cls = ftr_stack_class(t, slot);
    for (struct ftr_shadow *e = top - 1; e >= m; e--) {
        if (e->slot < slot && same_stack(t, e->slot, cls)) {
            retire(t, e, FTR_EV_UNWIND, tsc);
            e->flags |= FTR_SH_GONE;
        } else {
            if (e->flags & FTR_SH_RECORDED) {
                t->rec_depth--;
                record_arg(t, ftr_rec_head(FTR_SP_SUSPENDED, FTR_EV_SPECIAL), tsc, 1);
                record(t, ftr_rec_head(e->site, FTR_EV_UNWIND), tsc);
                /* its return, if it comes, is not recorded, unless its stack is resumed first */
                e->flags = (e->flags & ~FTR_SH_RECORDED) | FTR_SH_SUSPENDED;
            }
            graph_count(t, e, -1);
            e->flags |= FTR_SH_UNCOUNTED;
        }
    }
    struct ftr_shadow *keep = m;
    for (struct ftr_shadow *e = m; e < top; e++)
        if (!(e->flags & FTR_SH_GONE)) *keep++ = *e;
    size_t kept = (size_t)(keep - m);
    /* The returning frame and those it tail-called. */
    *(volatile uintptr_t *)slot = ret;
    SIGNAL_FENCE();
    for (struct ftr_shadow *e = m - 1; e >= lo; e--) {
        record_ret(t, e, rv, tsc);
        retire(t, e, FTR_EV_EXIT, tsc);
    }
    for (size_t i = 0; i < kept; i++)
        lo[i] = m[i];
    for (struct ftr_shadow *e = lo + kept; e < top; e++)
        e->slot = 0;
    SIGNAL_FENCE();
    t->top = lo + kept;
    return ret;
}

/* Where the frame of slot, returning now, goes: the book's address when the slot holds our
 * trampoline (a hooked return, or a hooked function that tail-called a called-through one;
 * hint: the book entry a shadow entry kept, or NULL), and the entry counts one hook fewer not
 * yet returned; else the slot's. 0: none. */
static inline uintptr_t take_return(uintptr_t slot, struct ftr_retaddr *hint)
{
    uintptr_t ret = *(volatile uintptr_t *)slot;
    if (!ftr_hooked_word(ret)) return ret;
    struct ftr_retaddr *e = ftr_ret_lookup(slot, hint);
    return e ? ftr_ret_returned(e) : 0;
}

static HOT_INLINE uintptr_t exit_hook(struct ftr_tls *t, uintptr_t sp, const uintptr_t *rv)
{
    uintptr_t slot = sp - sizeof(uintptr_t);
    uint64_t tsc = ftr_rdtsc();
    /* The group of entries of this slot at the top returns now: the function and those it
     * tail-called. Where it returns is the slot's own address, or where the slot holds our
     * trampoline, the book's (the lowest entry kept its book entry when it hooked the slot: no
     * lookup). The group is this frame's when its address agrees (else it is a frame that was
     * here before: the slow path). */
    struct ftr_shadow *top = t->top, *lo = NULL;
    uintptr_t ret;
    if (likely(top > t->shadow_base && top[-1].slot == slot)) {
        lo = group_bottom(t, top - 1, slot);
        ret = take_return(slot, lo->book);
        if (unlikely(lo->ret != ret)) lo = NULL;
    } else {
        ret = take_return(slot, NULL);
    }
    if (unlikely(!lo)) {
        if (!ret) lost_return();
        return exit_slow(t, slot, ret, tsc, rv);
    }
    /* The real address goes back into the slot (now part of the return trampoline's frame)
     * first, for an unwinder that runs from a signal handler landing below. */
    *(volatile uintptr_t *)slot = ret;
    SIGNAL_FENCE();
    do {
        top--;
        /* inflight is cleared first: a jump that found the entry marked with the record
         * written before still named (hooks.c's previous record) would take its EXIT for
         * written, and drop its UNWIND too (hostile-jmpfill-mono: 1 run in 10) */
        t->inflight = NULL;
        SIGNAL_FENCE();
        t->exiting = top;
        SIGNAL_FENCE();
        if (!(unlikely(ftr_hot.threshold_ticks) && rewind_short(t, top, tsc))) {
            if (unlikely(top->flags & FTR_SH_RETVAL)) record_ret(t, top, rv, tsc);
            retire(t, top, FTR_EV_EXIT, tsc);
        }
        top->slot = 0;
        SIGNAL_FENCE();
    } while (top > lo);
    t->exiting = NULL;
    SIGNAL_FENCE();
    t->top = top;
    return ret;
}

/* A hooked frame returns where this thread's entries no longer tell its frames (in a signal
 * handler that interrupted a switch and switched stacks by hand; or a handler's return after a
 * switch under a hook it interrupted): the book gives the address, the entries are not
 * touched, and the thread steps aside (step_aside: switch.c's reason). */
static __attribute__((noinline, cold)) uintptr_t aside_exit(struct ftr_tls *t, uintptr_t sp,
                                                            void (*step_aside)(struct ftr_tls *))
{
    uintptr_t slot = sp - sizeof(uintptr_t), ret = take_return(slot, NULL);
    if (!ret) lost_return();
    *(volatile uintptr_t *)slot = ret;
    SIGNAL_FENCE();
    step_aside(t);
    return ret;
}

uintptr_t ftr_hook_exit(uintptr_t sp, const uintptr_t *rv)
{
    struct ftr_tls *t = &ftr_tls;
    if (unlikely(t->state == FTR_T_SWITCHING)) return aside_exit(t, sp, ftr_switch_spoiled);
    struct marks m = marks_enter(t, sp);
    uintptr_t ret = exit_hook(t, sp, rv);
    marks_leave(t, &m);
    return ret;
}

/* A traced signal handler's return (ftr_tramp_sigret): where the program switched stacks under
 * a hook a handler interrupted (handlers.h), the thread steps aside first. */
uintptr_t ftr_hook_sigexit(uintptr_t sp, const uintptr_t *rv)
{
    struct ftr_tls *t = &ftr_tls;
    if (likely(ftr_handler_returns(t, sp - sizeof(uintptr_t)))) return ftr_hook_exit(sp, rv);
    return aside_exit(t, sp, ftr_handler_switched);
}

/* The body of a called-through function returned: its slot still holds the real return
 * address (a hooked function that tail-called it shares the slot: both close, and the slot gets
 * that one's real address, as at its own return). A thread that stepped aside or ended records
 * nothing more. */
void ftr_hook_through_exit(uintptr_t *slot, const uintptr_t *rv)
{
    struct ftr_tls *t = &ftr_tls;
    if (unlikely(t->state != FTR_T_ACTIVE)) return;
    uintptr_t sp = (uintptr_t)slot + sizeof(uintptr_t);
    struct marks m = marks_enter(t, sp);
    exit_hook(t, sp, rv);
    marks_leave(t, &m);
}

/* The record the abandoned hook reserved last was written: fill() said so, or, interrupted
 * inside it (its chunk held back: still readable), the head is there. */
static int inflight_written(const struct ftr_tls *t)
{
    if (t->inflight == INFLIGHT_WRITTEN) return 1;
    return t->inflight && __atomic_load_n(&t->inflight->head, __ATOMIC_RELAXED) != 0;
}

static void recount(struct ftr_tls *t)
{
    uint32_t rec = 0, graph = 0, notrace = 0;
    for (const struct ftr_shadow *e = t->shadow_base; e < t->top; e++) {
        if (!e->slot) continue;
        rec += !!(e->flags & FTR_SH_RECORDED);
        if (e->flags & FTR_SH_UNCOUNTED) continue;
        graph += !!(e->flags & FTR_SH_TRIGGER);
        notrace += !!(e->flags & FTR_SH_NOTRACE);
    }
    t->rec_depth = rec;
    t->graph_open = graph;
    t->notrace_open = notrace;
}

/* A jump (longjmp & co, from unwind.c) to stack address sp leaves a hook that a signal handler
 * interrupted, for good: what it was doing is settled here. The entry it was building is dropped
 * (not published yet: it is given an address in the frames left, so it closes with them) or
 * keeps its RECORDED mark only if its ENTRY was written; the entry it was popping loses it if
 * its EXIT was; entries an exit or a resynchronisation had emptied come off the top; the
 * counters are recounted from the shadow stack. */
static int settle_abandoned(struct ftr_tls *t, uintptr_t sp, uintptr_t here)
{
    if (!t->hook_sp || !left_above(sp, t->hook_sp)) return 0;
    struct ftr_shadow *b = t->building, *x = t->exiting;
    if (b && t->shadow_base && b >= t->shadow_base && b < t->top) {
        if (!b->slot) {
            b->flags &= ~FTR_SH_RECORDED;
            b->book = NULL;
            b->slot = here;
        } else if ((b->flags & FTR_SH_RECORDED) && !inflight_written(t)) {
            b->flags &= ~FTR_SH_RECORDED; /* its ENTRY never made it: nor will its end */
        }
    }
    if (x && t->shadow_base && x >= t->shadow_base && x < t->top && x->slot) {
        if ((x->flags & FTR_SH_RECORDED) &&
            (inflight_written(t) ||            /* its EXIT is written: no UNWIND after it */
             (x->flags & FTR_SH_TAKEN_BACK) || /* its ENTRY was taken back: nor one of it */
             ((x->flags & FTR_SH_REWINDING) && !rewind_decide(t, x))))
            x->flags &= ~FTR_SH_RECORDED;
        x->flags &= ~(FTR_SH_REWINDING | FTR_SH_TAKEN_BACK);
    }
    marks_clear(t);
    t->rw_rec = NULL;
    t->rw_chunk = NULL;
    t->filling = 0;
    if (t->shadow_base) {
        while (t->top > t->shadow_base && !t->top[-1].slot)
            t->top--;
        recount(t);
    }
    return 1;
}

void ftr_close_frames_below(uintptr_t sp, int inclusive)
{
    struct ftr_tls *t = &ftr_tls;
    if (unlikely(t->slow_sp) && sp > t->slow_sp) {
        /* A signal handler that interrupted our slow path jumps out of it: it never resumes. */
        t->slow_sp = 0;
        t->in_slow = 0;
        ftr_slow_busy = 0;
        if (t->state == FTR_T_OFF && !t->thr) t->state = FTR_T_NEW;
    }
    if (unlikely(t->sig_n)) ftr_handlers_jump(t, sp);
    if (unlikely(t->state == FTR_T_SWITCHING)) {
        /* A signal handler that interrupted a coroutine switch jumps: out of the switch, left
         * half done for good; or within the handler, none of whose calls was traced (a hook of
         * its that a nested handler's jump leaves only marked itself running). */
        if (sp > t->switch_sp) {
            ftr_switch_spoiled(t);
        } else if (t->hook_sp && left_above(sp, t->hook_sp)) {
            marks_clear(t); /* (not t->filling: the switch may be writing a record) */
        }
        return;
    }
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    int abandoned = settle_abandoned(t, sp, here);
    if (!t->shadow_base) return;
    uint64_t tsc = ftr_rdtsc();
    struct ftr_shadow *top = t->top;
    /* A jump off the stack we are on (siglongjmp out of a sigaltstack handler): every frame of
     * this stack at the top of the shadow stack is left for good. */
    uint32_t cls = ftr_stack_class(t, here);
    int off_stack = cls != ftr_stack_class(t, sp);
    for (;;) {
        struct ftr_shadow *was = top;
        while (abandoned && top > t->shadow_base && !top[-1].slot)
            top--;
        while (off_stack && top > t->shadow_base && top[-1].slot &&
               ftr_stack_class(t, top[-1].slot) == cls) {
            top--;
            close_one(t, top, tsc, 1);
        }
        top = close_dead(t, top, sp, inclusive, tsc, 1);
        if (top == was) break;
    }
    t->top = top;
}

void ftr_close_all_frames(void)
{
    struct ftr_tls *t = &ftr_tls;
    /* the thread ends (a cancellation, pthread_exit) maybe from a handler inside a hook */
    settle_abandoned(t, UINTPTR_MAX, (uintptr_t)__builtin_frame_address(0));
    if (!t->shadow_base) return;
    uint64_t tsc = ftr_rdtsc();
    struct ftr_shadow *top = t->top;
    while (top > t->shadow_base) {
        top--;
        if (top->slot) retire(t, top, FTR_EV_UNWIND, tsc);
        top->slot = 0;
    }
    t->top = top;
}

void ftr_reopen_frames(void)
{
    struct ftr_tls *t = &ftr_tls;
    if (!t->shadow_base || !recording(t)) return;
    uint64_t tsc = ftr_rdtsc();
    uint32_t n = 0;
    for (struct ftr_shadow *e = t->shadow_base; e < t->top; e++)
        n += e->slot && (e->flags & FTR_SH_RECORDED);
    if (!n) return;
    record_arg(t, ftr_rec_head(FTR_SP_INHERITED, FTR_EV_SPECIAL), tsc, n); /* not its calls */
    for (struct ftr_shadow *e = t->shadow_base; e < t->top; e++)
        if (e->slot && (e->flags & FTR_SH_RECORDED))
            record(t, ftr_rec_head(e->site, FTR_EV_ENTRY), tsc);
}
