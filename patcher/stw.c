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
 * A thread that does not acknowledge within the timeout (it is stopped, or blocks the signal
 * with a raw system call) makes run() release the others and fail without calling the
 * callback: never a deadlock. Threads that cannot answer are seen before they are signalled:
 * a zombie (a main thread after pthread_exit()) runs nothing and is left out; a stopped thread
 * or one blocking the signal makes run() fail at once instead of after the timeout.
 * Threads blocked in a system call are not signalled (a handler would make poll(),
 * nanosleep() & co fail with EINTR): the callback must be safe against a thread that wakes up
 * meanwhile (text_poke.c's live batches are), and the handshake only guarantees that no
 * *running* thread is stopped inside what the callback rewrites.
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
/* the value our handshake signals carry: a tag and a generation number */
#define GEN_TAG 0x46540000
#define GEN_MASK 0xffff
/* a thread running with the signal blocked is waited for this long (a thread being started
 * unblocks within microseconds; one that blocks it for good makes the handshake fail soon) */
#define BLOCKED_GRACE_NS (50 * 1000 * 1000ull) /* of the thread's own CPU time */

static int stw_signo;
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
static uint8_t blocking[MAX_TRACKED];         /* it had the signal blocked when signalled */
static uint64_t blocking_cpu[MAX_TRACKED];    /* and had run this long (ns) */
static atomic_int ntids; /* published before the signal is sent: the handler scans tids */
/* Our own threads, which never run patched code. Added to from any thread (the constructor
 * adds the writer while the control server adds itself): a slot is claimed with one atomic
 * add, then filled (a claimed slot still 0 matches no thread for that moment). */
/* Forgotten in a fork child: on the preload's fork page (preload/forkpage.h), like the rest of
 * what a fork writes. */
#define FORK_PAGE __attribute__((section("ftr_fork_page")))
static _Atomic pid_t ignored[MAX_IGNORED] FORK_PAGE;
static atomic_int nignored FORK_PAGE;

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
    /* ours: queued by this process with a value that carries our tag (a program that queues
     * this signal to itself with a value of its own is passed on) */
    int gen = si->si_code == SI_QUEUE && si->si_pid == (pid_t)syscall(SYS_getpid) &&
                      (si->si_value.sival_int & ~GEN_MASK) == GEN_TAG
                  ? si->si_value.sival_int
                  : 0;
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

int ftr_stw_init(int signo, int (*install)(int sig, const struct sigaction *sa), char *err,
                 size_t errlen)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = handler;
    sa.sa_flags = SA_SIGINFO | SA_RESTART;
    sigfillset(&sa.sa_mask);
    sigdelset(&sa.sa_mask, SIGTRAP); /* a breakpoint batch may run while a thread is parked */
    sigdelset(&sa.sa_mask, SIGSEGV);
    sigdelset(&sa.sa_mask, SIGBUS);
    int rc = install ? install(signo, &sa) : sigaction(signo, &sa, &prev_action);
    if (rc < 0) {
        snprintf(err, errlen, "cannot install the handler of signal %d: %s", signo,
                 strerror(errno));
        return -1;
    }
    stw_signo = signo;
    ftr_bp_init(NULL, 0); /* membarrier(SYNC_CORE), for the serialisation after the callback */
    return 0;
}

void ftr_stw_forget_ignored(void)
{
    for (int i = 0; i < MAX_IGNORED; i++)
        atomic_store(&ignored[i], 0);
    atomic_store(&nignored, 0);
}

static int ignored_count(void)
{
    int n = atomic_load(&nignored);
    return n < MAX_IGNORED ? n : MAX_IGNORED;
}

void ftr_stw_ignore(int tid)
{
    for (int i = 0, n = ignored_count(); i < n; i++)
        if (atomic_load(&ignored[i]) == tid) return;
    int i = atomic_fetch_add(&nignored, 1);
    if (i < MAX_IGNORED) atomic_store(&ignored[i], tid);
}

static int is_listed(pid_t tid)
{
    for (int i = 0, n = atomic_load(&ntids); i < n; i++)
        if (tids[i] == tid) return 1;
    for (int i = 0, n = ignored_count(); i < n; i++)
        if (atomic_load(&ignored[i]) == tid) return 1;
    return 0;
}

/* What the handshake must know of a thread before it signals it. */
enum tstate { T_RUN, T_SYSCALL, T_ZOMBIE, T_CANNOT };
struct tinfo {
    enum tstate st;
    uint64_t switches; /* context switches (+1, never 0), for a thread left in its system call */
    char why[48];      /* T_CANNOT: why it cannot be parked */
    int blocked;       /* T_RUN, with the handshake signal blocked */
};

static int sig_in_mask(const char *text, const char *key, int sig)
{
    const char *p = strstr(text, key);
    if (!p) return 0;
    p += strlen(key);
    while (*p == ' ' || *p == '\t')
        p++;
    unsigned long long m = strtoull(p, NULL, 16);
    return sig >= 1 && sig <= 64 && (m >> (sig - 1)) & 1;
}

