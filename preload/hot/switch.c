/*
 * switch.c - coroutine switches: what the swapcontext/setcontext wrappers (ucontext_x86_64.S)
 * and makecontext tell the shadow stack (shadow.h), and stepping aside when a signal handler
 * switches where that cannot be followed.
 *
 * Compiled with -mgeneral-regs-only, like hooks.c: it records events with the same inlined
 * primitives, and runs in any signal handler. No lock, no allocation but park.c's pool.
 */
#include "park.h"
#include "retaddr.h"
#include "shadow.h"
#include "sigguard.h"
#include "stacks.h"
#include "tracer.h"

/* ---- coroutine switches ----
 * A coroutine runs inside the call of whoever switched to it: what it calls nests there (main
 * -> foo swaps to bar: bar under foo). The thread keeps the chain of stacks resumed one inside
 * another, outermost first: the last one runs. Switching to a stack already in the chain (a
 * coroutine yields back to its resumer) suspends the recorded frames of every stack above it:
 * they leave the stream (SPECIAL SUSPENDED, then an UNWIND each) but stay on the shadow stack.
 * Switching to a stack not in the chain pushes it and resumes its suspended frames: moved to the
 * top of the shadow stack (the stream's order; each stack's own order kept), they enter the
 * stream again (SPECIAL RESUMED, then an ENTRY each) inside the resumer's frames. Switches that
 * bypass the wrappers (a coroutine's function returning to uc_link, hand-written ones) are seen
 * at the next wrapped one; until then exit_slow suspends what a return leaves above itself. */

static inline int block_signals(uint64_t *old)
{
    uint64_t all = ~0ull;
    register long r10 __asm__("r10") = 8; /* the kernel's sigset size */
    long rc;
    __asm__ volatile("syscall"
                     : "=a"(rc)
                     : "a"(14 /* rt_sigprocmask */), "D"(0 /* SIG_BLOCK */), "S"(&all), "d"(old),
                       "r"(r10)
                     : "rcx", "r11", "memory");
    return rc == 0;
}
static inline void restore_signals(const uint64_t *old)
{
    register long r10 __asm__("r10") = 8;
    long rc;
    __asm__ volatile("syscall"
                     : "=a"(rc)
                     : "a"(14), "D"(2 /* SIG_SETMASK */), "S"(old), "d"(0), "r"(r10)
                     : "rcx", "r11", "memory");
    (void)rc;
}

static int in_chain_from(const struct ftr_tls *t, uint32_t from, uintptr_t slot)
{
    for (uint32_t i = from; i < t->chain_n; i++)
        if (same_stack(t, slot, t->chain[i])) return 1;
    return 0;
}

/* The recorded frames of the stacks chain[from..], innermost first, leave the stream. */
static void suspend_from(struct ftr_tls *t, uint32_t from, uint64_t tsc)
{
    /* the suspended stacks' --graph-function and --notrace frames stop counting */
    for (struct ftr_shadow *e = t->top; e-- > t->shadow_base;) {
        int counted =
            (e->flags & (FTR_SH_TRIGGER | FTR_SH_NOTRACE)) && !(e->flags & FTR_SH_UNCOUNTED);
        if (!e->slot || !(counted || (e->flags & FTR_SH_RECORDED))) continue;
        if (!in_chain_from(t, from, e->slot)) break; /* the resumer's: below stay open */
        graph_count(t, e, -1);
        e->flags |= FTR_SH_UNCOUNTED;
    }
    uint32_t n = 0;
    for (struct ftr_shadow *e = t->top; e-- > t->shadow_base;) {
        if (!e->slot || !(e->flags & FTR_SH_RECORDED)) continue;
        if (!in_chain_from(t, from, e->slot)) break; /* the resumer's: below stay open */
        n++;
    }
    if (!n) return;
    record_arg(t, ftr_rec_head(FTR_SP_SUSPENDED, FTR_EV_SPECIAL), tsc, n);
    for (struct ftr_shadow *e = t->top; n && e-- > t->shadow_base;) {
        if (!e->slot || !(e->flags & FTR_SH_RECORDED)) continue;
        t->rec_depth--;
        record(t, ftr_rec_head(e->site, FTR_EV_UNWIND), tsc);
        e->flags = (e->flags & ~FTR_SH_RECORDED) | FTR_SH_SUSPENDED;
        n--;
    }
}

