/*
 * sigguard.c - the guarded signals (SIGTRAP: the breakpoint batches) stay ours: never blocked, and
 * handled by our handler, while the program believes what it asked for (sigguard.h).
 *
 * Dispositions. For a guarded signal, sigaction() records the program's new action in a table
 * (its "view") and returns the previous view; the kernel keeps our handler, which passes the
 * program's signals on with ftr_sigguard_chain(). glibc's signal(), bsd_signal(), ssignal(),
 * sysv_signal(), __sysv_signal(), sigset(), sigignore() and siginterrupt() call its internal
 * sigaction, not ours: each is wrapped and rebuilt on the table with glibc's flags. A view reads
 * back as the kernel (5.11+) would give it: SA_RESTORER and glibc's restorer added, unknown
 * flags cleared, SIGKILL and SIGSTOP out of sa_mask, which holds 64 signals (the words past them
 * are zero; glibc's own read-back leaves stack garbage there). For any other signal, the guarded
 * ones are removed from sa_mask before the real call, and so read back without them.
 *
 * Masks. sigprocmask, pthread_sigmask, sigsuspend, ppoll, __ppoll_chk, pselect, epoll_pwait(2),
 * pthread_attr_setsigmask_np, sighold, sigblock, sigsetmask, BSD sigpause, swapcontext and
 * setcontext pass the kernel a copy of the set without the guarded signals (the caller's set is
 * never written, except ucp->uc_sigmask of the context calls, stripped in place: a copy of the
 * context on our stack could be overwritten by the switch it describes, or by a signal frame
 * pushed just after it). signalfd: the guarded signals are also taken out of the set it watches.
 * It only receives blocked signals, but a reader sleeping on it dequeues any signal of its set,
 * blocked or not, before any handler runs, which would steal a trap of ours; so the
 * program's signalfd never reports a guarded signal (its action gets it instead).
 *
 * The program's view. What the program blocks of the guarded signals is kept per thread
 * (sigview.c): a mask read back has them as the program set them,
 * sigpending() shows those held, sigwait, sigwaitinfo and sigtimedwait take them (they wait for
 * signals, they do not block them: the kernel unblocks the set only for the wait, and a
 * synchronous SIGTRAP is never dequeued by another thread's wait). Left alone:
 * posix_spawnattr_setsigmask (the mask of a new program: a traced one takes it as its view at
 * start, an untraced one gets what was asked) and sigvec (compat only).
 *
 * Not emulated: setting SIG_IGN does not discard a pending one; the program's SA_ONSTACK and
 * SA_RESTART (ours apply); the limits of the view (docs/design.md, "The program's mask").
 *
 * Hidden: a handler of ours that stands in for an unguarded signal's default action
 * (ftr_sigguard_hide(): init.c's, which ends the trace first) reads back as SIG_DFL, as the
 * program left it; an action the program sets replaces it, as without us.
 *
 * Everything passes through before ftr_sigguard_init() and in a vfork child (the pid is not
 * ours: it shares our table but not our dispositions or mask, which it may prepare for exec).
 * The pid follows fork() (pthread_atfork) and _Fork() (wrapped); a raw clone() child passes.
 */
#define _GNU_SOURCE
#undef _FORTIFY_SOURCE /* we define ppoll & co., which the fortified headers make inline */
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "forkpage.h"
#include "sigguard.h"
#include "sigview.h"

#define EXPORT __attribute__((visibility("default")))
#define ALIAS(f) __attribute__((alias(#f)))
#pragma GCC diagnostic ignored "-Wdeprecated-declarations" /* sighold & co. */
#if defined(__GNUC__) && !defined(__clang__) /* aliases lack glibc's nothrow/leaf/nonnull */
#pragma GCC diagnostic ignored "-Wmissing-attributes"
#endif

int __sigaction(int sig, const struct sigaction *act, struct sigaction *old);
int __sigsuspend(const sigset_t *set);
int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *ss,
                size_t fdslen);
int ftr_bsd_sigpause(int mask) __asm__("sigpause"); /* the header's sigpause: __xpg_sigpause */

/* ---- the real functions, all resolved by ftr_sigguard_init(), or at first use before it ---- */
#if __GLIBC_PREREQ(2, 35) /* as fdguard.c, we need 2.34 (pthread_attr_setsigmask_np, _Fork) */
#define REALS_2_35(X) X(epoll_pwait2)
#else
#define REALS_2_35(X)
#endif
// clang-format off
#define REALS(X) X(sigaction) X(signal) X(__sysv_signal) X(sigset) X(sighold) X(sigignore) \
    X(siginterrupt) X(sigprocmask) X(pthread_sigmask) X(sigsuspend) X(sigpause) X(__sigpause) \
    X(sigblock) X(sigsetmask) X(ppoll) X(__ppoll_chk) X(pselect) X(epoll_pwait) X(signalfd) \
    X(swapcontext) X(setcontext) X(pthread_attr_setsigmask_np) X(_Fork) X(sigpending) \
    X(sigrelse) X(siggetmask) X(sigwait) X(sigwaitinfo) X(sigtimedwait) \
    X(pthread_attr_getsigmask_np) REALS_2_35(X)