/* Time the thread has spent on a CPU (ns; /proc/.../schedstat), 0 when unknown. */
static uint64_t cpu_ns(pid_t tid)
{
    char buf[128];
    if (read_proc(tid, "schedstat", buf, sizeof buf) <= 0) return 0;
    return strtoull(buf, NULL, 10);
}

/* A thread blocked in a system call runs no user code until it returns, and on its way back the
 * kernel serialises its instruction stream (membarrier SYNC_CORE): it is left asleep instead of
 * being signalled, because a handler would make calls like poll(), epoll_wait(), nanosleep()
 * fail with EINTR even under SA_RESTART. */
static void inspect(pid_t tid, struct tinfo *ti)
{
    char st[4096], sc[256];
    memset(ti, 0, sizeof *ti);
    ti->st = T_RUN;
    if (read_proc(tid, "status", st, sizeof st) <= 0) return; /* gone: signalling says ESRCH */
    const char *state = strstr(st, "\nState:");
    char c = state ? state[8 + strspn(state + 8, " \t")] : 'R';
    if (c == 'Z' || c == 'X') {
        ti->st = T_ZOMBIE;
        return;
    }
    if (c == 'T' || c == 't') {
        ti->st = T_CANNOT;
        snprintf(ti->why, sizeof ti->why, "is stopped");
        return;
    }
    if (read_proc(tid, "syscall", sc, sizeof sc) > 0 && sc[0] >= '0' && sc[0] <= '9') {
        ti->st = T_SYSCALL; /* not "running", not "-1 ..." (blocked, but not in a syscall) */
        ti->switches = field_after(st, "\nvoluntary_ctxt_switches:") +
                       field_after(st, "nonvoluntary_ctxt_switches:") + 1;
        return;
    }
    /* running with the signal blocked: a thread pthread_create() has not finished starting
     * does so for a few microseconds; signalled anyway, it gets a short grace (wait_parked) */
    ti->blocked = sig_in_mask(st, "\nSigBlk:", stw_signo);
}

