/* bproc: new processes. usage: bproc MODE
 *   fork    main -> forker -> fork(); the child runs child_main -> child_work x 3 and exits(7)
 *           from child_main; the parent calls parent_work x 2 and waits.
 *           parent tree {main, main;forker, main;parent_work 2}; the child's trace shows
 *           child_main -> child_work x 3 (below whatever of main;forker it inherited).
 *   forkret main -> forker2 -> fork(); the child calls child_work x 2 and returns from forker2
 *           and main (so the frames it inherited close): parent {main, main;forker2}, child
 *           {main, main;forker2, main;forker2;child_work 2}, whose main and forker2 are not its
 *           calls: --summary counts main 1, forker2 1, child_work 2.
 *   vfork   main -> spawner: vfork(), the child calls vfork_child_work (traced: never the
 *           parent's call) and execl(/proc/self/exe, "child", "vfork"); main -> after.
 *   spawn   main -> spawner: posix_spawn(/proc/self/exe, "child", "spawn"); main -> after.
 *   system  main -> spawner: system("echo system: shell ran"); main -> after.
 *           parent tree for these three: {main, main;spawner, main;after}; output unchanged.
 *   exec    main -> before_exec -> child_image_work, then execve(/proc/self/exe, "exec-child")
 *           with an environment stripped of LD_PRELOAD and FTRACE_*: the tracer must follow
 *           the new image. trees: first image {main, main;before_exec,
 *           main;before_exec;child_image_work} (main and before_exec may stay open), new image
 *           {main, main;exec_child_work 3}, each in its own section of the report.
 *   child   (the spawned images) main -> child_image_work; prints a line.
 *   many    a shell-like loop: main -> spawn_many -> spawn_one x 200, each one child, waited for:
 *           i % 4 == 0  fork + exec /bin/true (uninstrumented: no section)
 *           i % 4 == 1  fork + exec of this program "image": {main, main;image_work}
 *           i % 4 == 2  fork only, records: below the inherited main;spawn_many;spawn_one,
 *                       fork_work, then _exit (even i / 4) or exit (odd): those three stay open
 *           i % 4 == 3  fork only, _exit at once: records nothing, no section
 *           and first main -> quiet_child: a fork child that records nothing for 300 ms (many
 *           writer periods), then _exits; waited for at the end. Parent tree {main,
 *           main;quiet_child, main;spawn_many, main;spawn_many;spawn_one 200}. The pids go to
 *           bp_many.txt ("KIND PID" lines: parent, true, image, fork, quiet).
 *   daemon  main -> parent_work 2, then daemon(1, 1) (noclose: the daemon keeps our stdout,
 *           so the test waits for it); the daemon runs child_work x 3, prints and returns.
 *           Trees: the parent {main, main;parent_work 2} (main left open: the parent ends in
 *           daemon()), the daemon: child_work 3 below what it inherited.
 */
#define _GNU_SOURCE
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

NOINLINE int child_work(int i)
{
    sink += i;
    return i;
}
NOINLINE int parent_work(int i)
{
    sink += i;
    return i;
}
NOINLINE void child_main(void)
{
    int s = 0;
    for (int i = 1; i <= 3; i++)
        s += child_work(i);
    printf("fork: child sum %d\n", s);
    exit(7);
}
NOINLINE pid_t forker(void)
{
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) child_main();
    return p;
}

static volatile long vfork_child_sink;
NOINLINE void vfork_child_work(void)
{
    vfork_child_sink++; /* on the parent's memory: nothing else */
}

NOINLINE pid_t spawner(const char *how)
{
    fflush(stdout);
    pid_t p = -1;
    if (!strcmp(how, "vfork")) {
        p = vfork();
        if (p == 0) {
            vfork_child_work(); /* the child runs traced code before its exec */
            stop_prof_timer();
            execl("/proc/self/exe", "bproc", "child", "vfork", (char *)NULL);
            _exit(127);
        }
    } else if (!strcmp(how, "spawn")) {
        char *args[] = {"bproc", "child", "spawn", NULL};
        if (posix_spawn(&p, "/proc/self/exe", NULL, NULL, args, environ) != 0) p = -1;
    } else {
        int st = system("echo system: shell ran");
        p = -st - 1000; /* no child to wait for */
        printf("system: status %d\n", st);
    }
    return p;
}
NOINLINE void after(void)
{
    sink++;
}