enum { /* R_sigpause is BSD sigpause, not __xpg_sigpause: dlsym() sees the name, not the label */
#define X(f) R_##f,
    REALS(X)
#undef X
    R_COUNT };
static const char *const real_names[R_COUNT] = {
#define X(f) #f,
    REALS(X)
#undef X
};
// clang-format on
static void *_Atomic reals[R_COUNT];

static void *real(int i)
{
    void *p = atomic_load_explicit(&reals[i], memory_order_relaxed);
    if (!p)
        atomic_store_explicit(&reals[i], p = dlsym(RTLD_NEXT, real_names[i]), memory_order_relaxed);
    return p;
}
#define REAL(f) ((__typeof__(&f))real(R_##f))

/* ---- the guarded signals and the program's view of each ---- */
#define NWORDS (sizeof(struct sigaction) / sizeof(unsigned long))
_Static_assert(sizeof(struct sigaction) % sizeof(unsigned long) == 0, "sigaction in words");

static int gsig[FTR_SIGGUARD_MAX];
static _Atomic int gcount; /* published last by ftr_sigguard_init() */
/* the guarded signals, as the first word of a sigset_t; SIGTRAP from the start: a library
 * constructor that runs before ours may start a thread with every signal blocked, and that
 * thread would die of the first int3 it met */
static _Atomic unsigned long gmask = 1ul << (SIGTRAP - 1);
static void *_Atomic ours_fn[FTR_SIGGUARD_MAX]; /* our handler of each */
static _Atomic pid_t gpid FTR_FORK_PAGE;        /* the process they are guarded in (0: not yet) */
static _Atomic unsigned sigintr;                /* bit i: siginterrupt(gsig[i], 1) is in effect */
static void *_Atomic restorer;                  /* glibc's sa_restorer, as seen in a read-back */

/* A seqlock per view: readers may be signal handlers; a writer blocks every signal it can while
 * it holds wlock, so that no handler interrupts it on its own thread. */
static struct view {
    _Atomic unsigned seq;
    unsigned long w[NWORDS];
} views[FTR_SIGGUARD_MAX];
static atomic_flag wlock = ATOMIC_FLAG_INIT;

struct ksa { /* what the kernel's rt_sigaction takes (x86_64) */
    void *handler;
    unsigned long flags;
    void *restorer;
    unsigned long mask;
};
#define K_SA_RESTORER 0x04000000u
#define K_SA_UAPI /* the flags a 5.11+ kernel keeps (0x800: SA_EXPOSE_TAGBITS) */                  \
    (SA_NOCLDSTOP | SA_NOCLDWAIT | SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NODEFER |             \
     SA_RESETHAND | 0x800u | K_SA_RESTORER)

static long ksigaction(int sig, const struct ksa *act, struct ksa *old)
{
    return syscall(SYS_rt_sigaction, sig, act, old, sizeof(unsigned long));
}
static void kmask(int how, const sigset_t *set, sigset_t *old)
{
    syscall(SYS_rt_sigprocmask, how, set, old, sizeof(unsigned long));
}

static int slot(int sig)
{
    int n = atomic_load_explicit(&gcount, memory_order_acquire);
    for (int i = 0; i < n; i++)
        if (gsig[i] == sig) return i;
    return -1;
}
/* not a vfork child, and initialised */
static int ours(void)
{
    return atomic_load_explicit(&gpid, memory_order_relaxed) == (pid_t)syscall(SYS_getpid);
}
/* @return sig's slot when it is guarded here, else -1 */
static int guarded_here(int sig)
{
    int i = slot(sig);
    return i >= 0 && ours() ? i : -1;
}
/* glibc's sigset_t: signal s is bit s-1 of __val[0] (the kernel's 64) */
static void strip(sigset_t *s)
{
    s->__val[0] &= ~gmask;
}
/* masks are stripped before ftr_sigguard_init() too, but never in a vfork child */
static int strips(void)
{
    pid_t g = atomic_load_explicit(&gpid, memory_order_relaxed);
    return g == 0 || g == (pid_t)syscall(SYS_getpid);
}
/* @return set, or buf holding set without the guarded signals */
static const sigset_t *stripped(const sigset_t *set, sigset_t *buf)
{
    if (!set || !(set->__val[0] & gmask) || !strips()) return set;
    *buf = *set;
    strip(buf);
    return buf;
}
/* the same for an old-style mask of signals 1..32 */
static int stripped_bits(int mask)
{
    unsigned g = (unsigned)gmask;
    return ((unsigned)mask & g) && strips() ? (int)((unsigned)mask & ~g) : mask;
}

