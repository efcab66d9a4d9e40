/* sleeper.c - a server-like program whose threads wait in blocking system calls over and over,
 * counting every EINTR and every early return, for inject_tests.py: injecting a library into it
 * must change nothing it can see.
 *
 * usage: sleeper DIR [all|simple|regs|unsafe]
 * Each thread loops until DIR/stop appears. "all" (the default):
 *   main            nanosleep 2 ms (glibc: clock_nanosleep), and looks for DIR/stop
 *   nanosleep       the nanosleep system call itself, 3 ms
 *   abstime         clock_nanosleep to an absolute deadline 2 ms ahead
 *   poll            poll, 4 ms, on a pipe nobody writes
 *   select          select, 3 ms, on a pipe nobody writes
 *   read            read of one byte from a pipe a feeder thread writes every 1 ms (the feeder
 *                   waits in pthread_cond_timedwait: a futex, never a candidate)
 *   long            nanosleep 100 ms
 *   accept          a blocking accept on a Unix socket nobody connects to (until the end)
 *   regs            the nanosleep system call, 3 ms, with every register the kernel keeps
 *                   across a call (rdx, r8-r10, rdi, rsi, ymm0-15) checked after it
 *   sigsuspend      sigsuspend, which swaps the signal mask, until SIGUSR2 (the feeder sends it
 *                   every 5 ms); early if it returned for anything else, or if the mask after
 *                   it is not the one before
 *   ppoll-mask      ppoll, 3 ms, given a signal mask (its own)
 *   pselect-mask    pselect, 3 ms, given a signal mask (its own)
 *   accept-timeout  accept with a 5 ms receive timeout: EINTR at any stop, never to be chosen
 *   epoll           epoll_wait, 3 ms: EINTR at any stop, never to be chosen
 * "simple": the main thread alone. "regs": the regs loop alone, in the main thread. "only:NAME":
 * thread NAME alone (and the feeder), the main thread waiting in pthread_cond_timedwait.
 * "unsafe": threads that wait only where the injector must not stop them: the main thread in
 * pthread_cond_timedwait (futex), epoll, accept-timeout, and
 *   sigtimedwait    rt_sigtimedwait, 3 ms, for a signal nobody sends (EINTR at any stop)
 *   recv            recv on a socket with a 3 ms receive timeout (EINTR at any stop)
 *   handler         nanosleep, 3 ms, in a SIGUSR1 handler (which may have interrupted malloc)
 *   altstack        the same, on an alternate signal stack (malloc'ed, 64 KiB)
 * SIGRTMIN+1 is unblocked in the read and accept threads only, and handled (SA_RESTART): both
 * calls restart after the handler. A sleep is early if it returned before its time
 * (CLOCK_MONOTONIC); a read, if it returned no byte. Writes "NAME TID" lines to DIR/tids, then
 * creates DIR/ready. At the end prints one line per thread, "NAME: E EINTR, R early" (all 0
 * when nothing disturbed it), "registers changed: N" (0) with the regs loop, and "signals: N",
 * the SIGRTMIN+1 handled, with the read or accept thread.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define MS 1000000LL

enum {
    T_MAIN,
    T_NANOSLEEP,
    T_ABSTIME,
    T_POLL,
    T_SELECT,
    T_READ,
    T_LONG,
    T_ACCEPT,
    T_REGS,
    T_SIGSUSPEND,
    T_PPOLL_MASK,
    T_PSELECT_MASK,
    T_ACCEPT_TO,
    T_EPOLL,
    T_SIGTIMEDWAIT,
    T_RECV,
    T_HANDLER,
    T_ALTSTACK,
    NT
};
static struct {
    const char *name;
    atomic_long eintr, early;
    atomic_int used;
} tally[NT] = {{.name = "main"},           {.name = "nanosleep"},  {.name = "abstime"},
               {.name = "poll"},           {.name = "select"},     {.name = "read"},
               {.name = "long"},           {.name = "accept"},     {.name = "regs"},
               {.name = "sigsuspend"},     {.name = "ppoll-mask"}, {.name = "pselect-mask"},
               {.name = "accept-timeout"}, {.name = "epoll"},      {.name = "sigtimedwait"},
               {.name = "recv"},           {.name = "handler"},    {.name = "altstack"}};
static atomic_int stop, started;
static atomic_long signals, regs_changed;
static const char *dir;
static int feed[2], lsock, lsock_to;
static FILE *tids;
static pthread_mutex_t tids_lock = PTHREAD_MUTEX_INITIALIZER;

static long long now_ns(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1000000000LL + t.tv_nsec;
}

/* One call's end: r < 0 with EINTR, or else back before its time (want ns after t0) */
static void count(int which, long r, int e, long long t0, long long want)
{
    if (r < 0 && e == EINTR)
        tally[which].eintr++;
    else if (want && now_ns() - t0 < want)
        tally[which].early++;
}

