/* bsession: a run's processes as the session sees them (session_tests.py). usage: bsession MODE
 *   daemon        main -> fork(): the parent writes the child's pid to bs_daemon.pid and returns
 *                 at once; the child (its own session, stdio on /dev/null) waits for the file
 *                 bs_daemon.go (the test makes it once it has looked at the trace: 60 s at
 *                 most), then calls tick() 30 times, 10 ms apart, and exits: the file is still
 *                 being written after ftrace-run returned, however long that took. Trees:
 *                 parent {main}, child: tick 30 below main.
 *   plain         main -> tick x 3.
 *   children [W]  main -> 24 fork children at once, each child_work x W (20000) and then, by its
 *                 number i: _exit(0), exit(i), or SIGKILL to itself; all waited for, then the
 *                 parent returns: the report right after must have every child's END.
 *   reexec N      main -> tick, then execv(/proc/self/exe, "reexec", N-1) until N is 0: N + 1
 *                 images, each {main, main;tick}.
 *   exectrue      main -> tick, then execl(/bin/true): the next image is not instrumented.
 *   execstatic P  main -> tick, then execl(P, "static"): a static program, which loads no
 *                 preload.
 *   static        (the static image) prints "static ran".
 *   execenv       main -> tick, then execle(/proc/self/exe, "envchild") with {"A=1", NULL}.
 *   execenv2      the same with {"A=1", "LD_PRELOAD=libm.so.6", "B=2", NULL}.
 *   spawnenv      main -> tick, then posix_spawn(/proc/self/exe, "envchild") with {"A=1",
 *                 NULL}, waited for.
 *   envchild      prints every entry of environ, one a line, then main -> child_work.
 *   dlmopen LIB   dlmopen(LM_ID_NEWLM, LIB) twice (two namespaces), calls its dl_outer() 5
 *                 times in each; main -> tick.
 *   netns [DIR]   unshare(CLONE_NEWNET) (prints "netns: unavailable" and returns 0 where it
 *                 may not), and chroot(DIR) if given, then 3 fork children, each child_work x
 *                 1000 and _exit(0), all waited for; main -> tick: the children are in a
 *                 network namespace where the recorder's abstract socket is not (and, with
 *                 DIR, where its path is not either).
 *   euid          setresuid(65534, 65534, 0) (prints "euid: unavailable" and returns 0 where it
 *                 may not), then a fork child, child_work x 1000 and _exit(0), waited for;
 *                 main -> tick: the child is of another user than the recorder's.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "behave.h"

extern char **environ;
static volatile long sink;

NOINLINE void tick(void)
{
    sink++;
}
NOINLINE void child_work(void)
{
    sink++;
}

static void nap_ms(long ms)
{
    struct timespec ts = {0, ms * 1000000L};
    while (nanosleep(&ts, &ts) != 0)
        ;
}

static int daemon_mode(void)
{
    fflush(stdout);
    pid_t p = fork();
    if (p < 0) return 1;
    if (p > 0) {
        FILE *f = fopen("bs_daemon.pid", "w");
        if (!f) return 1;
        fprintf(f, "%d\n", (int)p);
        fclose(f);
        return 0; /* at once */
    }
    setsid();
    int fd = open("/dev/null", O_RDWR);
    dup2(fd, 0);
    dup2(fd, 1);
    dup2(fd, 2);
    for (int i = 0; i < 6000 && access("bs_daemon.go", F_OK) != 0; i++)
        nap_ms(10);
    for (int i = 0; i < 30; i++) {
        tick();
        nap_ms(10);
    }
    exit(0);
}

static int children_mode(long work)
{
    enum { N = 24 };
    pid_t kids[N];
    fflush(stdout);
    for (int i = 0; i < N; i++) {
        if ((kids[i] = fork()) < 0) return 1;
        if (kids[i] == 0) {
            for (long k = 0; k < work; k++)
                child_work();
            if (i % 3 == 0) _exit(0);
            if (i % 3 == 1) exit(i);
            kill(getpid(), SIGKILL);
        }
    }
    for (int i = 0; i < N; i++) {
        int st;
        if (waitpid(kids[i], &st, 0) != kids[i]) return 1;
    }
    return 0;
}