/* for sigview.c */
int ftr_sigguard_count(void)
{
    return atomic_load_explicit(&gcount, memory_order_acquire);
}
int ftr_sigguard_signal(int i)
{
    return gsig[i];
}
unsigned long ftr_sigguard_bits(void)
{
    return gmask;
}
int ftr_sigguard_ours(void)
{
    return ours();
}

static void load_words(int i, unsigned long *w)
{
    for (size_t k = 0; k < NWORDS; k++)
        w[k] = __atomic_load_n(&views[i].w[k], __ATOMIC_RELAXED);
}
static void view_read(int i, struct sigaction *out)
{
    unsigned long w[NWORDS];
    unsigned s;
    do {
        while ((s = atomic_load_explicit(&views[i].seq, memory_order_acquire)) & 1)
            __builtin_ia32_pause();
        load_words(i, w);
        atomic_thread_fence(memory_order_acquire);
    } while (atomic_load_explicit(&views[i].seq, memory_order_relaxed) != s);
    memcpy(out, w, sizeof *out);
}
/* Copies view i to *old (when not NULL), then replaces it with *act (when not NULL). */
static void view_swap(int i, const struct sigaction *act, struct sigaction *old)
{
    sigset_t all, saved;
    unsigned long w[NWORDS];
    sigfillset(&all);
    kmask(SIG_BLOCK, &all, &saved);
    while (atomic_flag_test_and_set_explicit(&wlock, memory_order_acquire))
        __builtin_ia32_pause();
    load_words(i, w);
    if (old) memcpy(old, w, sizeof *old);
    if (act) {
        unsigned s = atomic_load_explicit(&views[i].seq, memory_order_relaxed);
        memcpy(w, act, sizeof w);
        atomic_store_explicit(&views[i].seq, s + 1, memory_order_relaxed);
        atomic_thread_fence(memory_order_release);
        for (size_t k = 0; k < NWORDS; k++)
            __atomic_store_n(&views[i].w[k], w[k], __ATOMIC_RELAXED);
        atomic_store_explicit(&views[i].seq, s + 2, memory_order_release);
    }
    atomic_flag_clear_explicit(&wlock, memory_order_release);
    kmask(SIG_SETMASK, &saved, NULL);
}

/* The mask as the kernel keeps it: 64 signals, never SIGKILL or SIGSTOP. */
static void kernel_mask(sigset_t *s)
{
    unsigned long m = s->__val[0] & ~(1ul << (SIGKILL - 1) | 1ul << (SIGSTOP - 1));
    memset(s, 0, sizeof *s);
    s->__val[0] = m;
}

/* The program sets guarded signal i's action (act may be NULL: read only). */
static void set_view(int i, const struct sigaction *act, struct sigaction *old)
{
    struct sigaction v;
    if (act) {
        v = *act;
        v.sa_flags = (int)(((unsigned)v.sa_flags | K_SA_RESTORER) & K_SA_UAPI);
        v.sa_restorer = (void (*)(void))atomic_load(&restorer);
        kernel_mask(&v.sa_mask);
    }
    view_swap(i, act ? &v : NULL, old);
}

/* An action as glibc's signal() & co. build it. @return the previous handler */
static sighandler_t set_handler(int i, int sig, sighandler_t h, int flags, int mask_self)
{
    struct sigaction a, o;
    memset(&a, 0, sizeof a);
    a.sa_handler = h;
    if (mask_self) sigaddset(&a.sa_mask, sig);
    a.sa_flags = flags;
    set_view(i, &a, &o);
    return o.sa_handler;
}

static void note_restorer(int sig)
{
    struct ksa k;
    if (!atomic_load(&restorer) && ksigaction(sig, NULL, &k) == 0 && (k.flags & K_SA_RESTORER))
        atomic_store(&restorer, k.restorer);
}

uintptr_t ftr_sigguard_restorer(void)
{
    return (uintptr_t)atomic_load(&restorer);
}

static void after_fork_child(void)
{
    atomic_store(&gpid, (pid_t)syscall(SYS_getpid));
    ftr_view_forget_held(); /* a child starts with nothing pending; its view is its parent's */
}