static void hello(int which)
{
    pthread_mutex_lock(&tids_lock);
    fprintf(tids, "%s %d\n", tally[which].name, (int)gettid());
    fflush(tids);
    pthread_mutex_unlock(&tids_lock);
    tally[which].used = 1;
    started++;
}

static void *nanosleep_thread(void *a)
{
    (void)a;
    hello(T_NANOSLEEP);
    while (!stop) {
        struct timespec d = {0, 3 * MS};
        long long t0 = now_ns();
        long r = syscall(SYS_nanosleep, &d, NULL);
        count(T_NANOSLEEP, r, errno, t0, 3 * MS);
    }
    return NULL;
}

static void *abstime_thread(void *a)
{
    (void)a;
    hello(T_ABSTIME);
    while (!stop) {
        long long t0 = now_ns(), end = t0 + 2 * MS;
        struct timespec dl = {end / 1000000000LL, end % 1000000000LL};
        int r = clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &dl, NULL);
        count(T_ABSTIME, r ? -1 : 0, r, t0, 2 * MS);
    }
    return NULL;
}

static void *poll_thread(void *a)
{
    (void)a;
    int p[2];
    if (pipe(p) < 0) return NULL;
    hello(T_POLL);
    while (!stop) {
        struct pollfd pf = {p[0], POLLIN, 0};
        long long t0 = now_ns();
        long r = poll(&pf, 1, 4);
        count(T_POLL, r, errno, t0, 4 * MS);
    }
    return NULL;
}

static void *select_thread(void *a)
{
    (void)a;
    int p[2];
    if (pipe(p) < 0) return NULL;
    hello(T_SELECT);
    while (!stop) {
        fd_set f;
        FD_ZERO(&f);
        FD_SET(p[0], &f);
        struct timeval tv = {0, 3000};
        long long t0 = now_ns();
        long r = select(p[0] + 1, &f, NULL, NULL, &tv);
        count(T_SELECT, r, errno, t0, 3 * MS);
    }
    return NULL;
}

static atomic_int woken, suspender_set;
static pthread_t suspender;

/* Waits ms in pthread_cond_timedwait: a futex, where the injector never stops a thread */
static int futex_nap(long ms)
{
    static pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_cond_t cv = PTHREAD_COND_INITIALIZER;
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_nsec += ms * MS;
    while (dl.tv_nsec >= 1000000000)
        dl.tv_sec++, dl.tv_nsec -= 1000000000;
    pthread_mutex_lock(&m);
    int r = pthread_cond_timedwait(&cv, &m, &dl);
    pthread_mutex_unlock(&m);
    return r;
}

static void *feeder_thread(void *a)
{
    (void)a;
    for (int i = 1; !stop; i++) {
        futex_nap(1);
        if (write(feed[1], "x", 1) != 1) break;
        if (i % 5 == 0 && suspender_set) pthread_kill(suspender, SIGUSR2);
    }
    if (write(feed[1], "q", 1) != 1) return NULL; /* the reader ends at 'q' */
    return NULL;
}

static void on_signal(int sig)
{
    (void)sig;
    signals++;
}

static void take_signals(void)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGRTMIN + 1);
    pthread_sigmask(SIG_UNBLOCK, &s, NULL);
}