/* The suspended frames of stack cls move to the top of the shadow stack, in their order, and
 * enter the stream again. */
static void resume(struct ftr_tls *t, uint32_t cls, uint64_t tsc)
{
    struct ftr_shadow *w = t->top;
    for (struct ftr_shadow *e = t->top; e-- > t->shadow_base;) {
        if (!e->slot || !(e->flags & (FTR_SH_SUSPENDED | FTR_SH_UNCOUNTED)) ||
            !same_stack(t, e->slot, cls))
            continue;
        struct ftr_shadow mv = *e;
        for (struct ftr_shadow *p = e; p + 1 < w; p++)
            *p = p[1];
        *--w = mv;
    }
    uint32_t n = 0;
    for (struct ftr_shadow *e = w; e < t->top; e++) {
        if (e->flags & FTR_SH_UNCOUNTED) { /* their knobs count again */
            e->flags &= ~FTR_SH_UNCOUNTED;
            graph_count(t, e, 1);
        }
        n += !!(e->flags & FTR_SH_SUSPENDED);
    }
    if (!n || !recording(t)) return;
    if (ftr_hot.max_depth) { /* --max-depth: those deeper stay out (and suspended) */
        uint32_t room = t->rec_depth < ftr_hot.max_depth ? ftr_hot.max_depth - t->rec_depth : 0;
        if (n > room) n = room;
    }
    if (!n) return;
    record_arg(t, ftr_rec_head(FTR_SP_RESUMED, FTR_EV_SPECIAL), tsc, n);
    for (struct ftr_shadow *e = w; n && e < t->top; e++) {
        if (!(e->flags & FTR_SH_SUSPENDED)) continue;
        n--;
        e->flags &= ~FTR_SH_SUSPENDED;
        if (record(t, ftr_rec_head(e->site, FTR_EV_ENTRY), tsc)) {
            e->flags |= FTR_SH_RECORDED;
            t->rec_depth++;
        }
    }
}

/* The stacks chain[from..] were left (suspend_from): the entries of the declared ones among
 * them, at the top of the shadow stack, are parked with their stacks (park.h), to be taken
 * back by whichever thread resumes them; the others stay. */
static void park_from(struct ftr_tls *t, uint32_t from)
{
    struct ftr_shadow *p = t->top, *top = t->top;
    while (p > t->shadow_base && (!p[-1].slot || in_chain_from(t, from, p[-1].slot)))
        p--;
    if (p == top) return;
    struct ftr_park_build b[FTR_CHAIN_MAX];
    uint32_t nb = 0;
    for (uint32_t i = from; i < t->chain_n; i++)
        if (t->chain[i] != FTR_STACK_OWN && t->chain[i] != FTR_STACK_UNKNOWN)
            b[nb++] = (struct ftr_park_build){t->chain[i], 0, 0};
    struct ftr_shadow *w = p;
    for (struct ftr_shadow *e = p; e < top; e++) {
        if (!e->slot) continue;
        uint32_t k = 0;
        while (k < nb && !ftr_stack_is(e->slot, b[k].cls))
            k++;
        if (k < nb && ftr_park_add(&b[k], e) == 0) continue;
        *w++ = *e; /* another stack's, or no block to park it in */
    }
    for (uint32_t k = 0; k < nb; k++)
        ftr_park_publish(&b[k]);
    for (struct ftr_shadow *e = w; e < top; e++)
        e->slot = 0;
    t->top = w;
}

/* The entries parked with stack cls come back on top of this thread's shadow stack (marked
 * suspended, as they were left: resume() enters them in the stream again). */
static void unpark(struct ftr_tls *t, uint32_t cls)
{
    uint32_t n = ftr_unpark(cls, t->top, (uint32_t)(t->shadow_end - t->top));
    t->top += n;
}

