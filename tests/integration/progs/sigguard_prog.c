/* sigguard_prog: what a program sees of SIGTRAP and SIGRTMIN+7 ("RT7"), run by
 * sigguard_tests.py untraced and under the sigguard shim (progs/sigguard_shim.c).
 * usage: sigguard_prog MODE; prints "key value" lines (the test knows what each run must print).
 *   blocked-trap   everything blocked (sigprocmask + pthread_sigmask), then int3: handled?
 *   handler-mask   int3 with a handler whose sa_mask is {USR2}: the mask inside and after
 *   readback       sigaction/signal/bsd_signal/ssignal/sysv_signal/__sysv_signal/sigset/
 *                  sigignore/siginterrupt on guarded signals, read back; errors; USR1's mask
 *   masks          every mask-setting call, the mask the kernel then has (/proc)
 *   waits          ppoll, __ppoll_chk, pselect, epoll_pwait(2) (and, with "suspend", sigsuspend)
 *                  with everything blocked, while a thread sends RT7
 *   raise-rt       raise(RT7) reaches the program's handler once
 *   held-value     RT7 sent to itself with SI_TKILL and a value, blocked, then unblocked: the
 *                  handler finds the value, pid, uid and errno it was sent
 *   trap-default, trap-ign, trap-resethand, rt-default, rt-ign, raw-reinstall (SIGTRAP's
 *                  kernel action read with a raw rt_sigaction and set with sigaction, then
 *                  int3): how the process ends
 *   processes      vfork child (dispositions and mask it passes to exec), fork and _Fork children
 *   stress         threads replace the SIGTRAP handler while main executes int3 20000 times
 *   late           (shim only, SIGGUARD_SHIM_LATE=1) the wrappers before the set-up, then it
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/select.h>
#include <sys/signalfd.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"
int __ppoll_chk(struct pollfd *, nfds_t, const struct timespec *, const sigset_t *, size_t);
int sigblock(int mask);
int sigsetmask(int mask);
__sighandler_t bsd_signal(int sig, __sighandler_t h); /* not declared in POSIX 2008 mode */

#define RT7 (SIGRTMIN + 7)
#define BIT(s) (1 << ((s)-1)) /* sigmask(), deprecated */
static void int3(void)
{
    __asm__ volatile("int3");
}

static volatile sig_atomic_t hits, last_code, usr2_in, trap_in;
static int (*shim_count)(int);

static int shim(int sig)
{
    return shim_count ? shim_count(sig) : -1;
}

/* the kernel's view of this thread: SigBlk or SigIgn bit of sig */
static int proc_bit(const char *field, int sig)
{
    char line[256];
    unsigned long long v = 0;
    FILE *f = fopen("/proc/thread-self/status", "r");
    while (f && fgets(line, sizeof line, f))
        if (!strncmp(line, field, strlen(field))) v = strtoull(line + strlen(field) + 1, 0, 16);
    if (f) fclose(f);
    return (int)(v >> (sig - 1) & 1);
}
static void print_blocked(const char *what)
{
    printf("%s-blk usr1=%d trap=%d rt7=%d\n", what, proc_bit("SigBlk:", SIGUSR1),
           proc_bit("SigBlk:", SIGTRAP), proc_bit("SigBlk:", RT7));
}

/* held-value: what the handler of a held thread-directed signal finds in its siginfo */
static volatile int seen_value, seen_pid, seen_uid, seen_errno;
static void on_value(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)uc;
    hits++;
    last_code = si->si_code;
    seen_value = si->si_value.sival_int;
    seen_pid = si->si_pid;
    seen_uid = (int)si->si_uid;
    seen_errno = si->si_errno;
}

static void on_info(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)uc;
    hits++;
    last_code = si->si_code;
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    usr2_in = sigismember(&cur, SIGUSR2);
    trap_in = sigismember(&cur, SIGTRAP);
}
static void on_plain(int sig)
{
    (void)sig;
    hits++;
}
static void on_other(int sig)
{
    (void)sig;
}