void ftr_sigguard_init(const int *sigs, int n)
{
    sigset_t set;
    if (atomic_load(&gcount)) return; /* once */
    for (int i = 0; i < R_COUNT; i++)
        real(i);
    int m = 0;
    for (int i = 0; i < n && m < FTR_SIGGUARD_MAX; i++) {
        struct sigaction cur;
        memset(&cur, 0, sizeof cur);
        if (sigs[i] < 1 || sigs[i] > 64 || REAL(sigaction)(sigs[i], NULL, &cur) != 0) continue;
        gsig[m] = sigs[i];
        gmask |= 1ul << (sigs[i] - 1);
        kernel_mask(&cur.sa_mask);
        memcpy(views[m++].w, &cur, sizeof cur);
    }
    atomic_store(&gpid, (pid_t)syscall(SYS_getpid));
    pthread_atfork(NULL, NULL, after_fork_child);
    atomic_store_explicit(&gcount, m, memory_order_release);
    sigemptyset(&set);
    set.__val[0] = gmask;
    /* blocked since the process started (a parent's mask, kept across exec): the program's */
    sigset_t was;
    kmask(SIG_UNBLOCK, &set, &was);
    ftr_view_put(ftr_view_get() | (was.__val[0] & gmask));
    /* raw calls: a handler installed by other means keeps its exact flags and restorer */
    for (int s = 1; s < NSIG; s++) {
        struct ksa k;
        if (s == SIGKILL || s == SIGSTOP || ksigaction(s, NULL, &k) != 0) continue;
        if (k.handler == (void *)SIG_DFL || k.handler == (void *)SIG_IGN) continue;
        note_restorer(s);
        if (k.mask & gmask) {
            k.mask &= ~gmask;
            ksigaction(s, &k, NULL);
        }
    }
}

static void *_Atomic hidden; /* ftr_sigguard_hide()'s handler */

void ftr_sigguard_hide(void (*handler)(int, siginfo_t *, void *))
{
    atomic_store(&hidden, (void *)handler);
}

/* What the program left: the default action, where our stand-in for it is */
static sighandler_t unhidden(sighandler_t h)
{
    void *ours = atomic_load(&hidden);
    return ours && (void *)h == ours ? SIG_DFL : h;
}

static void unhide(struct sigaction *old)
{
    if (old && unhidden(old->sa_handler) != old->sa_handler) {
        memset(old, 0, sizeof *old);
        old->sa_handler = SIG_DFL;
    }
}

int ftr_sigguard_install(int sig, const struct sigaction *act)
{
    int i = slot(sig);
    if (i < 0) return errno = EINVAL, -1;
    struct sigaction a = *act;
    strip(&a.sa_mask);
    int r = REAL(sigaction)(sig, &a, NULL);
    if (r == 0) {
        note_restorer(sig);
        atomic_store(&ours_fn[i], (void *)act->sa_handler);
    }
    return r;
}

void ftr_sigguard_program_action(int sig, struct sigaction *out)
{
    int i = slot(sig);
    memset(out, 0, sizeof *out);
    if (i >= 0) view_read(i, out);
}

int ftr_sigguard_real_sigmask(int how, const sigset_t *set, sigset_t *old)
{
    return REAL(pthread_sigmask)(how, set, old);
}

/* The default action of sig: the process dies (or stops) of it as it would without us. */
static void default_action(int sig)
{
    if (sig == SIGCHLD || sig == SIGURG || sig == SIGWINCH || sig == SIGCONT) return; /* ignore */
    struct ksa dfl = {0}, saved;
    sigset_t one;
    sigemptyset(&one);
    sigaddset(&one, sig);
    if (ksigaction(sig, &dfl, &saved) != 0) return;
    kmask(SIG_UNBLOCK, &one, NULL);
    syscall(SYS_tgkill, (pid_t)syscall(SYS_getpid), (pid_t)syscall(SYS_gettid),
            sig);                  /* delivered on its return */
    ksigaction(sig, &saved, NULL); /* still here: stopped and continued, or a debugger took it */
}

/* Does the view of this thread block guarded signal sig? (Never in a vfork child.) */
static int view_blocks(int sig)
{
    return (ftr_view_get() & FTR_GBIT(sig)) && ours();
}

int ftr_sigguard_fatal(int sig, const siginfo_t *si)
{
    int i = slot(sig);
    struct sigaction a;
    if (i < 0) return 0;
    if (view_blocks(sig)) return ftr_view_synchronous(si);
    view_read(i, &a);
    if (a.sa_handler == SIG_IGN) return ftr_view_synchronous(si);
    return a.sa_handler == SIG_DFL || (void *)a.sa_handler == atomic_load(&ours_fn[i]);
}

static void chain_once(int i, int sig, siginfo_t *si, void *uc);

void ftr_sigguard_chain(int sig, siginfo_t *si, void *uc)
{
    int i = slot(sig);
    siginfo_t again;
    if (i < 0) return;
    /* The program has it blocked here: one sent waits until the program opens it; one the
     * kernel raised for this thread's own instruction kills, as the kernel's would. */
    if (view_blocks(sig)) {
        if (ftr_view_synchronous(si))
            default_action(sig);
        else
            ftr_view_hold(i, sig, si);
        return;
    }
    for (;;) {
        chain_once(i, sig, si, uc);
        /* held while the handler had it blocked: delivered now, in the same context, as the
         * kernel delivers it at the handler's sigreturn */
        if (ftr_view_get() & FTR_GBIT(sig) || !ftr_view_take(i, &again)) break;
        si = &again;
    }
    ftr_view_deliver_open(); /* other guarded signals the handler held */
}

