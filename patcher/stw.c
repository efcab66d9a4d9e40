/*
 * stw.c - stop the world: park every other thread of this process while text is rewritten.
 *
 * Protocol, one generation g at a time (run_lock):
 *  1. List /proc/self/task; queue the handshake signal to each thread (but us and the ignored
 *     ones) with rt_tgsigqueueinfo, si_value = g. A handler invoked with any other value (a
 *     late delivery after a timeout, or a signal the program sent) returns at once.
 *  2. Each handler marks its thread parked and waits on a futex until g is released.
 *  3. When every listed thread is parked, list /proc/self/task again: a thread created by a
 *     clone() that finished just before its parent parked is signalled too. Repeat until no new
 *     thread appears: with everyone parked, nobody can create one.
 *  4. Run the callback (the rewrite). Then membarrier(SYNC_CORE) makes every thread serialise
 *     its instruction stream (Intel SDM 3A 8.1.3); each parked thread also runs CPUID.
 *  5. Release: each handler lets the ip callback move its saved ip out of a half-rewritten site,
 *     then returns; run() waits until every handler has left, so generations never overlap.
 * A thread that does not acknowledge within the timeout (it blocks the signal, or is stopped)
 * makes run() release the others and fail without calling the callback: never a deadlock.
 * The handler is installed with SA_RESTART; see docs/design.md for syscalls that the kernel
 * does not restart.
 */
#define _GNU_SOURCE
#include <fcntl.h>
#include <errno.h>
#include <inttypes.h>
#include <linux/futex.h>
#include <linux/membarrier.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "ftr_patcher.h"

#define MAX_TRACKED 4096 /* threads tracked by one handshake */
#define MAX_IGNORED 32

static int stw_signo;
static void (*request_fn)(int value); /* queued signals with a negative value: see header */
static int have_membarrier;
static pthread_mutex_t run_lock = PTHREAD_MUTEX_INITIALIZER;
static struct sigaction prev_action;

static atomic_int active_gen;  /* generation being run, 0 when none */
static atomic_int release_gen; /* handlers of this generation may leave */
static atomic_int n_parked, n_left, n_moved;
static ftr_stw_ip_fn cur_ipfn;
static void *cur_arg;

static pid_t tids[MAX_TRACKED];
static atomic_int acked[MAX_TRACKED];
static uint64_t asleep_switches[MAX_TRACKED]; /* context switches of a thread left asleep; 0: not */
static atomic_int ntids; /* published before the signal is sent: the handler scans tids */
static pid_t ignored[MAX_IGNORED];
static int nignored;

/* While threads are parked, one of them may hold a libc lock (malloc's, stdio's): from the
 * first signal on, this file uses system calls and stack buffers only. */
static ssize_t read_proc(pid_t tid, const char *what, char *buf, size_t len)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/%s", (int)tid, what);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return -1;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    return n;
}

static uint64_t field_after(const char *text, const char *key)
{
    const char *p = strstr(text, key);
    return p ? strtoull(p + strlen(key), NULL, 10) : 0;
}

/* voluntary + involuntary context switches of a thread: unchanged means it did not run */
static uint64_t context_switches(pid_t tid)
{
    char buf[4096];
    if (read_proc(tid, "status", buf, sizeof buf) <= 0) return 0;
    return field_after(buf, "\nvoluntary_ctxt_switches:") +
           field_after(buf, "nonvoluntary_ctxt_switches:");
}

static long futex(atomic_int *addr, int op, int val, const struct timespec *ts)
{
    return syscall(SYS_futex, addr, op, val, ts, NULL, 0);
}

static inline void serialise(void)
{
    unsigned a = 0, b, c = 0, d;
    __asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d) : : "memory");
}