static void install(int sig, void (*fn)(int, siginfo_t *, void *), int flags, const sigset_t *m)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fn;
    sa.sa_flags = SA_SIGINFO | flags;
    sa.sa_mask = *m;
    if (sigaction(sig, &sa, NULL) != 0) printf("sigaction failed %d\n", errno);
}

static const char *hname(void (*h)(int))
{
    if (h == SIG_DFL) return "DFL";
    if (h == SIG_IGN) return "IGN";
    if (h == SIG_HOLD) return "HOLD";
    if (h == SIG_ERR) return "ERR";
    if (h == on_plain) return "on_plain";
    if (h == on_other) return "on_other";
    if ((void *)h == (void *)on_info) return "on_info";
    return "?";
}
static void *glibc_restorer;
static void show(const char *what, int sig)
{
    struct sigaction o;
    memset(&o, 0, sizeof o);
    sigaction(sig, NULL, &o);
    printf("%s handler=%s flags=%#x mask0=%#lx restorer=%s\n", what, hname(o.sa_handler),
           (unsigned)o.sa_flags, o.sa_mask.__val[0],
           !o.sa_restorer                            ? "none"
           : (void *)o.sa_restorer == glibc_restorer ? "glibc"
                                                     : "other");
}

static void m_blocked_trap(void)
{
    sigset_t all;
    sigfillset(&all);
    install(SIGTRAP, on_info, 0, &all);
    sigprocmask(SIG_SETMASK, &all, NULL);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    print_blocked("before");
    int3();
    printf("handled hits=%d code=%d shim=%d\n", hits, last_code, shim(SIGTRAP));
}

static void m_handler_mask(void)
{
    sigset_t m;
    sigemptyset(&m);
    sigaddset(&m, SIGUSR2);
    install(SIGTRAP, on_info, 0, &m);
    int3();
    sigset_t cur;
    pthread_sigmask(SIG_BLOCK, NULL, &cur);
    printf("in-handler hits=%d usr2=%d trap=%d shim=%d\n", hits, usr2_in, trap_in, shim(SIGTRAP));
    printf("after usr2=%d\n", sigismember(&cur, SIGUSR2));
}

static void m_readback(void)
{
    sigset_t all, m;
    sigfillset(&all);
    install(SIGUSR1, on_info, 0, &all);
    struct sigaction o;
    sigaction(SIGUSR1, NULL, &o);
    printf("usr1-mask0 %#lx\n", o.sa_mask.__val[0]);
    show("trap-initial", SIGTRAP);
    show("rt7-initial", RT7);
    install(SIGTRAP, on_info, SA_RESTART | SA_ONSTACK | 0x400 /* SA_UNSUPPORTED */, &all);
    show("trap-sigaction", SIGTRAP);
    sigemptyset(&m);
    sigaddset(&m, SIGUSR1);
    sigaddset(&m, SIGTRAP);
    sigaddset(&m, RT7);
    install(RT7, on_info, SA_RESETHAND | SA_NODEFER, &m);
    show("rt7-sigaction", RT7);
    printf("signal-old %s\n", hname(signal(SIGTRAP, on_plain)));
    show("trap-signal", SIGTRAP);
    int3();
    printf("signal-int3 hits=%d\n", hits);
    printf("siginterrupt %d\n", siginterrupt(SIGTRAP, 1));
    show("trap-siginterrupt", SIGTRAP);
    printf("bsd_signal-old %s\n", hname(bsd_signal(SIGTRAP, on_plain)));
    show("trap-bsd_signal", SIGTRAP);
    siginterrupt(SIGTRAP, 0);
    printf("ssignal-old %s\n", hname(ssignal(SIGTRAP, on_plain)));
    show("trap-ssignal", SIGTRAP);
    printf("sysv_signal-old %s\n", hname(sysv_signal(SIGTRAP, on_plain)));
    show("trap-sysv_signal", SIGTRAP);
    int3();
    printf("sysv-int3 hits=%d\n", hits);
    show("trap-after-reset", SIGTRAP);
    printf("__sysv_signal-old %s\n", hname(__sysv_signal(SIGTRAP, on_other)));
    printf("sigignore %d\n", sigignore(RT7));
    show("rt7-sigignore", RT7);
    raise(RT7);
    printf("rt7-ignored survived\n");
    printf("sigset-old %s\n", hname(sigset(RT7, on_plain)));
    show("rt7-sigset", RT7);
    raise(RT7);
    printf("sigset-raise hits=%d\n", hits);
    errno = 0;
    void (*h)(int) = signal(SIGTRAP, SIG_ERR);
    printf("signal-err %s errno=%d\n", hname(h), errno);
    errno = 0;
    int r = sigaction(0, &o, NULL);
    printf("sigaction-0 %d errno=%d\n", r, errno);
    errno = 0;
    r = sigaction(SIGKILL, &o, NULL);
    printf("sigaction-kill %d errno=%d\n", r, errno);
    show("trap-final", SIGTRAP);
}

