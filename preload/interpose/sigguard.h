/*
 * sigguard.h - guarded signals (sigguard.c): keeps a few signals (SIGTRAP, for the breakpoint
 * batches) never blocked by the program and always handled by our handler, while the program
 * believes what it asked for, as glibc does for its internal SIGCANCEL and SIGSETXID. Offers the
 * set-up, our own handler's installation, the program's view of each guarded signal and the way to
 * run the program's action from our handler. Private to preload/.
 *
 * libftrace.so's own calls to sigaction() and pthread_sigmask() bind to the interposed wrappers
 * too: install our handlers with ftr_sigguard_install() (a plain sigaction() would only change
 * the program's view), and block guarded signals in our own threads (the writer) with
 * ftr_sigguard_real_sigmask().
 */
#ifndef FTR_SIGGUARD_H
#define FTR_SIGGUARD_H

#include <pthread.h>
#include <signal.h>
#include <stdint.h>

#ifndef FTR_HIDDEN /* as in tracer.h, which this header does not need */
#define FTR_HIDDEN __attribute__((visibility("hidden")))
#endif
#define FTR_SIGGUARD_MAX 4

/* Guard these signals (at most FTR_SIGGUARD_MAX). Called once, from the constructor, before our
 * handlers are installed. Queries the current disposition of each and remembers it as the
 * program's. Also removes the guarded signals from the calling thread's mask and from the
 * sa_mask of every handler already installed (signals 1..NSIG-1). Other threads already running
 * keep their masks. */
void ftr_sigguard_init(const int *sigs, int n) FTR_HIDDEN;
/* Install our own handler for a guarded signal through the real sigaction (the guarded signals
 * are removed from its sa_mask). SA_NODEFER is advisable: without it the kernel blocks the
 * signal while our handler (and the program's action chained from it) runs, and a synchronous
 * SIGTRAP there would kill the process. @return 0, or -1 with errno (EINVAL: not guarded). */
int ftr_sigguard_install(int sig, const struct sigaction *ours) FTR_HIDDEN;
/* The program's view of a guarded signal's action: what it installed last, or what was there
 * before us. */
void ftr_sigguard_program_action(int sig, struct sigaction *out) FTR_HIDDEN;
/* Runs the program's action for a guarded signal from inside our handler: its handler (with its
 * sa_mask blocked, less the guarded signals, for the call; SA_RESETHAND honoured), the default
 * action (the process dies or stops of sig as it would without us), or nothing (SIG_IGN; but a
 * synchronous fault the program ignores kills it, as the kernel does). Async-signal-safe. */
void ftr_sigguard_chain(int sig, siginfo_t *si, void *uc) FTR_HIDDEN;
/* From the tracer (hooks.c; a no-op in the test shim): the swapcontext() and setcontext()
 * wrappers tell it of coroutine switches. */
void ftr_context_switch(uintptr_t here, uintptr_t to_sp) FTR_HIDDEN;
/* A handler of ours that stands in for the default action of unguarded signals (init.c's, which
 * ends the trace before the process dies of the signal): sigaction(), signal() and the like read
 * it back as SIG_DFL, which is what the program left there. */
void ftr_sigguard_hide(void (*handler)(int, siginfo_t *, void *)) FTR_HIDDEN;
/* glibc's sa_restorer, as a read-back of a handler installed through it showed (0: none seen). */
uintptr_t ftr_sigguard_restorer(void) FTR_HIDDEN;
/* Will ftr_sigguard_chain() end the process (the program's default action, or a synchronous
 * trap the program has blocked or ignored)? Our handler flushes the trace first. */
int ftr_sigguard_fatal(int sig, const siginfo_t *si) FTR_HIDDEN;
/* The program's view of this thread's mask: the guarded signals it believes blocked (bits
 * 1 << (sig - 1)). A new thread starts with ftr_sigguard_start_view() of its creator and
 * attributes, set in the thread itself with ftr_sigguard_set_view() before the program's
 * start routine runs. */
unsigned long ftr_sigguard_view(void) FTR_HIDDEN;
unsigned long ftr_sigguard_start_view(const pthread_attr_t *attr) FTR_HIDDEN;
void ftr_sigguard_set_view(unsigned long view) FTR_HIDDEN;
/* process.c: an exec is about to be made (failed 0), or it failed (failed 1): the new image
 * starts with the program's mask, and with what it had held pending. */
void ftr_sigguard_exec(int failed) FTR_HIDDEN;
/* process.c: the mask a posix_spawn() child gets without POSIX_SPAWN_SETSIGMASK (this
 * thread's, as the program believes it). @return 0 where it is the kernel's already. */
int ftr_sigguard_spawn_mask(sigset_t *mask) FTR_HIDDEN;
/* A jump (longjmp & co) to stack address sp, restoring the mask it saved or not: the program's
 * handlers it leaves give back the view they interrupted, when it does. */
void ftr_sigguard_jump(uintptr_t sp, int mask_saved) FTR_HIDDEN;
/* pthread_sigmask() without the guard, for libftrace's own threads. */
int ftr_sigguard_real_sigmask(int how, const sigset_t *set, sigset_t *old) FTR_HIDDEN;

#endif