static void handler(int sig, siginfo_t *si, void *ucv)
{
    int saved_errno = errno;
    if (si->si_code == SI_QUEUE && si->si_value.sival_int < 0 && request_fn) {
        request_fn(si->si_value.sival_int); /* another process asks for something */
        errno = saved_errno;
        return;
    }
    int gen = si->si_code == SI_QUEUE && si->si_pid == getpid() ? si->si_value.sival_int : 0;
    if (gen == 0 || gen != atomic_load(&active_gen)) {
        /* Not ours (or too late): hand a foreign signal to whatever the program installed. */
        if (gen == 0 && (prev_action.sa_flags & SA_SIGINFO) && prev_action.sa_sigaction)
            prev_action.sa_sigaction(sig, si, ucv);
        else if (gen == 0 && !(prev_action.sa_flags & SA_SIGINFO) &&
                 prev_action.sa_handler != SIG_DFL && prev_action.sa_handler != SIG_IGN)
            prev_action.sa_handler(sig);
        errno = saved_errno;
        return;
    }
    pid_t self = (pid_t)syscall(SYS_gettid);
    for (int i = 0, n = atomic_load(&ntids); i < n; i++)
        if (tids[i] == self) atomic_store(&acked[i], 1);
    atomic_fetch_add(&n_parked, 1);
    futex(&n_parked, FUTEX_WAKE_PRIVATE, 1, NULL);
    while (atomic_load(&release_gen) != gen)
        futex(&release_gen, FUTEX_WAIT_PRIVATE, atomic_load(&release_gen), NULL);
    serialise();
    if (cur_ipfn) {
        ucontext_t *uc = ucv;
        uint64_t ip = (uint64_t)uc->uc_mcontext.gregs[REG_RIP];
        uint64_t nip = cur_ipfn(cur_arg, ip);
        if (nip != ip) {
            uc->uc_mcontext.gregs[REG_RIP] = (greg_t)nip;
            atomic_fetch_add(&n_moved, 1);
        }
    }
    atomic_fetch_add(&n_left, 1);
    futex(&n_left, FUTEX_WAKE_PRIVATE, 1, NULL);
    errno = saved_errno;
}

int ftr_stw_init(int signo, char *err, size_t errlen)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    if (sigaction(signo, &sa, &prev_action) < 0) {
        snprintf(err, errlen, "cannot install the handler of signal %d: %s", signo,
                 strerror(errno));
        return -1;
    }
    stw_signo = signo;
    have_membarrier =
        syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0;
    return 0;
}

void ftr_stw_on_request(void (*fn)(int value))
{
    request_fn = fn;
}

void ftr_stw_forget_ignored(void)
{
    nignored = 0;
}

void ftr_stw_ignore(int tid)
{
    for (int i = 0; i < nignored; i++)
        if (ignored[i] == tid) return;
    if (nignored < MAX_IGNORED) ignored[nignored++] = tid;
}

static int is_listed(pid_t tid)
{
    for (int i = 0, n = atomic_load(&ntids); i < n; i++)
        if (tids[i] == tid) return 1;
    for (int i = 0; i < nignored; i++)
        if (ignored[i] == tid) return 1;
    return 0;
}

/* A thread blocked in a system call runs no user code until it returns, and on its way back the
 * kernel serialises its instruction stream (membarrier SYNC_CORE): it is left asleep instead of
 * being signalled, because a handler would make calls like poll(), epoll_wait(), nanosleep()
 * fail with EINTR even under SA_RESTART. @return its context switch count (+1, never 0), or 0
 * when it is not blocked in a system call. */
static uint64_t blocked_in_syscall(pid_t tid)
{
    char buf[256];
    if (read_proc(tid, "syscall", buf, sizeof buf) <= 0 || buf[0] < '0' || buf[0] > '9')
        return 0; /* "running", or "-1 ..." (blocked, but not in a system call) */
    return context_switches(tid) + 1;
}

/* Signals every thread not yet listed. @return number signalled, or -1 (too many threads). */
struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

static int signal_new_threads(int gen, pid_t self)
{
    int dfd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return -1;
    int added = 0;
    pid_t pid = getpid();
    char dents[4096] __attribute__((aligned(8)));
    long nread;
    while (added >= 0 && (nread = syscall(SYS_getdents64, dfd, dents, sizeof dents)) > 0)
        for (long off = 0; off < nread;) {
            struct linux_dirent64 *de = (struct linux_dirent64 *)(dents + off);
            off += de->d_reclen;
            pid_t tid = (pid_t)atoi(de->d_name);
            if (tid <= 0 || tid == self || is_listed(tid)) continue;
            if (atomic_load(&ntids) == MAX_TRACKED) {
                added = -1;
                break;
            }
            siginfo_t si;
            memset(&si, 0, sizeof si);
            si.si_signo = stw_signo;
            si.si_code = SI_QUEUE;
            si.si_pid = pid;
            si.si_uid = getuid();
            si.si_value.sival_int = gen;
            int i = atomic_load(&ntids);
            uint64_t sw = blocked_in_syscall(tid);
            asleep_switches[i] = sw;
            atomic_store(&acked[i], sw != 0);
            tids[i] = tid;
            atomic_store(&ntids, i + 1);
            if (sw) continue; /* counted as stopped: see blocked_in_syscall() */
            if (syscall(SYS_rt_tgsigqueueinfo, pid, tid, stw_signo, &si) == 0)
                added++;
            else
                tids[i] = 0; /* it exited meanwhile */
        }
    close(dfd);
    return added;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int thread_alive(pid_t tid)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d", (int)tid);
    return access(path, F_OK) == 0;
}