static void *read_thread(void *a)
{
    (void)a;
    take_signals();
    hello(T_READ);
    for (;;) {
        char c = 0;
        long r = read(feed[0], &c, 1);
        count(T_READ, r, errno, 0, 0);
        if (r == 0) tally[T_READ].early++;
        if ((r == 1 && c == 'q') || r == 0) break;
    }
    return NULL;
}

static void *long_thread(void *a)
{
    (void)a;
    hello(T_LONG);
    while (!stop) {
        struct timespec d = {0, 100 * MS};
        long long t0 = now_ns();
        long r = nanosleep(&d, NULL);
        count(T_LONG, r, errno, t0, 100 * MS);
    }
    return NULL;
}

static void *accept_thread(void *a)
{
    (void)a;
    take_signals();
    hello(T_ACCEPT);
    for (;;) {
        int fd = accept(lsock, NULL, NULL);
        count(T_ACCEPT, fd, errno, 0, 0);
        if (fd >= 0) {
            close(fd);
            if (stop) break; /* the main thread's wake-up call */
        }
    }
    return NULL;
}

/* A raw nanosleep with every register the kernel keeps across a system call loaded with a
 * pattern (rdx, r8-r10, rdi, rsi, ymm0-15), read back after: the number that changed; the
 * call's result in *ret. */
__attribute__((target("avx"))) static int regs_sleep(long ns, long *ret)
{
    struct timespec ts = {0, ns};
    uint64_t in[64], out[64 + 6];
    for (int i = 0; i < 64; i++)
        in[i] = 0x5a5a000000000000u | (uint64_t)i;
    register long rax asm("rax") = SYS_nanosleep;
    register struct timespec *rdi asm("rdi") = &ts;
    register long rsi asm("rsi") = 0;
    register uint64_t *pin asm("r12") = in, *pout asm("r13") = out;
    asm volatile("vmovdqu 0(%%r12), %%ymm0\n"
                 "vmovdqu 32(%%r12), %%ymm1\n"
                 "vmovdqu 64(%%r12), %%ymm2\n"
                 "vmovdqu 96(%%r12), %%ymm3\n"
                 "vmovdqu 128(%%r12), %%ymm4\n"
                 "vmovdqu 160(%%r12), %%ymm5\n"
                 "vmovdqu 192(%%r12), %%ymm6\n"
                 "vmovdqu 224(%%r12), %%ymm7\n"
                 "vmovdqu 256(%%r12), %%ymm8\n"
                 "vmovdqu 288(%%r12), %%ymm9\n"
                 "vmovdqu 320(%%r12), %%ymm10\n"
                 "vmovdqu 352(%%r12), %%ymm11\n"
                 "vmovdqu 384(%%r12), %%ymm12\n"
                 "vmovdqu 416(%%r12), %%ymm13\n"
                 "vmovdqu 448(%%r12), %%ymm14\n"
                 "vmovdqu 480(%%r12), %%ymm15\n"
                 "movabs $0x1111111111111111, %%rdx\n"
                 "movabs $0x2222222222222222, %%r8\n"
                 "movabs $0x3333333333333333, %%r9\n"
                 "movabs $0x4444444444444444, %%r10\n"
                 "syscall\n"
                 "vmovdqu %%ymm0, 0(%%r13)\n"
                 "vmovdqu %%ymm1, 32(%%r13)\n"
                 "vmovdqu %%ymm2, 64(%%r13)\n"
                 "vmovdqu %%ymm3, 96(%%r13)\n"
                 "vmovdqu %%ymm4, 128(%%r13)\n"
                 "vmovdqu %%ymm5, 160(%%r13)\n"
                 "vmovdqu %%ymm6, 192(%%r13)\n"
                 "vmovdqu %%ymm7, 224(%%r13)\n"
                 "vmovdqu %%ymm8, 256(%%r13)\n"
                 "vmovdqu %%ymm9, 288(%%r13)\n"
                 "vmovdqu %%ymm10, 320(%%r13)\n"
                 "vmovdqu %%ymm11, 352(%%r13)\n"
                 "vmovdqu %%ymm12, 384(%%r13)\n"
                 "vmovdqu %%ymm13, 416(%%r13)\n"
                 "vmovdqu %%ymm14, 448(%%r13)\n"
                 "vmovdqu %%ymm15, 480(%%r13)\n"
                 "mov %%rdx, 512(%%r13)\n"
                 "mov %%r8, 520(%%r13)\n"
                 "mov %%r9, 528(%%r13)\n"
                 "mov %%r10, 536(%%r13)\n"
                 "mov %%rdi, 544(%%r13)\n"
                 "mov %%rsi, 552(%%r13)\n"
                 : "+r"(rax), "+r"(rdi), "+r"(rsi)
                 : "r"(pin), "r"(pout)
                 : "rcx", "r11", "rdx", "r8", "r9", "r10", "memory", "xmm0", "xmm1", "xmm2", "xmm3",
                   "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10", "xmm11", "xmm12",
                   "xmm13", "xmm14", "xmm15");
    uint64_t gp[6] = {0x1111111111111111u, 0x2222222222222222u,      0x3333333333333333u,
                      0x4444444444444444u, (uint64_t)(uintptr_t)&ts, 0};
    int changed = 0;
    for (int i = 0; i < 16; i++)
        changed += memcmp(in + 4 * i, out + 4 * i, 32) != 0;
    for (int i = 0; i < 6; i++)
        changed += out[64 + i] != gp[i];
    *ret = rax;
    return changed;
}