static void *thread_blk(void *arg)
{
    (void)arg;
    print_blocked("attr-thread");
    return NULL;
}
static ucontext_t uc_main, uc_co;
static void co_fn(void)
{
    print_blocked("swapcontext");
}
static void m_masks(void)
{
    sigset_t set, old1, old2, cur, all;
    sigemptyset(&set);
    sigaddset(&set, SIGUSR1);
    sigaddset(&set, SIGTRAP);
    sigaddset(&set, RT7);
    sigfillset(&all);
    printf("pthread_sigmask %d\n", pthread_sigmask(SIG_BLOCK, &set, &old1));
    printf("old1 usr1=%d trap=%d\n", sigismember(&old1, SIGUSR1), sigismember(&old1, SIGTRAP));
    print_blocked("pthread_sigmask");
    pthread_sigmask(SIG_SETMASK, NULL, &cur);
    printf("read usr1=%d trap=%d rt7=%d\n", sigismember(&cur, SIGUSR1), sigismember(&cur, SIGTRAP),
           sigismember(&cur, RT7));
    printf("caller-set trap=%d rt7=%d\n", sigismember(&set, SIGTRAP), sigismember(&set, RT7));
    printf("sigprocmask %d\n", sigprocmask(SIG_SETMASK, &old1, &old2));
    printf("old2 usr1=%d trap=%d\n", sigismember(&old2, SIGUSR1), sigismember(&old2, SIGTRAP));
    print_blocked("restored");
    printf("pthread_sigmask-bad %d\n", pthread_sigmask(12345, &set, NULL));
    errno = 0;
    int r = sigprocmask(12345, &set, NULL);
    printf("sigprocmask-bad %d errno=%d\n", r, errno);
    printf("sighold %d\n", sighold(SIGTRAP));
    print_blocked("sighold");
    sigrelse(SIGTRAP);
    sigblock(BIT(SIGTRAP) | BIT(SIGUSR1));
    print_blocked("sigblock");
    sigsetmask(BIT(SIGTRAP));
    print_blocked("sigsetmask");
    sigsetmask(0);
    printf("sigset-hold %s\n", hname(sigset(SIGTRAP, SIG_HOLD)));
    print_blocked("sigset-hold");
    sigprocmask(SIG_SETMASK, &old1, NULL);
    pthread_attr_t attr;
    pthread_t t;
    pthread_attr_init(&attr);
    pthread_attr_setsigmask_np(&attr, &all);
    pthread_create(&t, &attr, thread_blk, NULL);
    pthread_join(t, NULL);
    static char stack[64 * 1024];
    getcontext(&uc_co);
    uc_co.uc_stack.ss_sp = stack;
    uc_co.uc_stack.ss_size = sizeof stack;
    uc_co.uc_link = &uc_main;
    uc_co.uc_sigmask = all;
    makecontext(&uc_co, co_fn, 0);
    swapcontext(&uc_main, &uc_co);
    print_blocked("back");
    /* signalfd for {USR1, RT7}, both blocked, RT7 also handled */
    sigset_t sfset;
    sigemptyset(&sfset);
    sigaddset(&sfset, SIGUSR1);
    sigaddset(&sfset, RT7);
    sigemptyset(&cur);
    install(RT7, on_info, 0, &cur);
    sigprocmask(SIG_BLOCK, &sfset, NULL);
    int fd = signalfd(-1, &sfset, SFD_NONBLOCK);
    raise(SIGUSR1);
    raise(RT7);
    struct signalfd_siginfo fi;
    printf("signalfd got");
    while (read(fd, &fi, sizeof fi) == sizeof fi)
        printf(" %s", fi.ssi_signo == SIGUSR1         ? "usr1"
                      : fi.ssi_signo == (unsigned)RT7 ? "rt7"
                                                      : "?");
    printf(" handler=%d shim=%d\n", hits, shim(RT7));
    close(fd);
}

