/* ends: the ways a process ends. usage: ends MODE
 *   return  main -> work -> leaf x 3; main returns 0
 *   exit    main -> work -> deep -> exit(5)        (main, work, deep stay open)
 *   _exit   main -> work -> deep -> _exit(6)       (the same, without atexit handlers)
 *   segv    main -> work -> deep -> *NULL = 1      (killed by SIGSEGV)
 *   abort   main -> work -> deep -> abort()        (killed by SIGABRT)
 *   thread  a thread loops calling spin() (main waits until it has, 1000 times) while main ->
 *           work -> leaf x 3 returns. Untraced, it stops calling spin() before main returns:
 *           glibc's gprof run-time (linked by -pg) tears down at exit while a thread may be
 *           inside its mcount (the untraced run died of SIGSEGV once in a ~300-run soak);
 *           under ftrace-run, which never calls that mcount, it spins on through the exit.
 *   fpe     main -> work -> deep -> integer division by zero   (killed by SIGFPE)
 *   texit   a thread: exiter -> exit(7) while main sleeps in main -> work -> deep -> waiter
 *           (main, work, deep, waiter stay open; exiter too)
 *   pipe, alarm, usr1, xcpu, rt   main -> work -> deep, which dies of a signal at its default
 *           action: a write to a pipe with no reader (SIGPIPE), a timer of 5 ms while it waits
 *           (SIGALRM), raise(SIGUSR1), raise(SIGXCPU), raise(SIGRTMIN + 2)
 *   kill    main -> work -> deep -> kill(getpid(), SIGKILL): nothing of the process's runs
 *           after; everything it recorded before is in the trace (records in shared pages:
 *           the recorder takes them when the process is gone; a writer thread lost them)
 *   sandbox-kill, sandbox-die   main -> work -> deep, which installs a seccomp filter that
 *           kills the process at its next getpid(), then exit(8) (the tracer must not ask
 *           getpid() on its way out), or calls getpid() itself (killed by SIGSYS: the trace
 *           holds everything before, and says how it ended when it can)
 *   sandbox-exit, sandbox-usr1   main -> work -> deep, which installs a seccomp filter under
 *           which getpid() fails with EPERM (a sandbox's allowlist), then exit(8), or sends
 *           itself SIGUSR1 (at its default action). The tracer took the process for another
 *           one (a vfork child) and left the trace without its end; the SIGUSR1 it sends again
 *           to die of it went nowhere, and the program ran on.
 * Every mode first prints a line, with how many signals' actions are not SIG_DFL (as the
 * program started: 0; the tracer's stand-ins for the default action read back as SIG_DFL),
 * and calls work() -> leaf() three times. */
#include <errno.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <signal.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <unistd.h>
#include "progs.h"

static volatile int sink;
NOINLINE int leaf(int x)
{
    return x + 1;
}
static volatile int zero;
/* Waits for a signal with none blocked: one held until now (alarm) is taken here, never
 * earlier (a 5 ms timer set before the call fired before it under load: no waiter in the
 * trace, 1 run in ~400 of stress.sh). */
NOINLINE void waiter(void)
{
    sigset_t none;
    sigemptyset(&none);
    for (;;)
        sigsuspend(&none);
}
NOINLINE void *exiter(void *arg)
{
    (void)arg;
    usleep(20000);
    fflush(stdout);
    exit(7);
}
NOINLINE void deep(const char *mode)
{
    fflush(stdout);
    if (!strcmp(mode, "exit")) exit(5);
    if (!strcmp(mode, "_exit")) _exit(6);
    if (!strcmp(mode, "segv")) *(volatile int *)0 = 1;
    if (!strcmp(mode, "abort")) abort();
    if (!strcmp(mode, "fpe")) sink = sink / zero; /* (1 / x is compiled without a division) */
    if (!strcmp(mode, "pipe")) {
        int fd[2];
        if (pipe(fd) == 0 && close(fd[0]) == 0) sink = (int)write(fd[1], "x", 1);
    }
    if (!strcmp(mode, "alarm")) {
        sigset_t alrm;
        sigemptyset(&alrm);
        sigaddset(&alrm, SIGALRM);
        sigprocmask(SIG_BLOCK, &alrm, NULL); /* until waiter() */
        struct itimerval it = {{0, 0}, {0, 5000}};
        setitimer(ITIMER_REAL, &it, NULL);
        waiter();
    }
    if (!strcmp(mode, "kill")) syscall(SYS_kill, getpid(), SIGKILL);
    if (!strncmp(mode, "sandbox-", 8)) {
        pid_t pid = getpid();
        int kills = !strcmp(mode, "sandbox-kill") || !strcmp(mode, "sandbox-die");
        struct sock_filter f[] = {
            BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
            BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_getpid, 0, 1),
            BPF_STMT(BPF_RET | BPF_K, kills ? SECCOMP_RET_KILL_PROCESS : SECCOMP_RET_ERRNO | EPERM),
            BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
        };
        struct sock_fprog prog = {sizeof f / sizeof f[0], f};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
            exit(9);
        if (!strcmp(mode, "sandbox-exit") || !strcmp(mode, "sandbox-kill")) exit(8);
        if (!strcmp(mode, "sandbox-die")) sink = (int)syscall(SYS_getpid);
        /* raise() would ask getpid() */
        syscall(SYS_tgkill, pid, (pid_t)syscall(SYS_gettid), SIGUSR1);
        exit(10); /* not reached: SIGUSR1 kills */
    }
    if (!strcmp(mode, "usr1")) raise(SIGUSR1);
    if (!strcmp(mode, "xcpu")) raise(SIGXCPU);
    if (!strcmp(mode, "rt")) raise(SIGRTMIN + 2);
    if (!strcmp(mode, "texit")) {
        pthread_t t;
        pthread_create(&t, NULL, exiter, NULL);
        waiter();
    }
}
NOINLINE int work(const char *mode)
{
    int s = 0;
    for (int i = 0; i < 3; i++)
        s += leaf(i);
    deep(mode);
    sink = s;
    return s;
}
NOINLINE int spin(int x)
{
    return x ^ 1;
}
static volatile long spins;
static volatile int park, parked;
NOINLINE void *spinner(void *arg)
{
    (void)arg;
    for (int x = 0; !park; x = spin(x)) {
        sink = x;
        spins++;
    }
    parked = 1;
    for (;;)
        sink++; /* still running at exit, in no instrumented call */
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "return";
    int set = 0;
    for (int sig = 1; sig <= SIGRTMAX; sig++) {
        struct sigaction old;
        if (sig != SIGKILL && sig != SIGSTOP && sigaction(sig, NULL, &old) == 0 &&
            (old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO)))
            set++;
    }
    void (*was)(int) = signal(SIGUSR2, SIG_DFL);
    printf("ends %s (%d actions set, SIGUSR2's %s)\n", mode, set,
           was == SIG_DFL ? "default" : "changed");
    if (!strcmp(mode, "thread")) {
        pthread_t t;
        pthread_create(&t, NULL, spinner, NULL);
        /* until it has spun a while (a loaded machine may not run it for a long time) */
        for (int i = 0; i < 10000 && spins < 1000; i++)
            usleep(1000);
    }
    work(mode);
    const char *preload = getenv("LD_PRELOAD");
    if (!strcmp(mode, "thread") && !(preload && strstr(preload, "libftrace"))) {
        park = 1;
        for (int i = 0; i < 10000 && !parked; i++)
            usleep(1000);
    }
    return 0;
}
