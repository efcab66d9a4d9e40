/*
 * forkexec.c - what a new process costs a traced program: N children, one after another.
 *
 * Built with -pg -mfentry (bench/forkexec.py does it) so that it is traced itself; every mode
 * is a loop main -> spawn_loop -> one_child x N:
 *   exec N      fork(), the child execv()s /bin/true (uninstrumented), the parent waits
 *   fork N      fork(), the child _exit(0)s at once (records nothing of its own)
 *   forkrec N   fork(), the child calls child_work() (records) and then _exit(0)s
 *   vfork N     vfork() + execv(/bin/true)
 *   spawn N     posix_spawn(/bin/true)
 *   system N    system("/bin/true") (through /bin/sh)
 *   self N      fork() + execv() of this program in mode "leaf": an instrumented image that
 *               records a few calls
 * Prints "MODE N wall_ns_per_child" on stdout. CPU time is the caller's to take (wait4 of this
 * process: it reaps every child, so their CPU time is counted in its RUSAGE_CHILDREN).
 */
#define _GNU_SOURCE
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

extern char **environ;
static volatile long sink;
static const char *self_path;

NOINLINE int child_work(int i)
{
    sink += i;
    return i;
}

static void wait_for(pid_t p)
{
    int st;
    if (p > 0) waitpid(p, &st, 0);
}

NOINLINE void one_child(const char *mode)
{
    char *tru[] = {"true", NULL};
    pid_t p = -1;
    if (!strcmp(mode, "exec")) {
        if ((p = fork()) == 0) {
            execv("/bin/true", tru);
            _exit(127);
        }
    } else if (!strcmp(mode, "fork")) {
        if ((p = fork()) == 0) _exit(0);
    } else if (!strcmp(mode, "forkrec")) {
        if ((p = fork()) == 0) {
            for (int i = 0; i < 3; i++)
                child_work(i);
            _exit(0);
        }
    } else if (!strcmp(mode, "vfork")) {
        if ((p = vfork()) == 0) {
            execv("/bin/true", tru);
            _exit(127);
        }
    } else if (!strcmp(mode, "spawn")) {
        if (posix_spawn(&p, "/bin/true", NULL, NULL, tru, environ) != 0) p = -1;
    } else if (!strcmp(mode, "system")) {
        if (system("/bin/true") != 0) sink++;
    } else if (!strcmp(mode, "self")) {
        char *args[] = {"forkexec", "leaf", NULL};
        if ((p = fork()) == 0) {
            execv(self_path, args);
            _exit(127);
        }
    }
    wait_for(p);
}

NOINLINE void spawn_loop(const char *mode, long n)
{
    for (long i = 0; i < n; i++)
        one_child(mode);
}

int main(int argc, char **argv)
{
    static char exe[4096];
    ssize_t m = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[m > 0 ? m : 0] = 0;
    self_path = exe;
    if (argc == 2 && !strcmp(argv[1], "leaf")) {
        for (int i = 0; i < 3; i++)
            child_work(i);
        return 0;
    }
    if (argc != 3) {
        fprintf(stderr, "usage: forkexec exec|fork|forkrec|vfork|spawn|system|self N\n");
        return 2;
    }
    long n = atol(argv[2]);
    struct timespec a, b;
    clock_gettime(CLOCK_MONOTONIC, &a);
    spawn_loop(argv[1], n);
    clock_gettime(CLOCK_MONOTONIC, &b);
    double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
    printf("%s %ld %.0f\n", argv[1], n, n ? ns / (double)n : 0.0);
    return 0;
}