/* One raw nanosleep of 3 ms (registers checked, with AVX), counted as the regs thread's */
static void regs_once(void)
{
    long ret = 0;
    long long t0 = now_ns();
    if (__builtin_cpu_supports("avx"))
        regs_changed += regs_sleep(3 * MS, &ret);
    else
        ret = syscall(SYS_nanosleep, &(struct timespec){0, 3 * MS}, NULL);
    count(T_REGS, ret == -EINTR ? -1 : 0, EINTR, t0, ret == 0 ? 3 * MS : 0);
    if (ret < 0 && ret != -EINTR) tally[T_REGS].early++;
}

static void *regs_thread(void *a)
{
    (void)a;
    hello(T_REGS);
    while (!stop)
        regs_once();
    return NULL;
}

static void on_wake(int sig)
{
    (void)sig;
    woken = 1;
}

static void *sigsuspend_thread(void *a)
{
    (void)a;
    sigset_t usr2, before, after, during;
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &usr2, NULL);
    pthread_sigmask(SIG_BLOCK, NULL, &before);
    during = before;
    sigdelset(&during, SIGUSR2);
    suspender = pthread_self();
    suspender_set = 1;
    hello(T_SIGSUSPEND);
    while (!stop) {
        woken = 0;
        sigsuspend(&during); /* -1, EINTR: after the handler, always */
        pthread_sigmask(SIG_BLOCK, NULL, &after);
        if (!woken || memcmp(&before, &after, sizeof before)) tally[T_SIGSUSPEND].early++;
    }
    return NULL;
}

static void *ppoll_mask_thread(void *a)
{
    (void)a;
    int p[2];
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, NULL, &mask);
    if (pipe(p) < 0) return NULL;
    hello(T_PPOLL_MASK);
    while (!stop) {
        struct pollfd pf = {p[0], POLLIN, 0};
        struct timespec ts = {0, 3 * MS};
        long long t0 = now_ns();
        long r = ppoll(&pf, 1, &ts, &mask);
        count(T_PPOLL_MASK, r, errno, t0, 3 * MS);
    }
    return NULL;
}

static void *pselect_mask_thread(void *a)
{
    (void)a;
    int p[2];
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, NULL, &mask);
    if (pipe(p) < 0) return NULL;
    hello(T_PSELECT_MASK);
    while (!stop) {
        fd_set f;
        FD_ZERO(&f);
        FD_SET(p[0], &f);
        struct timespec ts = {0, 3 * MS};
        long long t0 = now_ns();
        long r = pselect(p[0] + 1, &f, NULL, NULL, &ts, &mask);
        count(T_PSELECT_MASK, r, errno, t0, 3 * MS);
    }
    return NULL;
}

