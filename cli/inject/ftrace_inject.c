/*
 * ftrace-inject - load a shared object into a running process (cli/inject/inject.h): the
 * injector's test driver, until ftrace-run -p PID uses it.
 *
 *   ftrace-inject [-w MS] PID LIBRARY
 *
 * Prints "injected LIBRARY into PID: thread TID held N us" and exits 0, or prints
 * "ftrace-inject: REASON" on stderr and exits 2 (refused, or failed: the process is left as it
 * was either way).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "inject.h"

static const char *prog = "ftrace-inject";

static int usage(void)
{
    fprintf(stderr,
            "%s: usage: %s [-w MS] PID LIBRARY\n"
            "Loads LIBRARY into running process PID (dlopen in one of its threads that waits\n"
            "in a system call). -w MS: look for such a thread this long (default %d).\n",
            prog, prog, FTR_INJECT_WAIT_MS);
    return 2;
}

/* A decimal number in [1, max]. @return 0 or -1 */
static int parse_num(const char *s, long max, long *v)
{
    char *end;
    if (*s < '0' || *s > '9') return -1;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || *end || x < 1 || x > max) return -1;
    *v = x;
    return 0;
}

int main(int argc, char **argv)
{
    struct ftr_inject_opts opts = {0};
    int opt;
    long v;
    while ((opt = getopt(argc, argv, "+w:h")) != -1) {
        if (opt == 'w' && parse_num(optarg, 3600000, &v) == 0)
            opts.wait_ms = (unsigned)v;
        else
            return usage();
    }
    if (argc - optind != 2 || parse_num(argv[optind], INT_MAX, &v) < 0) return usage();
    pid_t pid = (pid_t)v;
    const char *lib = argv[optind + 1];
    char abs[PATH_MAX];
    /* an absolute path is the process's (its root may not be ours); a relative one is ours */
    if (lib[0] != '/' && !realpath(lib, abs)) {
        fprintf(stderr, "%s: %s: %s\n", prog, lib, strerror(errno));
        return 2;
    }
    struct ftr_inject_result res;
    char err[1024];
    if (ftr_inject(pid, lib[0] == '/' ? lib : abs, &opts, &res, err, sizeof err) < 0) {
        fprintf(stderr, "%s: %s\n", prog, err);
        return 2;
    }
    printf("injected %s into %d: thread %d held %llu us\n", lib, (int)pid, (int)res.tid,
           (unsigned long long)(res.held_ns / 1000));
    return 0;
}