/* The stack holding sp runs now. */
static void runs(struct ftr_tls *t, uintptr_t sp, uint64_t tsc)
{
    uint32_t cls = ftr_stack_class(t, sp);
    if (cls == FTR_STACK_UNKNOWN) { /* stacks that cannot be told apart: no chain */
        t->chain_n = 0;
        return;
    }
    for (uint32_t i = 0; i < t->chain_n; i++)
        if (t->chain[i] == cls) {
            if (t->shadow_base) {
                suspend_from(t, i + 1, tsc);
                park_from(t, i + 1);
            }
            t->chain_n = i + 1;
            return;
        }
    /* deeper than the chain holds: that stack is not followed (its frames stay in the stream
     * until a return suspends them, as without the chain) */
    if (!t->chain || t->chain_n == FTR_CHAIN_MAX) return;
    t->chain[t->chain_n++] = cls;
    if (t->shadow_base) {
        unpark(t, cls);
        resume(t, cls, tsc);
    }
}

/* A signal handler that interrupted a hook switches to another coroutine (preemptive green
 * threads): the hook resumes only when this context is switched back to, after the other
 * coroutines' hooks have pushed and popped entries under it, and then writes its stale view
 * back. That cannot be made safe: this thread steps aside. Every return address it hooked is
 * put back (frames return as if never traced), an ASIDE event ends its trace, it hooks no more
 * calls, and says so once. */
static void step_aside(struct ftr_tls *t, const char *msg, unsigned long len)
{
    uint64_t old;
    int blocked = block_signals(&old);
    for (struct ftr_shadow *e = t->shadow_base; e && e < t->top; e++) {
        uintptr_t w, ret; /* a slot may be on a stack freed since: peeked at */
        if (e->slot && ftr_peek(e->slot, &w) && ftr_hooked_word(w) && (ret = ftr_ret_get(e->slot)))
            *(uintptr_t *)e->slot = ret;
    }
    /* The thread's events end here for a reader: hooks the handler interrupted may finish
     * later, with a stale view, and record after this (docs/format.md, ASIDE). */
    if (t->pos) record(t, ftr_rec_head(FTR_SP_ASIDE, FTR_EV_SPECIAL), ftr_rdtsc());
    t->state = FTR_T_OFF;
    static int said;
    if (!__atomic_exchange_n(&said, 1, __ATOMIC_RELAXED)) say_raw(msg, len);
    if (blocked) restore_signals(&old);
}

/* A switch moves this thread's shadow entries: a signal handler landing meanwhile must not see
 * them half moved. Blocking every signal around it cost two system calls a switch (~400 ns);
 * instead the thread is FTR_T_SWITCHING, which the handler's hooks read: its calls run untraced
 * (counted), a return of a frame hooked before takes its address from the book alone, and a
 * switch or a jump out of the switch in it leaves the switch half done, for good maybe: the
 * thread steps aside (ftr_switch_spoiled). @return the state to put back, at switch_end(). */
static inline uint32_t switch_begin(struct ftr_tls *t)
{
    uint32_t st = t->state;
    t->switch_sp = (uintptr_t)__builtin_frame_address(0);
    SIGNAL_FENCE();
    t->state = FTR_T_SWITCHING;
    SIGNAL_FENCE();
    return st;
}
/* Back to st, unless a handler made the thread step aside meanwhile: one non-locked cmpxchg,
 * atomic against this thread's signal handlers. */
static inline void switch_end(struct ftr_tls *t, uint32_t st)
{
    uint32_t expect = FTR_T_SWITCHING;
    SIGNAL_FENCE();
    __asm__ volatile("cmpxchgl %2, %1" : "+a"(expect), "+m"(t->state) : "r"(st) : "memory", "cc");
}

/* A signal handler that interrupted a switch switched too, or jumped out of it: the interrupted
 * switch may never end, and this thread's entries are half moved. It steps aside. */
__attribute__((noinline, cold)) void ftr_switch_spoiled(struct ftr_tls *t)
{
    static const char msg[] = "ftrace-run: a signal handler switched coroutines or jumped out of "
                              "a coroutine switch: that thread is traced no further\n";
    if (t->shadow_base) step_aside(t, msg, sizeof msg - 1); /* (which does not read the state) */
    t->state = FTR_T_OFF;
}

