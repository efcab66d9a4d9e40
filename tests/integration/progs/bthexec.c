/* bthexec: execve() from a thread that is not the main thread (the kernel ends every other
 * thread, and the exec'ing thread takes over the process's pid). usage: bthexec MODE
 *   keep    main -> waiter starts thread execer and waits for it in pthread_join; execer ->
 *           t_work, then execve(/proc/self/exe, "exec-child") with the environment as it is.
 *   strip   the same with an environment stripped of LD_PRELOAD and FTRACE_*: the tracer must
 *           follow the new image all the same.
 *   trees: first image: main {main 1, main;waiter 1}, open [main waiter]; thread {execer 1,
 *          execer;t_work 1}, open [execer]; new image (same pid): {main 1,
 *          main;exec_child_work 3}, nothing open. Exit status 83 (the new image's).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "behave.h"

extern char **environ;
static volatile long sink;
static int strip;

NOINLINE void t_work(void)
{
    sink++;
}
NOINLINE int exec_child_work(int i)
{
    sink += i;
    return i;
}
NOINLINE void *execer(void *arg)
{
    (void)arg;
    t_work();
    char *envp[256];
    int n = 0;
    for (char **e = environ; *e && n < 255; e++)
        if (!strip || (strncmp(*e, "LD_PRELOAD=", 11) && strncmp(*e, "FTRACE_", 7))) envp[n++] = *e;
    envp[n] = NULL;
    char *args[] = {"bthexec", "exec-child", NULL};
    fflush(stdout);
    stop_prof_timer();
    execve("/proc/self/exe", args, envp);
    perror("execve");
    exit(1);
}
NOINLINE void waiter(void)
{
    pthread_t t;
    printf("thread-exec: before\n");
    pthread_create(&t, NULL, execer, NULL);
    pthread_join(t, NULL);
    printf("thread-exec: joined (the exec failed)\n");
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "exec-child")) {
        int s = 0;
        for (int i = 1; i <= 3; i++)
            s += exec_child_work(i);
        printf("exec-child: sum %d\n", s);
        return 83;
    }
    strip = !strcmp(mode, "strip");
    waiter();
    return 1;
}