static void chain_once(int i, int sig, siginfo_t *si, void *uc)
{
    struct sigaction a;
    view_read(i, &a);
    if (a.sa_handler == SIG_IGN) {
        /* The kernel kills on a synchronous fault it finds ignored (or blocked). */
        int fault =
            sig == SIGTRAP || sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE;
        if (fault && si && (si->si_code > 0 || si->si_code == SI_KERNEL)) default_action(sig);
        return;
    }
    /* ours, reinstalled by a program that read it with a raw system call: what is below us */
    if (a.sa_handler == SIG_DFL || (void *)a.sa_handler == atomic_load(&ours_fn[i])) {
        default_action(sig);
        return;
    }
    if (a.sa_flags & SA_RESETHAND) { /* the kernel resets the handler only */
        struct sigaction d = a;
        d.sa_handler = SIG_DFL;
        view_swap(i, &d, NULL);
    }
    /* The kernel would block sa_mask, and sig unless SA_NODEFER, for the call: so do we, less
     * the guarded signals, which the view blocks instead. Its sigreturn restores the mask
     * anyway; we restore both on return. */
    sigset_t block = a.sa_mask, saved;
    strip(&block);
    unsigned long v = ftr_view_get();
    unsigned k = ftr_view_handler_starts((uintptr_t)__builtin_frame_address(0), v);
    ftr_view_put(v | (a.sa_mask.__val[0] & gmask) | (a.sa_flags & SA_NODEFER ? 0 : FTR_GBIT(sig)));
    kmask(SIG_BLOCK, &block, &saved);
    if (a.sa_flags & SA_SIGINFO)
        a.sa_sigaction(sig, si, uc);
    else /* the kernel passes info and context to every handler (x86_64) */
        ((void (*)(int, siginfo_t *, void *))(void (*)(void))a.sa_handler)(sig, si, uc);
    kmask(SIG_SETMASK, &saved, NULL);
    ftr_view_put(v);
    ftr_view_handler_ends(k);
}

/* ---- dispositions ---- */
EXPORT int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
    int i = guarded_here(sig);
    if (i >= 0) return set_view(i, act, old), 0;
    int r;
    if (!act || !(act->sa_mask.__val[0] & gmask) || !strips()) {
        r = REAL(sigaction)(sig, act, old);
    } else {
        struct sigaction a = *act;
        strip(&a.sa_mask);
        r = REAL(sigaction)(sig, &a, old);
    }
    if (r == 0) unhide(old);
    return r;
}
EXPORT int __sigaction(int sig, const struct sigaction *act, struct sigaction *old)
    ALIAS(sigaction);

EXPORT sighandler_t signal(int sig, sighandler_t h)
{
    int i = guarded_here(sig);
    if (i < 0) return unhidden(REAL(signal)(sig, h));
    if (h == SIG_ERR) return errno = EINVAL, SIG_ERR;
    return set_handler(i, sig, h, atomic_load(&sigintr) >> i & 1 ? 0 : SA_RESTART, 1);
}
EXPORT sighandler_t bsd_signal(int sig, sighandler_t h) ALIAS(signal);
EXPORT sighandler_t ssignal(int sig, sighandler_t h) ALIAS(signal);

/* also what signal() is with strict ISO C (-std=c11): the headers redirect it here */
EXPORT sighandler_t __sysv_signal(int sig, sighandler_t h)
{
    int i = guarded_here(sig);
    if (i < 0) return unhidden(REAL(__sysv_signal)(sig, h));
    if (h == SIG_ERR) return errno = EINVAL, SIG_ERR;
    return set_handler(i, sig, h, SA_RESETHAND | SA_NODEFER, 0);
}
EXPORT sighandler_t sysv_signal(int sig, sighandler_t h) ALIAS(__sysv_signal);

/* SIG_HOLD blocks the signal in the view; any other action opens it. Returns SIG_HOLD where
 * the view blocked it, as glibc's does with the mask. */
EXPORT sighandler_t sigset(int sig, sighandler_t h)
{
    int i = guarded_here(sig);
    if (i < 0) return unhidden(REAL(sigset)(sig, h));
    unsigned long v = ftr_view_get();
    struct sigaction o;
    if (h == SIG_HOLD) {
        view_read(i, &o);
        ftr_view_set(v | FTR_GBIT(sig));
    } else {
        o.sa_handler = set_handler(i, sig, h, 0, 0);
        ftr_view_set(v & ~FTR_GBIT(sig));
    }
    return v & FTR_GBIT(sig) ? SIG_HOLD : o.sa_handler;
}