/* ---- waits the injector must never stop a thread in ---- */

static void *accept_timeout_thread(void *a)
{
    (void)a;
    hello(T_ACCEPT_TO);
    while (!stop) {
        int fd = accept(lsock_to, NULL, NULL);
        int e = errno;
        if (fd >= 0) close(fd);
        count(T_ACCEPT_TO, fd, e, 0, 0); /* its timeout is in jiffies: no early check */
    }
    return NULL;
}

static void *epoll_thread(void *a)
{
    (void)a;
    int p[2], ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    if (pipe(p) < 0 || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, p[0], &ev) < 0) return NULL;
    hello(T_EPOLL);
    while (!stop) {
        long long t0 = now_ns();
        long r = epoll_wait(ep, &ev, 1, 3);
        count(T_EPOLL, r, errno, t0, 3 * MS);
    }
    return NULL;
}

static void *sigtimedwait_thread(void *a)
{
    (void)a;
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGUSR1); /* blocked: nobody sends it */
    pthread_sigmask(SIG_BLOCK, &s, NULL);
    hello(T_SIGTIMEDWAIT);
    while (!stop) {
        struct timespec ts = {0, 3 * MS};
        long long t0 = now_ns();
        int r = sigtimedwait(&s, NULL, &ts);
        count(T_SIGTIMEDWAIT, r, errno, t0, r < 0 && errno == EAGAIN ? 3 * MS : 0);
    }
    return NULL;
}

static void *recv_thread(void *a)
{
    (void)a;
    int sv[2];
    struct timeval tv = {0, 3000};
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv) < 0) return NULL;
    setsockopt(sv[0], SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    hello(T_RECV);
    while (!stop) {
        char c;
        long r = recv(sv[0], &c, 1, 0);
        count(T_RECV, r, errno, 0, 0);
    }
    return NULL;
}

/* SIGUSR1's handler sleeps until the end, 3 ms at a time: a thread waiting in it, on its own
 * stack or on an alternate one, may have interrupted malloc or the loader */
static __thread int handler_kind;
static void on_usr1(int sig)
{
    (void)sig;
    while (!stop) {
        struct timespec d = {0, 3 * MS};
        long long t0 = now_ns();
        long r = nanosleep(&d, NULL);
        count(handler_kind, r, errno, t0, 3 * MS);
    }
}

static void *handler_thread(void *a)
{
    handler_kind = a ? T_ALTSTACK : T_HANDLER;
    if (a) {
        stack_t ss = {.ss_sp = malloc(64 * 1024), .ss_size = 64 * 1024};
        if (!ss.ss_sp || sigaltstack(&ss, NULL) < 0) return NULL;
    }
    hello(handler_kind);
    pthread_kill(pthread_self(), SIGUSR1);
    return NULL;
}

static void *altstack_thread(void *a)
{
    (void)a;
    return handler_thread((void *)1);
}

static int unix_listener(const char *name, struct sockaddr_un *sa)
{
    int s = socket(AF_UNIX, SOCK_STREAM, 0);
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    snprintf(sa->sun_path, sizeof sa->sun_path, "%s/%s", dir, name);
    if (s < 0 || bind(s, (struct sockaddr *)sa, sizeof *sa) < 0 || listen(s, 4) < 0) {
        perror("listen");
        exit(1);
    }
    return s;
}