NOINLINE void child_image_work(void)
{
    sink++;
}
NOINLINE void image_work(void)
{
    sink++;
}
NOINLINE void fork_work(void)
{
    sink++;
}

static FILE *many_log;
NOINLINE pid_t quiet_child(void)
{
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        struct timespec d = {0, 300 * 1000 * 1000};
        nanosleep(&d, NULL);
        _exit(0);
    }
    return p;
}
NOINLINE void spawn_one(int i)
{
    static const char *const kinds[] = {"true", "image", "fork", "quiet"};
    fflush(stdout);
    fflush(many_log);
    pid_t p = fork();
    if (p == 0) {
        if (i % 4 == 0) {
            stop_prof_timer();
            execl("/bin/true", "true", (char *)NULL);
        } else if (i % 4 == 1) {
            stop_prof_timer();
            execl("/proc/self/exe", "bproc", "image", (char *)NULL);
        } else if (i % 4 == 2) {
            fork_work();
            if ((i / 4) % 2) exit(0);
        }
        _exit(i % 4 < 2 ? 127 : 0);
    }
    int st = -1;
    if (p > 0) waitpid(p, &st, 0);
    if (p < 0 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) printf("many: child %d failed\n", i);
    fprintf(many_log, "%s %d\n", kinds[i % 4], (int)p);
}
NOINLINE pid_t forker2(void)
{
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        child_work(1);
        child_work(2);
    }
    return p;
}
NOINLINE void spawn_many(void)
{
    for (long i = 0; i < scaled(200); i++)
        spawn_one(i);
}
NOINLINE int exec_child_work(int i)
{
    sink += i;
    return i;
}
NOINLINE void before_exec(void)
{
    child_image_work();
    fflush(stdout);
    char *envp[256];
    int n = 0;
    for (char **e = environ; *e && n < 255; e++)
        if (strncmp(*e, "LD_PRELOAD=", 11) && strncmp(*e, "FTRACE_", 7)) envp[n++] = *e;
    envp[n] = NULL;
    char *args[] = {"bproc", "exec-child", NULL};
    stop_prof_timer();
    execve("/proc/self/exe", args, envp);
    perror("execve");
    exit(1);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "forkret")) {
        pid_t p = forker2();
        if (p == 0) return 0; /* the child, back from forker2 */
        int st;
        waitpid(p, &st, 0);
        printf("forkret: child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return 0;
    }
    if (!strcmp(mode, "fork")) {
        pid_t p = forker();
        int s = parent_work(1) + parent_work(2);
        int st;
        waitpid(p, &st, 0);
        printf("fork: parent sum %d, child exit %d\n", s, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return 81;
    }
    if (!strcmp(mode, "vfork") || !strcmp(mode, "spawn") || !strcmp(mode, "system")) {
        pid_t p = spawner(mode);
        int st = 0;
        if (p > 0) waitpid(p, &st, 0);
        after();
        printf("%s: child exit %d\n", mode, WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return 82;
    }
    if (!strcmp(mode, "exec")) {
        printf("exec: before\n");
        before_exec();
        return 1;
    }
    if (!strcmp(mode, "daemon")) {
        int s = parent_work(1) + parent_work(2);
        fflush(stdout);
        if (daemon(1, 1) < 0) return 9;
        for (int i = 1; i <= 3; i++)
            s += child_work(i);
        printf("daemon: sum %d\n", s);
        return 84;
    }
    if (!strcmp(mode, "exec-child")) {
        int s = 0;
        for (int i = 1; i <= 3; i++)
            s += exec_child_work(i);
        printf("exec-child: sum %d\n", s);
        return 83;
    }
    if (!strcmp(mode, "many")) {
        many_log = fopen("bp_many.txt", "w");
        if (!many_log) return 3;
        fprintf(many_log, "parent %d\n", (int)getpid());
        pid_t q = quiet_child();
        spawn_many();
        int st = -1;
        waitpid(q, &st, 0);
        fprintf(many_log, "quiet %d\n", (int)q);
        fclose(many_log);
        printf("many: done, quiet child exit %d\n", WIFEXITED(st) ? WEXITSTATUS(st) : -1);
        return 85;
    }
    if (!strcmp(mode, "image")) {
        image_work();
        return 0;
    }
    if (!strcmp(mode, "child")) {
        child_image_work();
        printf("child image (%s)\n", argc > 2 ? argv[2] : "?");
        return 0;
    }
    fprintf(stderr, "usage: bproc fork|vfork|spawn|system|exec\n");
    return 2;
}
