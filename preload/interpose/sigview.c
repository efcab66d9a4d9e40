/*
 * sigview.c - the program's view of its mask (sigview.h): what the program blocks of the
 * guarded signals, kept per thread, and the guarded signals held while it blocks them.
 *
 * The kernel never has a guarded signal blocked; the program believes what it set. sigguard.c's
 * mask wrappers report and change the view, a new thread starts with its creator's
 * (ftr_sigguard_start_view()), the program's handler of a guarded signal runs with its sa_mask
 * and the signal itself added, and the constructor takes the mask the process was started with.
 * A guarded signal sent while the view blocks it is held and sent again, to the thread itself
 * and with its siginfo, by the wrapper that opens it; sigpending() and sigwait() see it. One held
 * of each signal at most, per thread and per process. A thread's are changed by the thread and
 * its own handlers only; the process's by any thread, through the held slot's state.
 */
#define _GNU_SOURCE
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "sigview.h"

__thread unsigned long ftr_view __attribute__((tls_model("initial-exec")));

enum { H_EMPTY, H_WRITING, H_FULL, H_TAKING };
/* A held process-directed signal: its siginfo whole (sigqueue()'s value, a timer's fields) */
struct held {
    _Atomic unsigned char st;
    siginfo_t info;
};
/* A held thread-directed one (SI_TKILL): what such a siginfo carries, kept small, as is every
 * initial-exec TLS byte of ours (docs/design.md, "Attaching to a running process") */
struct theld {
    _Atomic unsigned char st;
    unsigned char sig;
    int err;
    pid_t pid;
    uid_t uid;
    union sigval value; /* a thread may send itself SI_TKILL with one (rt_tgsigqueueinfo) */
};
static __thread struct theld theld[FTR_SIGGUARD_MAX] __attribute__((tls_model("initial-exec")));
static struct held pheld[FTR_SIGGUARD_MAX];

/* the kernel's mask, a word (the system call reads and writes that much) */
static void kmask(int how, const unsigned long *set, unsigned long *old)
{
    syscall(SYS_rt_sigprocmask, how, set, old, sizeof(unsigned long));
}

static int step(_Atomic unsigned char *st, unsigned char from, unsigned char to)
{
    return atomic_load_explicit(st, memory_order_relaxed) == from &&
           atomic_compare_exchange_strong(st, &from, to);
}

void ftr_view_hold(int i, int sig, const siginfo_t *si)
{
    if (si && si->si_code == SI_TKILL) {
        struct theld *t = &theld[i];
        if (!step(&t->st, H_EMPTY, H_WRITING)) return;
        t->sig = (unsigned char)sig;
        t->err = si->si_errno;
        t->pid = si->si_pid;
        t->uid = si->si_uid;
        t->value = si->si_value;
        atomic_store_explicit(&t->st, H_FULL, memory_order_release);
        return;
    }
    struct held *h = &pheld[i];
    if (!step(&h->st, H_EMPTY, H_WRITING)) return;
    if (si) {
        h->info = *si;
    } else {
        memset(&h->info, 0, sizeof h->info);
        h->info.si_code = SI_USER;
    }
    h->info.si_signo = sig;
    atomic_store_explicit(&h->st, H_FULL, memory_order_release);
}

static int take(struct held *h, siginfo_t *out)
{
    if (!step(&h->st, H_FULL, H_TAKING)) return 0;
    *out = h->info;
    atomic_store_explicit(&h->st, H_EMPTY, memory_order_release);
    return 1;
}
static int take_t(struct theld *t, siginfo_t *out)
{
    if (!step(&t->st, H_FULL, H_TAKING)) return 0;
    memset(out, 0, sizeof *out);
    out->si_signo = t->sig;
    out->si_errno = t->err;
    out->si_code = SI_TKILL;
    out->si_pid = t->pid;
    out->si_uid = t->uid;
    out->si_value = t->value;
    atomic_store_explicit(&t->st, H_EMPTY, memory_order_release);
    return 1;
}
int ftr_view_take(int i, siginfo_t *out)
{
    return take_t(&theld[i], out) || take(&pheld[i], out);
}

unsigned long ftr_view_held(void)
{
    unsigned long b = 0;
    int n = ftr_sigguard_count();
    for (int i = 0; i < n; i++)
        if (atomic_load(&theld[i].st) != H_EMPTY || atomic_load(&pheld[i].st) != H_EMPTY)
            b |= FTR_GBIT(ftr_sigguard_signal(i));
    return b;
}