EXPORT int sigignore(int sig)
{
    int i = guarded_here(sig);
    if (i < 0) return REAL(sigignore)(sig);
    return set_handler(i, sig, SIG_IGN, 0, 0), 0;
}

EXPORT int siginterrupt(int sig, int interrupt)
{
    int i = guarded_here(sig);
    if (i < 0) return REAL(siginterrupt)(sig, interrupt);
    struct sigaction a;
    view_read(i, &a);
    if (interrupt) {
        atomic_fetch_or(&sigintr, 1u << i);
        a.sa_flags &= ~SA_RESTART;
    } else {
        atomic_fetch_and(&sigintr, ~(1u << i));
        a.sa_flags |= SA_RESTART;
    }
    set_view(i, &a, NULL);
    return 0;
}

/* ---- masks ---- */
/* A mask call: the kernel gets the set without the guarded signals, the view takes them, and
 * the old mask reads back with the view's. Newly blocked ones are in the view before the call
 * (one sent meanwhile is held), opened ones leave it after (and a held one is delivered). */
static int set_mask(int (*fn)(int, const sigset_t *, sigset_t *), int how, const sigset_t *set,
                    sigset_t *old)
{
    sigset_t buf;
    unsigned long v = ftr_view_get(), nv = v, g = set ? set->__val[0] & gmask : 0;
    if (set && (how == SIG_BLOCK || how == SIG_UNBLOCK || how == SIG_SETMASK))
        nv = how == SIG_BLOCK ? v | g : how == SIG_UNBLOCK ? v & ~g : g;
    /* (only a call that involves a guarded signal pays for strips()' system call) */
    if ((g || nv != v) && !strips()) return fn(how, set, old); /* a vfork child's own mask */
    if (g && how != SIG_UNBLOCK) {
        buf = *set;
        strip(&buf);
        set = &buf;
    }
    ftr_view_put(v | nv);
    int r = fn(how, set, old);
    if (r == 0 && old) old->__val[0] = (old->__val[0] & ~gmask) | v;
    ftr_view_set(r == 0 ? nv : v);
    return r;
}
EXPORT int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
    return set_mask(REAL(sigprocmask), how, set, old);
}
EXPORT int pthread_sigmask(int how, const sigset_t *set, sigset_t *old)
{
    return set_mask(REAL(pthread_sigmask), how, set, old);
}
EXPORT int sigpending(sigset_t *set)
{
    int r = REAL(sigpending)(set);
    unsigned long h = r == 0 ? ftr_view_held() : 0;
    if (h && strips()) set->__val[0] |= h;
    return r;
}

/* A wait with a mask of its own for its duration (sigsuspend, ppoll, pselect, epoll_pwait):
 * the view is the wait's meanwhile. Where the wait opens a guarded signal the view blocks,
 * one held is delivered at once (the call then fails with EINTR, as it would), and one sent
 * just before the wait must still end it: every signal but SIGSYS (a sandbox's trap of the
 * call itself) is blocked in the kernel from the check to the call, whose own mask then
 * replaces that one atomically. Only our code runs in that window: no int3 to meet. */
struct wait_mask {
    int on, blocked, delivered;
    unsigned long v;
    sigset_t saved;
};
/* @return the set to pass (ss stripped); w->delivered: a held signal was, instead of a wait */
static const sigset_t *wait_begin(const sigset_t *ss, sigset_t *buf, struct wait_mask *w)
{
    w->on = w->blocked = w->delivered = 0;
    if (!ss) return ss;
    *buf = *ss;
    unsigned long v = ftr_view_get(), nv = buf->__val[0] & gmask;
    if ((!v && !nv) || !strips()) return ss; /* nothing to do; a vfork child's own mask */
    w->on = 1;
    w->v = v;
    strip(buf);
    if (w->v & ~nv) {
        sigset_t all;
        sigfillset(&all);
        sigdelset(&all, SIGSYS);
        kmask(SIG_BLOCK, &all, &w->saved);
        w->blocked = 1;
        ftr_view_put(nv);
        if (ftr_view_held() & ~nv) {
            kmask(SIG_SETMASK, buf, NULL); /* the wait's mask, as the kernel's handler sees it */
            ftr_view_deliver_open();
            w->delivered = 1;
        }
        return buf;
    }
    ftr_view_put(nv);
    return buf;
}
static void wait_end(const struct wait_mask *w)
{
    if (!w->on) return;
    int e = errno;
    if (w->blocked) kmask(SIG_SETMASK, &w->saved, NULL);
    ftr_view_set(w->v);
    errno = e;
}
#define WAIT_CALL(ss, call_with_buf, intr_value)                                                   \
    do {                                                                                           \
        sigset_t buf_;                                                                             \
        struct wait_mask w_;                                                                       \
        const sigset_t *m_ = wait_begin((ss), &buf_, &w_);                                         \
        __typeof__(call_with_buf) r_ = (intr_value);                                               \
        if (!w_.delivered)                                                                         \
            r_ = call_with_buf;                                                                    \
        else                                                                                       \
            errno = EINTR;                                                                         \
        wait_end(&w_);                                                                             \
        return r_;                                                                                 \
    } while (0)

