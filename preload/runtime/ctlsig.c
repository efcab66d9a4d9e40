/*
 * ctlsig.c - signals sent to the control server's thread alone.
 *
 * The server blocks every signal (a process-directed one is the program's threads' to take).
 * But a program that walks /proc/self/task and signals each thread (a thread dumper, a
 * stop-the-world collector, a checkpointer) and waits for each handler to check in would wait
 * for it in vain. So the server also watches a signalfd, in its own descriptor table, and takes
 * what was sent to it alone: the signals pending on its thread (SigPnd of
 * /proc/thread-self/status), never those pending for the process (ShdPnd: the program's). For
 * each it does what the kernel would have done on a thread that had not blocked it: the
 * program's handler, on this thread; nothing if ignored or ignored by default; the default
 * action's stop or death, sent on to the process, where our handler for it (init.c) ends the
 * trace first.
 *
 * The signalfd's mask leaves out the signals pending for the process: a signal every program
 * thread blocks (one a sigwait() thread takes) would make it readable without end. It is
 * recomputed at every wake-up and at least once a second.
 *
 * The watcher of a main thread's pthread_exit() (init.c) does the same from the program's
 * descriptor table (its exit(0) flushes the program's stdio there): its two descriptors are then
 * moved high and guarded (fdguard.c), and read under the guard's lock, never while the program's
 * handler runs (it may close or dup2 one of them: the guard moves ours away first).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

#include "sigguard.h"
#include "tracer.h"

/* The calling thread's: its signalfd and /proc/thread-self/status, and whether they are in the
 * program's descriptor table (shared) */
static __thread int sig_fd __attribute__((tls_model("initial-exec"))) = -1;
static __thread int status_fd __attribute__((tls_model("initial-exec"))) = -1;
static __thread int shared __attribute__((tls_model("initial-exec")));

static void lock(void)
{
    if (shared) ftr_fd_lock();
}

static void unlock(void)
{
    if (shared) ftr_fd_unlock();
}

/* This thread's pending signals (mine) and the process's (shared), as bit sig - 1.
 * @return 0, -1. Under lock(). */
static int pending(uint64_t *mine, uint64_t *shared_pnd)
{
    char buf[4096];
    ssize_t n = status_fd >= 0 ? pread(status_fd, buf, sizeof buf - 1, 0) : -1;
    if (n <= 0) return -1;
    buf[n] = 0;
    const char *p = strstr(buf, "\nSigPnd:"), *q = strstr(buf, "\nShdPnd:");
    if (!p || !q) return -1;
    *mine = strtoull(p + 8, NULL, 16);
    *shared_pnd = strtoull(q + 8, NULL, 16);
    return 0;
}

static void set_mask(int fd, uint64_t leave_out)
{
    sigset_t m;
    sigfillset(&m);
    sigdelset(&m, SIGKILL);
    sigdelset(&m, SIGSTOP);
    for (int sig = 1; sig <= 64; sig++)
        if (leave_out >> (sig - 1) & 1) sigdelset(&m, sig);
    signalfd(fd, &m, 0);
}

/* fd moved high and guarded, when in the program's table */
static int own(int fd, int *var)
{
    *var = fd;
    if (fd < 0 || !shared) return fd;
    *var = ftr_fd_high(fd);
    ftr_fd_protect(var);
    return *var;
}

/* /proc/thread-self/status, opened at first use (not under lock(): the guard's own) */
static void status_open(void)
{
    if (status_fd < 0) own(open("/proc/thread-self/status", O_RDONLY | O_CLOEXEC), &status_fd);
}

int ftr_ctlsig_open(int in_program_table)
{
    sigset_t none;
    sigemptyset(&none);
    shared = in_program_table;
    own(signalfd(-1, &none, SFD_CLOEXEC | SFD_NONBLOCK), &sig_fd);
    /* every signal to start with: in the program's table, the status file is read (and
     * opened) at the first wake-up, not here (a fork child's parked server would pay for it at
     * every fork); the server opens it now, before the program could chroot() where there is
     * no /proc */
    if (sig_fd >= 0) set_mask(sig_fd, 0);
    if (sig_fd >= 0 && !shared) status_open();
    return sig_fd;
}