void ftr_view_forget_held(void)
{
    for (int i = 0; i < FTR_SIGGUARD_MAX; i++) {
        atomic_store(&theld[i].st, H_EMPTY);
        atomic_store(&pheld[i].st, H_EMPTY);
    }
}

/* Sent again to this thread with its siginfo (a thread may send itself any si_code): the
 * kernel has it open, so our handler gets it as the system call returns, and the view lets it
 * through to the program's action now. */
static void resend(int sig, siginfo_t *si)
{
    syscall(SYS_rt_tgsigqueueinfo, (pid_t)syscall(SYS_getpid), (pid_t)syscall(SYS_gettid), sig, si);
}
/* Every held signal sent again (blocked in the kernel for an exec: then pending across it), or
 * only those the view does not block. */
static void resend_held(int all)
{
    int n = ftr_sigguard_count();
    for (int i = 0; i < n; i++) {
        siginfo_t si;
        int sig = ftr_sigguard_signal(i);
        if (!all && (ftr_view_get() & FTR_GBIT(sig))) continue;
        if (take_t(&theld[i], &si)) resend(sig, &si);
        if (take(&pheld[i], &si)) resend(sig, &si);
    }
}
void ftr_view_deliver_open(void)
{
    resend_held(0);
}

void ftr_view_set(unsigned long v)
{
    unsigned long old = ftr_view_get();
    ftr_view_put(v);
    if (old & ~v & ftr_view_held()) ftr_view_deliver_open();
}

/* The program's handlers of guarded signals running on this thread (innermost last), with the
 * view each interrupted: a jump out of one (siglongjmp from a handler) restores that view when
 * the jump restores the mask, as the kernel's mask comes back from the jump buffer. */
#define HREC_MAX 16
static __thread struct hrec {
    uintptr_t sp;
    unsigned long view;
} hrec[HREC_MAX] __attribute__((tls_model("initial-exec")));
static __thread unsigned hrec_n __attribute__((tls_model("initial-exec")));

unsigned ftr_view_handler_starts(uintptr_t sp, unsigned long v)
{
    unsigned k = hrec_n;
    if (k < HREC_MAX) hrec[k] = (struct hrec){sp, v};
    atomic_signal_fence(memory_order_seq_cst);
    hrec_n = k + 1;
    return k;
}
void ftr_view_handler_ends(unsigned k)
{
    atomic_signal_fence(memory_order_seq_cst);
    hrec_n = k;
}

void ftr_sigguard_jump(uintptr_t sp, int mask_saved)
{
    unsigned n = hrec_n;
    unsigned long v = 0;
    int left = 0;
    while (n && n <= HREC_MAX && hrec[n - 1].sp < sp) {
        v = hrec[--n].view;
        left = 1;
    }
    if (!left) return;
    atomic_signal_fence(memory_order_seq_cst);
    hrec_n = n;
    if (mask_saved) ftr_view_set(v);
}

unsigned long ftr_sigguard_view(void)
{
    return ftr_view_get();
}
void ftr_sigguard_set_view(unsigned long v)
{
    ftr_view_set(v & ftr_sigguard_bits());
}

/* An exec starts the new image with the kernel's mask, and keeps pending signals: the guarded
 * signals the view blocks go into the mask for the call, and those held are sent again, to
 * stay pending across it (not in a vfork child: they are its parent's). The exec failed: the
 * mask back (what was sent comes to our handler, to be held again). */
static __thread unsigned long exec_saved __attribute__((tls_model("initial-exec")));
static __thread int exec_blocked __attribute__((tls_model("initial-exec")));
void ftr_sigguard_exec(int failed)
{
    if (failed) {
        if (exec_blocked) kmask(SIG_SETMASK, &exec_saved, NULL);
        exec_blocked = 0;
        return;
    }
    unsigned long add = ftr_view_get();
    exec_blocked = add != 0;
    if (!exec_blocked) return;
    kmask(SIG_BLOCK, &add, &exec_saved);
    if (ftr_sigguard_ours()) resend_held(1);
}

int ftr_sigguard_spawn_mask(sigset_t *mask)
{
    unsigned long v = ftr_view_get();
    if (!v) return 0;
    sigemptyset(mask);
    kmask(SIG_BLOCK, NULL, &mask->__val[0]);
    mask->__val[0] |= v;
    return 1;
}