EXPORT int sigsuspend(const sigset_t *set)
{
    WAIT_CALL(set, REAL(sigsuspend)(m_), -1);
}
EXPORT int __sigsuspend(const sigset_t *set) ALIAS(sigsuspend);

/* the old interfaces' masks, signals 1..32 in an int */
#define LOW32(v) ((int)(unsigned)(v))
EXPORT int sighold(int sig)
{
    if (guarded_here(sig) < 0) return REAL(sighold)(sig);
    ftr_view_set(ftr_view_get() | FTR_GBIT(sig));
    return 0;
}
EXPORT int sigrelse(int sig)
{
    if (guarded_here(sig) < 0) return REAL(sigrelse)(sig);
    ftr_view_set(ftr_view_get() & ~FTR_GBIT(sig));
    return 0;
}
EXPORT int sigblock(int mask)
{
    if (!strips()) return REAL(sigblock)(mask);
    unsigned long v = ftr_view_get(), g = (unsigned)mask & gmask;
    ftr_view_put(v | g);
    int r = REAL(sigblock)(stripped_bits(mask));
    return (r & ~LOW32(gmask)) | LOW32(v);
}
EXPORT int sigsetmask(int mask)
{
    if (!strips()) return REAL(sigsetmask)(mask);
    unsigned long v = ftr_view_get(), g = (unsigned)mask & gmask;
    ftr_view_put(v | g);
    int r = REAL(sigsetmask)(stripped_bits(mask));
    ftr_view_set(g);
    return (r & ~LOW32(gmask)) | LOW32(v);
}
EXPORT int siggetmask(void)
{
    int r = REAL(siggetmask)();
    return strips() ? (r & ~LOW32(gmask)) | LOW32(ftr_view_get()) : r;
}
/* BSD sigpause(mask) and __sigpause(sig, 1) (X/Open's: the mask less sig) are sigsuspend() */
EXPORT int ftr_bsd_sigpause(int mask) /* exported as sigpause: BSD's, which takes a mask */
{
    sigset_t s;
    sigemptyset(&s);
    s.__val[0] = (unsigned)mask;
    return sigsuspend(&s);
}
EXPORT int __sigpause(int sig_or_mask, int is_sig)
{
    sigset_t s;
    if (!is_sig) return ftr_bsd_sigpause(sig_or_mask);
    if (sigprocmask(SIG_BLOCK, NULL, &s) < 0 || sigdelset(&s, sig_or_mask) < 0) return -1;
    return sigsuspend(&s);
}
EXPORT int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *ss)
{
    WAIT_CALL(ss, REAL(ppoll)(fds, n, t, m_), -1);
}
EXPORT int __ppoll_chk(struct pollfd *fds, nfds_t n, const struct timespec *t, const sigset_t *ss,
                       size_t fdslen)
{
    WAIT_CALL(ss, REAL(__ppoll_chk)(fds, n, t, m_, fdslen), -1);
}
EXPORT int pselect(int n, fd_set *r, fd_set *w, fd_set *e, const struct timespec *t,
                   const sigset_t *ss)
{
    WAIT_CALL(ss, REAL(pselect)(n, r, w, e, t, m_), -1);
}
EXPORT int epoll_pwait(int fd, struct epoll_event *ev, int max, int ms, const sigset_t *ss)
{
    WAIT_CALL(ss, REAL(epoll_pwait)(fd, ev, max, ms, m_), -1);
}
#if __GLIBC_PREREQ(2, 35)
EXPORT int epoll_pwait2(int fd, struct epoll_event *ev, int max, const struct timespec *t,
                        const sigset_t *ss)
{
    WAIT_CALL(ss, REAL(epoll_pwait2)(fd, ev, max, t, m_), -1);
}
#endif

/* A held guarded signal of set, taken (the thread's before the process's). @return it, or 0 */
static int take_waited(const sigset_t *set, siginfo_t *out)
{
    int n = atomic_load_explicit(&gcount, memory_order_acquire);
    if (!set || !(set->__val[0] & gmask) || !strips()) return 0;
    for (int i = 0; i < n; i++)
        if ((set->__val[0] & FTR_GBIT(gsig[i])) && ftr_view_take(i, out)) return gsig[i];
    return 0;
}
EXPORT int sigwait(const sigset_t *set, int *sig)
{
    siginfo_t si;
    int s = take_waited(set, &si);
    if (!s) return REAL(sigwait)(set, sig);
    *sig = s;
    return 0;
}
/* What glibc's sigtimedwait() gives for a signal it took: a thread-directed one's SI_TKILL
 * (raise() sends them) folded into SI_USER */
