/*
 * inject.h - load a shared object into a process that is already running (for ftrace-run -p PID).
 *
 * ftr_inject() makes one thread of the process call dlopen(LIBRARY, RTLD_NOW), through ptrace,
 * and gives it back as it was. The process is someone's production process, so:
 *
 *   - it refuses, with a one-line reason, what it cannot do safely: no such process, another
 *     user's process (unless we may trace it), a process already traced, stopped or a zombie,
 *     one without glibc's libc.so.6 (static, musl) or whose glibc has no dlopen in libc.so.6
 *     (before 2.34), one under a seccomp filter;
 *   - it stops one thread only, never the others, and only a thread blocked in a system call
 *     in which glibc's allocator and loader hold no lock and which the kernel restarts as if
 *     nothing happened (a sleep, poll, select, accept, wait, pause, a read on a pipe...). It looks
 *     for one through /proc without stopping anyone, for up to opts->wait_ms;
 *   - the thread is given back exactly: its registers, its FP/vector state, its signal mask,
 *     and its system call, which restarts as after any ptrace stop (no EINTR, no early return);
 *     a signal sent to it meanwhile is delivered after, as it would have been;
 *   - from the moment the call starts, the thread needs the injector no more: the call returns
 *     through a signal frame that restores it as above, so an injector killed meanwhile
 *     (SIGKILL, a crash) leaves a thread that finishes the call and resumes its wait;
 *   - the thread is held for dlopen's time plus two ptrace stops per system call it makes
 *     (about 1.5 ms in all for a small library, here); the held time is measured and returned.
 *
 * x86_64 only for now: everything that depends on the architecture is in inject_x86_64.c.
 */
#ifndef FTR_INJECT_H
#define FTR_INJECT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define FTR_INJECT_WAIT_MS 3000 /* default time to look for a thread where the call is safe */

struct ftr_inject_opts {
    unsigned wait_ms; /* look for a safe thread this long, every few ms (0: the default) */
};

struct ftr_inject_result {
    pid_t tid;         /* the thread that made the call */
    uint64_t held_ns;  /* from just before PTRACE_INTERRUPT to just after PTRACE_DETACH */
    uint64_t base;     /* where the library's file is mapped in the process: its lowest address */
    unsigned released; /* threads stopped then let go untouched (they had woken up meanwhile) */
};

/* Loads lib_path (an absolute path, as the process sees its file system) into process pid.
 * opts may be NULL. @return 0, or -1 with a one-line reason in err (no newline). */
int ftr_inject(pid_t pid, const char *lib_path, const struct ftr_inject_opts *opts,
               struct ftr_inject_result *res, char *err, size_t errlen);

#endif
