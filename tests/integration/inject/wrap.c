/* wrap.c - runs a program traced (a tiny ptrace tracer) or under a seccomp filter, for
 * inject_tests.py's refusals.
 *
 * usage: wrap trace PROG [ARGS...]    PROG runs as our traced child (PTRACE_TRACEME); its
 *                                     signals are passed on; exits with its status
 *        wrap seccomp PROG [ARGS...]  installs a filter that allows every system call, then
 *                                     executes PROG
 */
#define _GNU_SOURCE
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

int main(int argc, char **argv)
{
    if (argc < 3) return 2;
    if (!strcmp(argv[1], "seccomp")) {
        struct sock_filter allow[] = {BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW)};
        struct sock_fprog prog = {1, allow};
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
            prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0) {
            perror("seccomp");
            return 1;
        }
        execvp(argv[2], argv + 2);
        perror("exec");
        return 1;
    }
    pid_t pid = fork();
    if (pid == 0) {
        ptrace(PTRACE_TRACEME, 0, NULL, NULL);
        execvp(argv[2], argv + 2);
        _exit(127);
    }
    int st;
    while (waitpid(pid, &st, 0) == pid) {
        if (WIFEXITED(st)) return WEXITSTATUS(st);
        if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
        int sig = WSTOPSIG(st) == SIGTRAP ? 0 : WSTOPSIG(st); /* the exec's SIGTRAP is ours */
        ptrace(PTRACE_CONT, pid, NULL, (void *)(long)sig);
    }
    return 1;
}