static void give_waited(const siginfo_t *si, siginfo_t *info)
{
    if (!info) return;
    *info = *si;
    if (info->si_code == SI_TKILL) info->si_code = SI_USER;
}
EXPORT int sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
    siginfo_t si;
    int s = take_waited(set, &si);
    if (!s) return REAL(sigwaitinfo)(set, info);
    give_waited(&si, info);
    return s;
}
EXPORT int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *t)
{
    siginfo_t si;
    int s = take_waited(set, &si);
    if (!s) return REAL(sigtimedwait)(set, info, t);
    give_waited(&si, info);
    return s;
}

EXPORT int signalfd(int fd, const sigset_t *mask, int flags)
{
    sigset_t buf;
    return REAL(signalfd)(fd, stripped(mask, &buf), flags);
}
/* The guarded signals of a new thread's mask go to its view (ftr_sigguard_start_view()), kept
 * meanwhile in the set's second word, past the kernel's 64 signals, tagged. */
#define ATTR_TAG 0x6674726d61736b31ul /* "ftrmask1" */
EXPORT int pthread_attr_setsigmask_np(pthread_attr_t *attr, const sigset_t *ss)
{
    sigset_t buf;
    if (!ss || !(ss->__val[0] & gmask) || !strips())
        return REAL(pthread_attr_setsigmask_np)(attr, ss);
    buf = *ss;
    strip(&buf);
    buf.__val[1] = ss->__val[0] & gmask;
    buf.__val[2] = ATTR_TAG;
    return REAL(pthread_attr_setsigmask_np)(attr, &buf);
}
EXPORT int pthread_attr_getsigmask_np(const pthread_attr_t *attr, sigset_t *ss)
{
    int r = REAL(pthread_attr_getsigmask_np)(attr, ss);
    if (r == 0 && ss->__val[2] == ATTR_TAG) {
        ss->__val[0] |= ss->__val[1];
        ss->__val[1] = ss->__val[2] = 0;
    }
    return r;
}
unsigned long ftr_sigguard_start_view(const pthread_attr_t *attr)
{
    sigset_t s;
    if (!attr || REAL(pthread_attr_getsigmask_np)(attr, &s) != 0) return ftr_view_get();
    return s.__val[2] == ATTR_TAG ? s.__val[1] & gmask : 0;
}

/* in place (see the top) */
static void strip_context(const ucontext_t *ucp)
{
    if (ucp && (ucp->uc_sigmask.__val[0] & gmask) && strips()) strip((sigset_t *)&ucp->uc_sigmask);
}
/* The view goes with a context swapcontext() saved: in its mask's second word, past the
 * kernel's 64 signals (which glibc's system call leaves alone), tagged. A context made by
 * getcontext() holds the kernel's mask, which never has a guarded signal: switching to it
 * leaves the view as it is. */
#define CTX_TAG 0x6674726374786d31ul /* "ftrctxm1" */
static void context_view(const ucontext_t *ucp)
{
    if (ucp && ucp->uc_sigmask.__val[2] == CTX_TAG && strips())
        ftr_view_set(ucp->uc_sigmask.__val[1] & gmask);
}
/* The tracer follows coroutine switches (hooks.c): which stack runs inside which. */
EXPORT int swapcontext(ucontext_t *restrict oucp, const ucontext_t *restrict ucp)
{
    unsigned long v = ftr_view_get();
    if (oucp && strips()) {
        oucp->uc_sigmask.__val[1] = v;
        oucp->uc_sigmask.__val[2] = CTX_TAG;
    }
    context_view(ucp);
    strip_context(ucp);
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    if (ucp) ftr_context_switch(here, (uintptr_t)ucp->uc_mcontext.gregs[REG_RSP]);
    int rc = REAL(swapcontext)(oucp, ucp);
    ftr_context_switch(here, 0); /* resumed (or the switch failed) */
    if (rc != 0) ftr_view_set(v);
    return rc;
}
EXPORT int setcontext(const ucontext_t *ucp)
{
    unsigned long v = ftr_view_get();
    context_view(ucp);
    strip_context(ucp);
    if (ucp)
        ftr_context_switch((uintptr_t)__builtin_frame_address(0),
                           (uintptr_t)ucp->uc_mcontext.gregs[REG_RSP]);
    int rc = REAL(setcontext)(ucp);
    ftr_view_set(v); /* it failed */
    return rc;
}

/* fork() runs the pthread_atfork handler; _Fork() does not */
EXPORT pid_t _Fork(void)
{
    pid_t r = REAL(_Fork)();
    if (r == 0 && atomic_load(&gpid)) after_fork_child();
    return r;
}