__attribute__((noinline, cold)) void ftr_handler_switched(struct ftr_tls *t)
{
    static const char msg[] = "ftrace-run: a signal handler switched stacks while the tracer's "
                              "hook it interrupted was running: that thread is traced no "
                              "further\n";
    if (t->state == FTR_T_ACTIVE && t->shadow_base) step_aside(t, msg, sizeof msg - 1);
    t->state = FTR_T_OFF;
}

void ftr_context_switch(uintptr_t here, uintptr_t to_sp)
{
    struct ftr_tls *t = &ftr_tls;
    if (aside((const uintptr_t *)here)) { /* a clone() child's: the stack it goes to too */
        uint32_t d = to_sp ? ftr_stack_declared(to_sp) : 0;
        if (d && !ftr_stack_aside(to_sp))
            ftr_stack_set_aside_range(ftr_stack_ranges[d - 1].lo, ftr_stack_ranges[d - 1].hi);
        return;
    }
    if (t->state == FTR_T_OFF) return;
    if (t->state == FTR_T_SWITCHING) { /* a handler that interrupted a switch */
        ftr_switch_spoiled(t);
        return;
    }
    if (t->hook_sp || t->in_slow) { /* a handler that interrupted a hook */
        static const char msg[] = "ftrace-run: a signal handler switched coroutines "
                                  "(swapcontext) inside the tracer's hook: that thread is "
                                  "traced no further\n";
        if (t->state == FTR_T_ACTIVE && t->shadow_base) step_aside(t, msg, sizeof msg - 1);
        return;
    }
    /* Before the thread's first hook, the chain only (a first traced call inside a coroutine
     * must find the main stack below it). The clock first: with CLOCK_MONOTONIC it is a system
     * call, at whose return pending signals are delivered (40% of a handler's calls fell into
     * the switch when it came after). */
    uint64_t tsc = ftr_rdtsc();
    uint32_t st = switch_begin(t);
    runs(t, here, tsc);
    if (to_sp) runs(t, to_sp, tsc);
    switch_end(t, st);
}

/* makecontext() on [lo, hi): a coroutine made afresh on that memory. Entries this thread still
 * holds for frames there are of a coroutine abandoned suspended: they are dropped (never to be
 * resumed), and the stack leaves the chain. */
void ftr_context_made(uintptr_t lo, uintptr_t hi)
{
    struct ftr_tls *t = &ftr_tls;
    int set_aside = aside((const uintptr_t *)__builtin_frame_address(0));
    if (!set_aside && t->state == FTR_T_SWITCHING) { /* a handler that interrupted a switch */
        ftr_switch_spoiled(t);
        return;
    }
    uint32_t d = ftr_stack_declared(lo); /* the coroutine left suspended there never resumes */
    if (d) ftr_park_drop(d);
    if (set_aside) { /* a clone() child's coroutine */
        if (!ftr_stack_aside(lo)) ftr_stack_set_aside_range(lo, hi);
        return;
    }
    if (t->state != FTR_T_ACTIVE || !t->shadow_base || t->hook_sp || t->in_slow) return;
    uint64_t tsc = ftr_rdtsc(); /* before the switch state: see ftr_context_switch */
    uint32_t st = switch_begin(t);
    struct ftr_shadow *w = t->shadow_base;
    for (struct ftr_shadow *e = t->shadow_base; e < t->top; e++) {
        if (e->slot && e->slot - lo < hi - lo) {
            ftr_ret_gone(e);
            retire(t, e, FTR_EV_UNWIND, tsc);
            continue;
        }
        if (w != e) *w = *e;
        w++;
    }
    for (struct ftr_shadow *e = w; e < t->top; e++)
        e->slot = 0;
    t->top = w;
    uint32_t k = 0;
    for (uint32_t i = 0; i < t->chain_n; i++)
        if (!(t->chain[i] != FTR_STACK_OWN && ftr_stack_is(lo, t->chain[i])))
            t->chain[k++] = t->chain[i];
    t->chain_n = k;
    switch_end(t, st);
}