static pthread_t main_thread;
static void *kicker(void *arg)
{
    (void)arg;
    struct timespec d = {0, 50 * 1000 * 1000};
    nanosleep(&d, NULL);
    pthread_kill(main_thread, RT7);
    return NULL;
}
static void m_waits(int suspend)
{
    sigset_t none, all;
    sigemptyset(&none);
    sigfillset(&all);
    install(RT7, on_info, 0, &none);
    main_thread = pthread_self();
    int ep = epoll_create1(0);
    for (int k = 0; k < 5 + suspend; k++) {
        static const char *const names[] = {"ppoll",       "__ppoll_chk",  "pselect",
                                            "epoll_pwait", "epoll_pwait2", "sigsuspend"};
        struct timespec t = {0, 400 * 1000 * 1000};
        struct pollfd pfd[1] = {{.fd = -1}};
        struct epoll_event ev;
        pthread_t th;
        int before = hits, r = -2;
        pthread_create(&th, NULL, kicker, NULL);
        errno = 0;
        switch (k) {
        case 0:
            r = ppoll(pfd, 1, &t, &all);
            break;
        case 1:
            r = __ppoll_chk(pfd, 1, &t, &all, sizeof pfd);
            break;
        case 2:
            r = pselect(0, NULL, NULL, NULL, &t, &all);
            break;
        case 3:
            r = epoll_pwait(ep, &ev, 1, 400, &all);
            break;
        case 4:
            r = epoll_pwait2(ep, &ev, 1, &t, &all);
            break;
        case 5:
            r = sigsuspend(&all);
            break;
        }
        int e = errno;
        pthread_join(th, NULL);
        printf("%s ret=%d eintr=%d handler=%d\n", names[k], r, e == EINTR, hits - before);
    }
}

static void only(sigset_t *set, int sig)
{
    sigemptyset(set);
    sigaddset(set, sig);
}

static void m_processes(void)
{
    sigset_t none, one;
    sigemptyset(&none);
    only(&one, SIGTRAP);
    install(SIGTRAP, on_info, 0, &none);
    fflush(stdout);
    pid_t p = vfork();
    if (p == 0) { /* what this child passes to exec is its own business */
        struct sigaction ign;
        memset(&ign, 0, sizeof ign);
        ign.sa_handler = SIG_IGN;
        sigaction(SIGTRAP, &ign, NULL);
        sigprocmask(SIG_BLOCK, &one, NULL);
        char *argv[] = {"grep", "-E", "^Sig(Blk|Ign)", "/proc/self/status", NULL}, *envp[] = {NULL};
        execve("/bin/grep", argv, envp);
        _exit(127);
    }
    waitpid(p, NULL, 0);
    show("parent-after-vfork", SIGTRAP);
    int3();
    printf("parent-int3 hits=%d shim=%d\n", hits, shim(SIGTRAP));
    for (int k = 0; k < 2; k++) {
        fflush(stdout);
        p = k == 0 ? fork() : _Fork();
        if (p == 0) {
            sigset_t all;
            sigfillset(&all);
            sigprocmask(SIG_SETMASK, &all, NULL);
            install(SIGTRAP, on_info, 0, &all);
            int3();
            printf("%s-child hits=%d shim=%d trap-blocked=%d\n", k ? "_Fork" : "fork", hits,
                   shim(SIGTRAP), proc_bit("SigBlk:", SIGTRAP));
            fflush(stdout);
            _exit(0);
        }
        int st;
        waitpid(p, &st, 0);
        printf("%s-child status=%#x\n", k ? "_Fork" : "fork", st);
    }
}

