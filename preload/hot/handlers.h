/*
 * handlers.h - the traced signal handlers running on a thread (handlers.c): telling a handler
 * that switched stacks under a hook it interrupted.
 *
 * A handler that interrupted a hook and switches to another context (preemptive green threads:
 * an fcontext-style switch in a SIGALRM handler, or a rewrite of the context its signal frame
 * returns to) leaves that hook to resume only when its context is switched back to, after other
 * contexts' hooks pushed and popped entries under it: its view of the shadow stack is stale
 * then. No wrapper sees such a switch, but it shows at a handler's return: handlers nest, so
 * each returns while it is the innermost one running, to the context it interrupted, unless the
 * program switched. Each thread keeps the traced handlers running (those whose return the entry
 * hook gave ftr_tramp_sigret) in ftr_tls.sig, innermost last. Called from the hooks: compiled
 * general-registers-only, no lock, any context.
 */
#ifndef FTR_HANDLERS_H
#define FTR_HANDLERS_H

#include <stdint.h>

#include "tracer.h"

/* A traced handler whose return slot is slot starts (interrupted: a hook or a slow path of this
 * thread was running). Past what the list holds, one that interrupted a hook makes the thread
 * step aside at once: its switch could not be told. */
void ftr_handler_entered(struct ftr_tls *t, uintptr_t slot, int interrupted) FTR_HIDDEN;
/* The traced handler of slot returns. @return 0 if the thread must step aside: it returns out
 * of order, or to a context it rewrote on another stack (or, having interrupted a hook, to
 * anywhere but that hook), while a handler in the list interrupted a hook. */
int ftr_handler_returns(struct ftr_tls *t, uintptr_t slot) FTR_HIDDEN;
/* A jump (longjmp & co) to stack address sp leaves the handlers it skips: those below sp on its
 * stack, and every one on the stack it leaves, when it goes to another. */
void ftr_handlers_jump(struct ftr_tls *t, uintptr_t sp) FTR_HIDDEN;

#endif /* FTR_HANDLERS_H */