static int netns_mode(const char *root)
{
    if (unshare(CLONE_NEWNET) != 0 || (root && (chroot(root) != 0 || chdir("/") != 0))) {
        printf("netns: unavailable\n");
        return 0;
    }
    fflush(stdout);
    pid_t kids[3];
    for (int i = 0; i < 3; i++) {
        if ((kids[i] = fork()) < 0) return 1;
        if (kids[i] == 0) {
            for (int k = 0; k < 1000; k++)
                child_work();
            _exit(0);
        }
    }
    for (int i = 0; i < 3; i++) {
        int st;
        if (waitpid(kids[i], &st, 0) != kids[i] || !WIFEXITED(st) || WEXITSTATUS(st)) return 1;
    }
    tick();
    return 0;
}

static int euid_mode(void)
{
    if (setresuid(65534, 65534, 0) != 0) {
        printf("euid: unavailable\n");
        return 0;
    }
    fflush(stdout);
    pid_t p = fork();
    if (p < 0) return 1;
    if (p == 0) {
        for (int k = 0; k < 1000; k++)
            child_work();
        _exit(0);
    }
    int st;
    if (waitpid(p, &st, 0) != p || !WIFEXITED(st) || WEXITSTATUS(st)) return 1;
    tick();
    return 0;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "daemon")) return daemon_mode();
    if (!strcmp(mode, "children")) return children_mode(argc > 2 ? atol(argv[2]) : 20000);
    if (!strcmp(mode, "netns")) return netns_mode(argc > 2 ? argv[2] : NULL);
    if (!strcmp(mode, "euid")) return euid_mode();
    if (!strcmp(mode, "static")) {
        printf("static ran\n");
        return 0;
    }
    if (!strcmp(mode, "envchild")) {
        for (char **e = environ; *e; e++)
            printf("%s\n", *e);
        child_work();
        return 0;
    }
    if (!strcmp(mode, "dlmopen") && argc > 2) {
        for (int k = 0; k < 2; k++) {
            void *h = dlmopen(LM_ID_NEWLM, argv[2], RTLD_NOW);
            int (*work)(int) = h ? (int (*)(int))dlsym(h, "dl_outer") : NULL;
            if (!work) {
                printf("dlmopen: %s\n", dlerror());
                return 1;
            }
            int s = 0;
            for (int i = 0; i < 5; i++)
                s += work(i);
            printf("dlmopen: sum %d\n", s);
        }
        tick();
        return 0;
    }
    tick();
    fflush(stdout);
    if (!strcmp(mode, "plain")) {
        tick();
        tick();
        return 0;
    }
    stop_prof_timer();
    if (!strcmp(mode, "reexec") && argc > 2) {
        int n = atoi(argv[2]);
        if (n <= 0) return 0;
        char next[16];
        snprintf(next, sizeof next, "%d", n - 1);
        char *args[] = {argv[0], "reexec", next, NULL};
        execv("/proc/self/exe", args);
    } else if (!strcmp(mode, "exectrue")) {
        execl("/bin/true", "true", (char *)NULL);
    } else if (!strcmp(mode, "execstatic") && argc > 2) {
        execl(argv[2], "bsession", "static", (char *)NULL);
    } else if (!strcmp(mode, "execenv")) {
        char *env[] = {"A=1", NULL};
        execle("/proc/self/exe", "bsession", "envchild", (char *)NULL, env);
    } else if (!strcmp(mode, "execenv2")) {
        char *env[] = {"A=1", "LD_PRELOAD=libm.so.6", "B=2", NULL};
        execle("/proc/self/exe", "bsession", "envchild", (char *)NULL, env);
    } else if (!strcmp(mode, "spawnenv")) {
        char *env[] = {"A=1", NULL}, *args[] = {"bsession", "envchild", NULL};
        pid_t p;
        int st;
        if (posix_spawn(&p, "/proc/self/exe", NULL, NULL, args, env) != 0) return 1;
        waitpid(p, &st, 0);
        return WIFEXITED(st) ? WEXITSTATUS(st) : 1;
    } else {
        fprintf(stderr, "bsession: bad mode %s\n", mode);
        return 2;
    }
    perror("exec");
    return 127;
}