/* threads keep replacing the SIGTRAP handler (two that count alike) while main traps */
static volatile int stop;
static void on_alt(int sig, siginfo_t *si, void *uc)
{
    on_info(sig, si, uc);
}
static void *replacer(void *arg)
{
    sigset_t none;
    sigemptyset(&none);
    for (unsigned k = (unsigned)(size_t)arg; !stop; k++)
        install(SIGTRAP, k & 1 ? on_alt : on_info, 0, &none);
    return NULL;
}
static void m_stress(void)
{
    enum { THREADS = 3, TRAPS = 20000 };
    pthread_t t[THREADS];
    sigset_t none;
    sigemptyset(&none);
    install(SIGTRAP, on_info, 0, &none);
    for (int i = 0; i < THREADS; i++)
        pthread_create(&t[i], NULL, replacer, (void *)(size_t)i);
    for (int i = 0; i < TRAPS; i++)
        int3();
    stop = 1;
    for (int i = 0; i < THREADS; i++)
        pthread_join(t[i], NULL);
    printf("stress traps=%d hits=%d shim=%d\n", TRAPS, hits, shim(SIGTRAP));
}

/* what the kernel has (ours, under the shim), read with a raw system call, set with sigaction */
static void m_raw_reinstall(void)
{
    struct {
        void *handler;
        unsigned long flags;
        void *restorer;
        unsigned long mask;
    } k;
    struct sigaction sa;
    syscall(SYS_rt_sigaction, SIGTRAP, NULL, &k, 8);
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = (void (*)(int))k.handler;
    sa.sa_flags = (int)(k.flags & ~0x04000000ul); /* SA_RESTORER: glibc's to set */
    sigaction(SIGTRAP, &sa, NULL);
    int3();
}

static void m_late(void)
{
    void (*init)(void) = (void (*)(void))dlsym(RTLD_DEFAULT, "sigguard_shim_init");
    sigset_t set, all;
    if (!init) {
        printf("noshim\n");
        return;
    }
    sigemptyset(&set);
    sigaddset(&set, SIGTRAP);
    sigaddset(&set, SIGUSR1);
    sigfillset(&all);
    sigprocmask(SIG_BLOCK, &set, NULL);
    print_blocked("before-init");
    install(SIGUSR1, on_info, 0, &all);
    install(SIGTRAP, on_info, 0, &all);
    show("trap-before-init", SIGTRAP);
    init();
    print_blocked("after-init");
    struct sigaction o;
    sigaction(SIGUSR1, NULL, &o);
    printf("usr1-mask trap=%d rt7=%d usr2=%d\n", sigismember(&o.sa_mask, SIGTRAP),
           sigismember(&o.sa_mask, RT7), sigismember(&o.sa_mask, SIGUSR2));
    show("trap-after-init", SIGTRAP);
    /* blocked before the set-up: still blocked in the program's view; open it for the int3 */
    sigprocmask(SIG_UNBLOCK, &set, &all);
    printf("trap-view blocked=%d\n", sigismember(&all, SIGTRAP));
    int3();
    printf("late-int3 hits=%d shim=%d\n", hits, shim(SIGTRAP));
}

/* A thread sends itself RT7 with SI_TKILL and a value (rt_tgsigqueueinfo), blocked in its
 * view, then unblocks it: its handler finds every field it was sent. */
static void m_held_value(void)
{
    sigset_t none, rt;
    sigemptyset(&none);
    only(&rt, RT7);
    install(RT7, on_value, 0, &none);
    sigprocmask(SIG_BLOCK, &rt, NULL);
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_signo = RT7;
    si.si_code = SI_TKILL;
    si.si_errno = 7;
    si.si_pid = 1234;
    si.si_uid = 5678;
    si.si_value.sival_int = 43;
    syscall(SYS_rt_tgsigqueueinfo, getpid(), (pid_t)syscall(SYS_gettid), RT7, &si);
    int before = hits;
    sigprocmask(SIG_UNBLOCK, &rt, NULL);
    printf("held-value before=%d hits=%d code=%d value=%d pid=%d uid=%d errno=%d\n", before, hits,
           last_code, seen_value, seen_pid, seen_uid, seen_errno);
}