static int exists(const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    dir = argv[1];
    const char *mode = argc > 2 ? argv[2] : "all";
    char path[4096];
    snprintf(path, sizeof path, "%s/tids", dir);
    if (!(tids = fopen(path, "w"))) return 1;
    hello(T_MAIN);
    /* SIGRTMIN+1 reaches the read and accept threads only */
    struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    sigaction(SIGRTMIN + 1, &sa, NULL);
    struct sigaction wake = {.sa_handler = on_wake};
    sigaction(SIGUSR2, &wake, NULL);
    struct sigaction usr1 = {.sa_handler = on_usr1, .sa_flags = SA_ONSTACK};
    sigaction(SIGUSR1, &usr1, NULL);
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGRTMIN + 1);
    pthread_sigmask(SIG_BLOCK, &s, NULL);

    void *(*all[])(void *) = {nanosleep_thread,      abstime_thread,    poll_thread,
                              select_thread,         feeder_thread,     read_thread,
                              long_thread,           accept_thread,     regs_thread,
                              sigsuspend_thread,     ppoll_mask_thread, pselect_mask_thread,
                              accept_timeout_thread, epoll_thread,      NULL};
    void *(*unsafe[])(void *) = {epoll_thread, accept_timeout_thread, sigtimedwait_thread,
                                 recv_thread,  handler_thread,        altstack_thread,
                                 NULL};
    void *(*none[])(void *) = {NULL}, *(*only[])(void *) = {feeder_thread, NULL, NULL};
    void *(**fns)(void *) = !strcmp(mode, "all") ? all : !strcmp(mode, "unsafe") ? unsafe : none;
    static const struct {
        const char *name;
        void *(*fn)(void *);
    } kinds[] = {{"nanosleep", nanosleep_thread},
                 {"abstime", abstime_thread},
                 {"poll", poll_thread},
                 {"select", select_thread},
                 {"read", read_thread},
                 {"long", long_thread},
                 {"accept", accept_thread},
                 {"regs", regs_thread},
                 {"sigsuspend", sigsuspend_thread},
                 {"ppoll-mask", ppoll_mask_thread},
                 {"pselect-mask", pselect_mask_thread}};
    if (!strncmp(mode, "only:", 5)) {
        for (size_t i = 0; i < sizeof kinds / sizeof kinds[0]; i++)
            if (!strcmp(mode + 5, kinds[i].name)) only[1] = kinds[i].fn;
        if (!only[1]) return 2;
        fns = only;
    }
    struct sockaddr_un sa_accept, sa_to;
    if (pipe(feed) < 0) return 1;
    lsock = unix_listener("accept.sock", &sa_accept);
    lsock_to = unix_listener("accept-timeout.sock", &sa_to);
    struct timeval tv = {0, 5000};
    setsockopt(lsock_to, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
    pthread_t th[NT];
    int n = 0, hellos = 1;
    for (; fns[n]; n++) {
        pthread_create(&th[n], NULL, fns[n], NULL);
        hellos += fns[n] != feeder_thread;
    }
    while (started < hellos) {
        struct timespec d = {0, 1 * MS};
        nanosleep(&d, NULL);
    }
    snprintf(path, sizeof path, "%s/ready", dir);
    fclose(fopen(path, "w"));

    if (!strcmp(mode, "regs")) {
        tally[T_REGS].used = 1;
        while (!exists("stop"))
            for (int i = 0; i < 10; i++)
                regs_once();
    } else if (fns == unsafe || fns == only) {
        while (!exists("stop")) /* the main thread waits in a futex */
            if (futex_nap(2) == EINTR) tally[T_MAIN].eintr++;
    } else {
        while (!exists("stop")) {
            struct timespec d = {0, 2 * MS};
            long long t0 = now_ns();
            long r = nanosleep(&d, NULL);
            count(T_MAIN, r, errno, t0, 2 * MS);
        }
    }
    stop = 1;
    int c = socket(AF_UNIX, SOCK_STREAM, 0); /* wakes the blocking accept */
    if (tally[T_ACCEPT].used && connect(c, (struct sockaddr *)&sa_accept, sizeof sa_accept) < 0)
        perror("connect");
    for (int i = 0; i < n; i++) {
        if (fns[i] == sigsuspend_thread) pthread_kill(th[i], SIGUSR2); /* its last wake-up */
        pthread_join(th[i], NULL);
    }
    close(c);
    for (int i = 0; i < NT; i++)
        if (tally[i].used)
            printf("%s: %ld EINTR, %ld early\n", tally[i].name, (long)tally[i].eintr,
                   (long)tally[i].early);
    if (tally[T_REGS].used) printf("registers changed: %ld\n", (long)regs_changed);
    if (tally[T_READ].used || tally[T_ACCEPT].used) printf("signals: %ld\n", (long)signals);
    return 0;
}