/* Signals every thread not yet listed. @return number signalled, or -1 (too many threads). */
struct linux_dirent64 {
    uint64_t d_ino;
    int64_t d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* why a handshake cannot be done (set by signal_new_threads) */
static char cannot[96];

static int queue_signal(pid_t pid, pid_t tid, siginfo_t *si)
{
    for (int tries = 0;; tries++) {
        if (syscall(SYS_rt_tgsigqueueinfo, pid, tid, stw_signo, si) == 0) return 0;
        if (errno != EAGAIN || tries == 200) return -1;
        /* the queue of pending signals is full (RLIMIT_SIGPENDING): wait for room */
        struct timespec ts = {0, 100 * 1000};
        nanosleep(&ts, NULL);
    }
}

static int signal_new_threads(int gen, pid_t self)
{
    int dfd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return -1;
    int added = 0;
    pid_t pid = (pid_t)syscall(SYS_getpid);
    char dents[4096] __attribute__((aligned(8)));
    long nread;
    while (added >= 0 && (nread = syscall(SYS_getdents64, dfd, dents, sizeof dents)) > 0)
        for (long off = 0; off < nread;) {
            struct linux_dirent64 *de = (struct linux_dirent64 *)(dents + off);
            off += de->d_reclen;
            pid_t tid = (pid_t)atoi(de->d_name);
            if (tid <= 0 || tid == self || is_listed(tid)) continue;
            if (atomic_load(&ntids) == MAX_TRACKED) {
                snprintf(cannot, sizeof cannot, "too many threads to stop (more than %d)",
                         MAX_TRACKED);
                added = -1;
                break;
            }
            struct tinfo ti;
            inspect(tid, &ti);
            if (ti.st == T_CANNOT) {
                snprintf(cannot, sizeof cannot, "thread %d %s", (int)tid, ti.why);
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
            asleep_switches[i] = ti.switches;
            blocking[i] = (uint8_t)ti.blocked;
            if (ti.blocked) blocking_cpu[i] = cpu_ns(tid);
            atomic_store(&acked[i], ti.st != T_RUN);
            tids[i] = tid;
            atomic_store(&ntids, i + 1);
            if (ti.st == T_ZOMBIE) {
                tids[i] = 0; /* runs nothing, ever */
                continue;
            }
            if (ti.st == T_SYSCALL) continue; /* counted as stopped: see inspect() */
            if (queue_signal(pid, tid, &si) == 0)
                added++;
            else if (errno == ESRCH)
                tids[i] = 0; /* it exited meanwhile */
            else {
                snprintf(cannot, sizeof cannot, "cannot signal thread %d: %s", (int)tid,
                         strerror(errno));
                added = -1;
                break;
            }
        }
    close(dfd);
    return added;
}

/* Calls fn(tid, arg) for every thread of this process but the caller and the ignored ones,
 * until fn returns non-zero. @return that value, 0, or -1 when /proc cannot be read. */
static int for_each_in(int given, int (*fn)(pid_t tid, void *arg), void *arg)
{
    int dfd = given >= 0 ? given : open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd < 0) return -1;
    if (given >= 0 && lseek(dfd, 0, SEEK_SET) != 0) return -1;
    pid_t self = (pid_t)syscall(SYS_gettid);
    int rc = 0;
    char dents[4096] __attribute__((aligned(8)));
    long nread = 0;
    while (!rc && (nread = syscall(SYS_getdents64, dfd, dents, sizeof dents)) > 0)
        for (long off = 0; off < nread && !rc;) {
            struct linux_dirent64 *de = (struct linux_dirent64 *)(dents + off);
            off += de->d_reclen;
            pid_t tid = (pid_t)atoi(de->d_name);
            int ign = tid <= 0 || tid == self;
            for (int i = 0, n = ignored_count(); !ign && i < n; i++)
                ign = atomic_load(&ignored[i]) == tid;
            if (!ign) rc = fn(tid, arg);
        }
    if (!rc && nread < 0) rc = -1; /* not "no thread left": the list was not read whole */
    if (given < 0) close(dfd);
    return rc;
}

static int for_each_other_thread(int (*fn)(pid_t tid, void *arg), void *arg)
{
    return for_each_in(-1, fn, arg);
}

static int count_live(pid_t tid, void *arg)
{
    char st[512];
    if (read_proc(tid, "stat", st, sizeof st) > 0) {
        const char *p = strrchr(st, ')'); /* "tid (comm) S ..." */
        if (p && (p[2] == 'Z' || p[2] == 'X')) return 0;
    }
    ++*(int *)arg;
    return 0;
}

int ftr_stw_others(void)
{
    int others = 0;
    return for_each_other_thread(count_live, &others) < 0 ? -1 : others;
}

struct listed {
    pid_t leader;
    int n;
};

static int count_listed(pid_t tid, void *arg)
{
    struct listed *l = arg;
    if (tid != l->leader) l->n++;
    return 0;
}

int ftr_stw_others_listed(int dfd, pid_t leader)
{
    struct listed l = {leader, 0};
    return for_each_in(dfd, count_listed, &l) < 0 ? -1 : l.n;
}

/* @return tid when it runs (not asleep in a system call, not a zombie) with *sig blocked */
static int runs_blocking(pid_t tid, void *arg)
{
    char st[4096], sc[64];
    if (read_proc(tid, "status", st, sizeof st) <= 0 || !sig_in_mask(st, "\nSigBlk:", *(int *)arg))
        return 0;
    const char *state = strstr(st, "\nState:");
    char c = state ? state[8 + strspn(state + 8, " \t")] : 'R';
    if (c == 'Z' || c == 'X') return 0;
    /* asleep in a system call: a helper thread of the C library (timers' waits in sigwaitinfo)
     * that runs no program code, or one that will unblock before it does */
    if (read_proc(tid, "syscall", sc, sizeof sc) > 0 && sc[0] >= '0' && sc[0] <= '9') return 0;
    return (int)tid;
}

int ftr_stw_blocking_running(int sig)
{
    int found = for_each_other_thread(runs_blocking, &sig);
    return found > 0 ? found : 0;
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
        int missing = 0, all_blocking = 1;
        pid_t culprit = 0;
        for (int i = 0, n = atomic_load(&ntids); i < n; i++) {
            if (tids[i] && !atomic_load(&acked[i])) {
                if (!thread_alive(tids[i])) {
                    tids[i] = 0; /* exited before it could answer */
                    continue;
                }
                if (blocking[i]) {
                    /* it cannot take the signal: once it sleeps in a system call, it counts as
                     * stopped like the threads left asleep (the signal, late, is dropped) */
                    struct tinfo ti;
                    inspect(tids[i], &ti);
                    if (ti.st == T_SYSCALL || ti.st == T_ZOMBIE) {
                        asleep_switches[i] = ti.switches;
                        if (ti.st == T_ZOMBIE) tids[i] = 0;
                        atomic_store(&acked[i], 1);
                        continue;
                    }
                    /* a thread still starting has not run yet: only its own CPU time counts */
                    if (cpu_ns(tids[i]) - blocking_cpu[i] < BLOCKED_GRACE_NS) all_blocking = 0;
                } else {
                    all_blocking = 0;
                }
                missing++;
                culprit = tids[i];
            }
        }
        if (!missing) return 0;
        if (all_blocking) {
            snprintf(cannot, sizeof cannot, "thread %d blocks signal %d", (int)culprit, stw_signo);
            return culprit;
        }
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
    gen_counter = (gen_counter + 1) & GEN_MASK;
    if (!gen_counter) gen_counter = 1;
    int gen = GEN_TAG | gen_counter;
    pid_t self = (pid_t)syscall(SYS_gettid);
    cannot[0] = 0;
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
        snprintf(err, errlen, "%s", cannot[0] ? cannot : "cannot list this process's threads");
    else if (culprit && cannot[0])
        snprintf(err, errlen, "%s", cannot);
    else if (culprit)
        snprintf(err, errlen, "thread %d did not stop within %u ms (is signal %d blocked?)",
                 (int)culprit, timeout_ms, stw_signo);
    else {
        rc = fn(arg);
        ftr_bp_sync();
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