/* SIGTRAP, blocked in the thread's view, sent 4 ways and taken with sigwaitinfo() or
 * sigtimedwait(): the si_code each returns (glibc folds a thread-directed SI_TKILL into
 * SI_USER there; a held one came back as SI_TKILL) */
static void m_held_wait(void)
{
    sigset_t trap;
    only(&trap, SIGTRAP);
    sigprocmask(SIG_BLOCK, &trap, NULL);
    struct timespec t = {1, 0};
    siginfo_t si;
    raise(SIGTRAP);
    int r1 = sigwaitinfo(&trap, &si), c1 = si.si_code;
    memset(&si, 0, sizeof si);
    si.si_signo = SIGTRAP;
    si.si_code = SI_TKILL;
    si.si_value.sival_int = 9;
    syscall(SYS_rt_tgsigqueueinfo, getpid(), (pid_t)syscall(SYS_gettid), SIGTRAP, &si);
    int r2 = sigtimedwait(&trap, &si, &t), c2 = si.si_code;
    kill(getpid(), SIGTRAP);
    int r3 = sigwaitinfo(&trap, &si), c3 = si.si_code;
    sigqueue(getpid(), SIGTRAP, (union sigval){.sival_int = 5});
    int r4 = sigtimedwait(&trap, &si, &t), c4 = si.si_code;
    printf("held-wait raise=%d/%d tgsigqueue=%d/%d kill=%d/%d sigqueue=%d/%d\n", r1, c1, r2, c2, r3,
           c3, r4, c4);
}

int main(int argc, char **argv)
{
    struct rlimit nocore = {0, 0};
    setrlimit(RLIMIT_CORE, &nocore);
    setvbuf(stdout, NULL, _IOLBF, 0);
    shim_count = (int (*)(int))dlsym(RTLD_DEFAULT, "sigguard_shim_count");
    const char *m = argc > 1 ? argv[1] : "";
    sigset_t none;
    sigemptyset(&none);
    /* glibc's restorer, as a handler of a signal nobody guards reads it back */
    struct sigaction o;
    install(SIGUSR2, on_info, 0, &none);
    sigaction(SIGUSR2, NULL, &o);
    glibc_restorer = (void *)o.sa_restorer;
    signal(SIGUSR2, SIG_DFL);
    if (!strcmp(m, "blocked-trap"))
        m_blocked_trap();
    else if (!strcmp(m, "handler-mask"))
        m_handler_mask();
    else if (!strcmp(m, "readback"))
        m_readback();
    else if (!strcmp(m, "masks"))
        m_masks();
    else if (!strcmp(m, "waits"))
        m_waits(argc > 2 && !strcmp(argv[2], "suspend"));
    else if (!strcmp(m, "held-value"))
        m_held_value();
    else if (!strcmp(m, "held-wait"))
        m_held_wait();
    else if (!strcmp(m, "raise-rt")) {
        install(RT7, on_info, 0, &none);
        raise(RT7);
        printf("raise hits=%d code=%d shim=%d\n", hits, last_code, shim(RT7));
    } else if (!strcmp(m, "trap-default"))
        int3();
    else if (!strcmp(m, "trap-ign"))
        signal(SIGTRAP, SIG_IGN), int3();
    else if (!strcmp(m, "trap-resethand")) {
        install(SIGTRAP, on_info, SA_RESETHAND, &none);
        int3();
        printf("first hits=%d\n", hits);
        int3();
    } else if (!strcmp(m, "raw-reinstall"))
        m_raw_reinstall();
    else if (!strcmp(m, "rt-default"))
        raise(RT7);
    else if (!strcmp(m, "rt-ign"))
        signal(RT7, SIG_IGN), raise(RT7);
    else if (!strcmp(m, "processes"))
        m_processes();
    else if (!strcmp(m, "stress"))
        m_stress();
    else if (!strcmp(m, "late"))
        m_late();
    else
        return fprintf(stderr, "usage: sigguard_prog MODE\n"), 2;
    printf("end\n");
    return 0;
}
