/* bgetpid: a program that defines getpid() and getppid() itself (instrumented, counting its
 * calls), as a program may that interposes them (a sandbox, a test double). The tracer asks the
 * kernel for its pids: it must never call these, at start, at a fork or at the end.
 *   usage: bgetpid
 * main -> ask 2 (-> getpid, getppid each); main -> forker -> fork: the child runs
 * child_main -> ask 1 and exit(0)s from there (the tracer's end runs in the child); the parent
 * waits for it, prints its counts, returns 0.
 * parent tree {main, main;ask 2, main;ask;getpid 2, main;ask;getppid 2, main;forker}
 * child  tree {main, main;forker (inherited), main;forker;child_main,
 *              main;forker;child_main;ask, ...;ask;getpid, ...;ask;getppid}
 */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include "behave.h"

static volatile int pid_calls, ppid_calls;

NOINLINE pid_t getpid(void)
{
    pid_calls++;
    return (pid_t)syscall(SYS_getpid);
}

NOINLINE pid_t getppid(void)
{
    ppid_calls++;
    return (pid_t)syscall(SYS_getppid);
}

NOINLINE long ask(void)
{
    long v = (long)getpid() + (long)getppid();
    KEEP(v);
    return v;
}

NOINLINE void child_main(void)
{
    pid_calls = ppid_calls = 0;
    ask();
    printf("child: getpid %d, getppid %d\n", pid_calls, ppid_calls);
    fflush(stdout);
    exit(pid_calls == 1 && ppid_calls == 1 ? 0 : 1);
}

NOINLINE int forker(void)
{
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) child_main();
    int st = 0;
    waitpid(p, &st, 0);
    return WIFEXITED(st) ? WEXITSTATUS(st) : 99;
}

int main(void)
{
    ask();
    ask();
    int child = forker();
    printf("parent: getpid %d, getppid %d, child %d\n", pid_calls, ppid_calls, child);
    return pid_calls == 2 && ppid_calls == 2 && child == 0 ? 0 : 1;
}