/* Waits until every listed thread acknowledged (or exited). @return 0, or the tid that did not
 * answer in time. */
static pid_t wait_parked(uint64_t deadline)
{
    for (;;) {
        int missing = 0;
        pid_t culprit = 0;
        for (int i = 0, n = atomic_load(&ntids); i < n; i++) {
            if (tids[i] && !atomic_load(&acked[i])) {
                if (!thread_alive(tids[i])) {
                    tids[i] = 0; /* exited before it could answer */
                    continue;
                }
                missing++;
                culprit = tids[i];
            }
        }
        if (!missing) return 0;
        if (now_ns() > deadline) return culprit;
        int seen = atomic_load(&n_parked);
        struct timespec ts = {0, 200 * 1000};
        futex(&n_parked, FUTEX_WAIT_PRIVATE, seen, &ts);
    }
}

static void release(int gen)
{
    atomic_store(&release_gen, gen);
    futex(&release_gen, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL);
    for (int left; (left = atomic_load(&n_left)) < atomic_load(&n_parked);)
        futex(&n_left, FUTEX_WAIT_PRIVATE, left, NULL);
}

int ftr_stw_run(ftr_stw_fn fn, ftr_stw_ip_fn ipfn, void *arg, unsigned timeout_ms,
                struct ftr_stw_stats *st, char *err, size_t errlen)
{
    static int gen_counter;
    if (!stw_signo) {
        snprintf(err, errlen, "stop-the-world handshake not initialised");
        return -1;
    }
    pthread_mutex_lock(&run_lock);
    uint64_t t0 = now_ns(), deadline = t0 + (uint64_t)timeout_ms * 1000000u;
    int gen = ++gen_counter;
    if (gen_counter == 0x7fffffff) gen_counter = 0;
    pid_t self = (pid_t)syscall(SYS_gettid);
    atomic_store(&ntids, 0);
    atomic_store(&n_parked, 0);
    atomic_store(&n_left, 0);
    atomic_store(&n_moved, 0);
    cur_ipfn = ipfn;
    cur_arg = arg;
    atomic_store(&active_gen, gen);

    int rc = -1;
    pid_t culprit = 0;
    int added;
    while ((added = signal_new_threads(gen, self)) > 0)
        if ((culprit = wait_parked(deadline)) != 0) break;
    if (added < 0)
        snprintf(err, errlen, "too many threads to stop (more than %d)", MAX_TRACKED);
    else if (culprit)
        snprintf(err, errlen, "thread %d did not stop within %u ms (is signal %d blocked?)",
                 (int)culprit, timeout_ms, stw_signo);
    else {
        rc = fn(arg);
        if (have_membarrier)
            syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0);
        serialise();
    }
    unsigned asleep = 0, woke = 0;
    for (int i = 0, n = atomic_load(&ntids); i < n; i++) {
        if (!tids[i] || !asleep_switches[i]) continue;
        asleep++;
        /* it ran while we wrote: it could have met a half-written site (never seen so far) */
        woke += context_switches(tids[i]) + 1 != asleep_switches[i];
    }
    if (rc < 0 && (added < 0 || culprit)) cur_ipfn = NULL; /* nothing was rewritten */
    atomic_store(&active_gen, 0);                          /* late deliveries return at once */
    release(gen);
    if (st) {
        st->threads = (unsigned)atomic_load(&n_parked);
        st->asleep = asleep;
        st->woke = woke;
        st->moved_ips = (unsigned)atomic_load(&n_moved);
        st->ns = now_ns() - t0;
    }
    pthread_mutex_unlock(&run_lock);
    return rc;
}