int ftr_ctlsig_fd(void)
{
    return __atomic_load_n(&sig_fd, __ATOMIC_RELAXED);
}

void ftr_ctlsig_close(void)
{
    int *vars[2] = {&sig_fd, &status_fd};
    for (int i = 0; i < 2; i++) {
        lock(); /* closed under the guard's lock: the number is ours until then */
        if (*vars[i] >= 0) syscall(SYS_close, *vars[i]);
        *vars[i] = -1;
        unlock();
        if (shared) ftr_fd_unprotect(vars[i]);
    }
}

/* Without the status file (a chroot() without /proc), nothing is taken: a signal pending for
 * the process would keep the signalfd readable, and the thread spinning */
#define TAKE_NOTHING (~(uint64_t)0)

void ftr_ctlsig_refresh(void)
{
    uint64_t mine, shared_pnd;
    status_open();
    lock();
    if (sig_fd >= 0)
        set_mask(sig_fd, pending(&mine, &shared_pnd) == 0 ? shared_pnd & ~mine : TAKE_NOTHING);
    unlock();
}

/* The default action of sig: 0 ignore, 1 stop, 2 end the process */
static int default_action(int sig)
{
    switch (sig) {
    case SIGCHLD:
    case SIGCONT:
    case SIGURG:
    case SIGWINCH:
        return 0;
    case SIGTSTP:
    case SIGTTIN:
    case SIGTTOU:
        return 1;
    default:
        return 2;
    }
}

/* What the kernel would have done had this thread not blocked sig */
static void act(int sig, const struct signalfd_siginfo *ssi)
{
    struct sigaction sa;
    if (sigaction(sig, NULL, &sa) != 0) return; /* the program's view (sigguard.c) */
    if (sa.sa_handler == SIG_IGN) return;
    if (sa.sa_handler == SIG_DFL) {
        int what = default_action(sig);
        if (what == 1) syscall(SYS_kill, (pid_t)ftr_g.pid, SIGSTOP);
        if (what == 2) syscall(SYS_kill, (pid_t)ftr_g.pid, sig); /* a program thread dies of it */
        return;
    }
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = sig;
    si.si_code = ssi->ssi_code;
    si.si_errno = ssi->ssi_errno;
    si.si_pid = (pid_t)ssi->ssi_pid;
    si.si_uid = ssi->ssi_uid;
    si.si_value.sival_ptr = (void *)(uintptr_t)ssi->ssi_ptr;
    if (sa.sa_flags & SA_RESETHAND) {
        struct sigaction dfl = {.sa_handler = SIG_DFL};
        sigaction(sig, &dfl, NULL);
    }
    if (sa.sa_flags & SA_SIGINFO) {
        ucontext_t uc;
        getcontext(&uc);
        sa.sa_sigaction(sig, &si, &uc);
    } else {
        sa.sa_handler(sig);
    }
}

void ftr_ctlsig_take(void)
{
    uint64_t mine, shared_pnd;
    status_open();
    lock();
    int got = sig_fd >= 0 && pending(&mine, &shared_pnd) == 0;
    if (!got && sig_fd >= 0) set_mask(sig_fd, TAKE_NOTHING);
    unlock();
    if (!got) return;
    int saved = errno;
    for (int sig = 1; sig <= 64; sig++) {
        if (!(mine >> (sig - 1) & 1) || sig == SIGKILL || sig == SIGSTOP) continue;
        sigset_t one;
        sigemptyset(&one);
        sigaddset(&one, sig);
        struct signalfd_siginfo ssi;
        lock();
        signalfd(sig_fd, &one, 0); /* dequeues this thread's own first, then the process's */
        ssize_t n = read(sig_fd, &ssi, sizeof ssi);
        unlock();
        if (n == (ssize_t)sizeof ssi) act(sig, &ssi); /* the program's handler: under no lock */
    }
    errno = saved;
    ftr_ctlsig_refresh();
}
