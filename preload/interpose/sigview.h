/*
 * sigview.h - the program's view of its mask (sigview.c), for sigguard.c: the guarded signals
 * each thread's program believes blocked, the guarded signals held while it does, and their
 * delivery once it opens them (docs/design.md, "The program's mask, as it set it"). The kernel
 * never has a guarded signal blocked (sigguard.c). Async-signal-safe, all of it: our handler
 * holds and delivers. Private to preload/.
 */
#ifndef FTR_SIGVIEW_H
#define FTR_SIGVIEW_H

#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>

#include "sigguard.h"

/* a signal's bit in a view: the kernel's, signal s is bit s - 1 */
#define FTR_GBIT(sig) (1ul << ((sig)-1))

/* This thread's view: changed by the thread and its own handlers only. */
extern __thread unsigned long ftr_view __attribute__((tls_model("initial-exec"))) FTR_HIDDEN;
static inline unsigned long ftr_view_get(void)
{
    atomic_signal_fence(memory_order_seq_cst);
    return __atomic_load_n(&ftr_view, __ATOMIC_RELAXED);
}
/* (nothing delivered: for a view that blocks no less, or one put back by a handler's return) */
static inline void ftr_view_put(unsigned long v)
{
    atomic_signal_fence(memory_order_seq_cst);
    __atomic_store_n(&ftr_view, v, __ATOMIC_RELAXED);
    atomic_signal_fence(memory_order_seq_cst);
}
/* The view becomes v; the held signals it opens are delivered. */
void ftr_view_set(unsigned long v) FTR_HIDDEN;
/* Raised by the kernel for this thread's own instruction (an int3, a single step): the kernel
 * kills a thread that meets one blocked (or ignored). */
static inline int ftr_view_synchronous(const siginfo_t *si)
{
    return si && (si->si_code > 0 || si->si_code == SI_KERNEL);
}

/* Guarded signal sig (slot i of sigguard.c's) arrived while the view blocks it: held by the
 * thread (SI_TKILL: tgkill, raise, pthread_kill) or by the process (anything else), unless one
 * is held there already (they merge, as the kernel's pending signals of one number do). */
void ftr_view_hold(int i, int sig, const siginfo_t *si) FTR_HIDDEN;
/* Takes the held signal of slot i, the thread's before the process's. @return 0: none */
int ftr_view_take(int i, siginfo_t *out) FTR_HIDDEN;
/* the guarded signals held for this thread (its own and the process's), as view bits */
unsigned long ftr_view_held(void) FTR_HIDDEN;
/* The held signals the view does not block, delivered: sent again to this thread, with their
 * siginfo, so that our handler gets them as the system call returns. */
void ftr_view_deliver_open(void) FTR_HIDDEN;
/* a fork child: nothing pending (its view is its parent thread's) */
void ftr_view_forget_held(void) FTR_HIDDEN;
/* The program's handler of a guarded signal starts (its frame at sp), interrupting view v, and
 * ends (@param k: what start returned): a jump out of it (ftr_sigguard_jump) that restores the
 * mask gives v back. */
unsigned ftr_view_handler_starts(uintptr_t sp, unsigned long v) FTR_HIDDEN;
void ftr_view_handler_ends(unsigned k) FTR_HIDDEN;

/* sigguard.c's, for sigview.c: how many signals are guarded, which one slot i holds, their
 * bits, and whether this is our process (not a vfork child, and set up) */
int ftr_sigguard_count(void) FTR_HIDDEN;
int ftr_sigguard_signal(int i) FTR_HIDDEN;
unsigned long ftr_sigguard_bits(void) FTR_HIDDEN;
int ftr_sigguard_ours(void) FTR_HIDDEN;

#endif /* FTR_SIGVIEW_H */
