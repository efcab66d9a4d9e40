/*
 * ftrace-ctl - change what a process running under ftrace-run traces, while it runs.
 *
 *   ftrace-ctl PID status|on|off|filter EXPR|depth N|threshold T|libcall on|off|args S|retval S
 *
 * It checks what it can before touching the process (the arguments, the filter's syntax, that
 * the process exists and has libftrace.so loaded), then talks to the process's control server
 * (preload/runtime/control.c), which listens on its Unix socket from the process's start: no signal
 * is ever sent to the process. One request line goes out; the reply's lines are printed, and its
 * last line ("ok" or "error: ...") gives the exit status.
 *
 * Exit status: 0 done, 1 the process could not be reached or refused, 2 bad usage or a filter
 * that selects none of the process's functions (refused by the process: the filter in force
 * stays).
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ftr_argspec.h"
#include "ftr_env.h"
#include "ftr_filter.h"
#include "readall.h"

#define REQUEST_MAX 4096   /* the server's limit, newline included */
#define REPLY_MIN_MS 15000 /* a reply may wait for a re-patch */
#define DEPTH_MAX 1000000u
/* preload/runtime/settings.c's and values.c's refusal */
#define NO_MATCH "no function matches the "

static const char *prog = "ftrace-ctl";
static int target_pid;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [OPTIONS] PID COMMAND [ARG]\n"
            "Change what process PID, running under ftrace-run, traces.\n"
            "\n"
            "Commands:\n"
            "  status           print the tracing state, filter and counters\n"
            "  on | off         start / stop tracing (off: every site is a NOP again)\n"
            "  filter EXPR      trace only the functions EXPR selects ('' for all; see\n"
            "                   docs/filters.md: globs, -exclusions, module:glob, @regex;\n"
            "                   C++ names as 'ns::Cls::*' or 'ns::Cls::f(int, int)')\n"
            "  args SPECS       record these arguments from now on (ftrace-run -A; ';'\n"
            "                   between specs, '' for none; docs/arguments.md)\n"
            "  retval SPECS     record these return values (ftrace-run -R; '' for none)\n"
            "  libcall on|off   trace library calls (calls through the PLT/GOT) or not\n"
            "  depth N          record calls up to depth N (0: no limit)\n"
            "  threshold T      keep only calls lasting at least T: 10us, 1.5ms, 2s, 500ns;\n"
            "                   a bare number is in microseconds (0: keep all)\n"
            "\n"
            "Options (before the command):\n"
            "  -t, --timeout MS how long to wait for the process to start answering\n"
            "                   (default 3000)\n"
            "  -h, --help       this help\n"
            "\n"
            "Only the process's owner (or root) may control it. Exit status: 0 done, 1 the\n"
            "process could not be reached or refused the request, 2 bad usage or a filter\n"
            "that matches none of the process's functions (the filter in force stays).\n",
            prog);
}

static int fail(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static int fail(int code, const char *fmt, ...)
{
    char msg[1200];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "%s: %s\n", prog, msg);
    return code;
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void sleep_ms(unsigned ms)
{
    struct timespec d = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
    nanosleep(&d, NULL);
}

/* A decimal number in [lo, hi]. @return 0 or -1 */
static int parse_long(const char *s, long lo, long hi, long *v)
{
    if (!*s || *s < '0' || *s > '9') return -1;
    char *end;
    errno = 0;
    long x = strtol(s, &end, 10);
    if (errno || *end || x < lo || x > hi) return -1;
    *v = x;
    return 0;
}

/* Reads a whole /proc file. @return malloc'ed bytes (NUL-terminated, length in *len) or NULL
 * (errno). */
/* A thread of the process that is not a zombie: after the main thread called pthread_exit(),
 * /proc/PID itself is a zombie whose maps are empty while the other threads run on. */
static int live_tid = 0;

static char *read_proc(const char *what, size_t *len)
{
    char path[96];
    if (live_tid && strcmp(what, "stat") != 0)
        snprintf(path, sizeof path, "/proc/%d/task/%d/%s", target_pid, live_tid, what);
    else
        snprintf(path, sizeof path, "/proc/%d/%s", target_pid, what);
    return ftr_read_all(path, len);
}

/* The value of "Name:" in /proc/PID/status, or NULL */
static const char *status_field(const char *status, const char *name)
{
    size_t nl = strlen(name);
    for (const char *l = status; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        if (!strncmp(l, name, nl) && l[nl] == ':') return l + nl + 1;
    return NULL;
}

/* The value of NAME in the process's initial environment (/proc/PID/environ), or NULL */
static const char *environ_get(const char *env, size_t len, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; i < len; i += strlen(env + i) + 1)
        if (!strncmp(env + i, name, nl) && env[i + nl] == '=') return env + i + nl + 1;
    return NULL;
}

/* Is libftrace.so mapped in the process? @return 1, 0, or -1 (errno) */
static int has_preload(void)
{
    char *maps = read_proc("maps", NULL);
    if (!maps) return -1;
    int found = 0;
    const char *want = "/" FTR_PRELOAD_NAME;
    size_t wl = strlen(want);
    for (char *l = strtok(maps, "\n"); l && !found; l = strtok(NULL, "\n")) {
        char *del = strstr(l, " (deleted)");
        size_t ll = del ? (size_t)(del - l) : strlen(l);
        found = ll >= wl && !memcmp(l + ll - wl, want, wl);
    }
    free(maps);
    return found;
}

/* The process's state letter (/proc/PID/stat), or 0 when it is gone */
static char state_of(const char *stat)
{
    const char *p = strrchr(stat, ')');
    return p && p[1] == ' ' ? p[2] : '?';
}

/* The process's state; a zombie main thread with live threads counts as their state. */
static char proc_state(void)
{
    char *stat = read_proc("stat", NULL);
    if (!stat) return 0;
    char st = state_of(stat);
    free(stat);
    if (st != 'Z') return st;
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d/task", target_pid);
    DIR *d = opendir(dir);
    struct dirent *de;
    while (d && (de = readdir(d))) {
        int tid = atoi(de->d_name);
        if (tid <= 0 || tid == target_pid) continue;
        char path[96], buf[512];
        snprintf(path, sizeof path, "/proc/%d/task/%d/stat", target_pid, tid);
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0) close(fd);
        if (n <= 0) continue;
        buf[n] = 0;
        char t = state_of(buf);
        if (t != 'Z' && t != 'X') {
            live_tid = tid;
            st = t;
            break;
        }
    }
    if (d) closedir(d);
    return st;
}

/* May we act on the process as its owner (same real or effective uid), or as root? */
static int same_owner(void)
{
    char *status = read_proc("status", NULL);
    const char *v = status ? status_field(status, "Uid") : NULL;
    unsigned r, e;
    int same = geteuid() == 0 || !v || sscanf(v, "%u %u", &r, &e) != 2 || r == geteuid() ||
               e == geteuid() || r == getuid() || e == getuid();
    free(status);
    return same;
}

/* @return a connected socket, or -errno */
static int try_connect(const char *path)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) return -ENAMETOOLONG;
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) return -errno;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) == 0) return fd;
    int e = errno;
    close(fd);
    return -e;
}

static int talk(int fd, const char *request, unsigned reply_ms)
{
    size_t len = strlen(request), off = 0;
    while (off < len) {
        ssize_t n = send(fd, request + off, len - off, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0)
            return fail(1, "cannot send the request to process %d: %s", target_pid,
                        strerror(errno));
        off += (size_t)n;
    }
    shutdown(fd, SHUT_WR);

    size_t cap = 65536, n = 0;
    char *reply = malloc(cap);
    uint64_t deadline = now_ms() + reply_ms;
    for (;;) {
        if (!reply) return fail(1, "out of memory");
        if (n + 1 >= cap) {
            if (cap >= (16u << 20)) break;
            char *bigger = realloc(reply, cap *= 2);
            if (!bigger) free(reply);
            reply = bigger;
            continue;
        }
        uint64_t now = now_ms();
        if (now >= deadline) {
            free(reply);
            return fail(1,
                        "no answer from process %d within %u ms (the request may still be "
                        "carried out)",
                        target_pid, reply_ms);
        }
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, (int)(deadline - now)) <= 0) continue;
        ssize_t r = recv(fd, reply + n, cap - n - 1, 0);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            free(reply);
            return fail(1, "cannot read the answer of process %d: %s", target_pid, strerror(errno));
        }
        if (r == 0) break;
        n += (size_t)r;
    }
    reply[n] = 0;
    /* the last line is the verdict; the ones before it are output */
    while (n && reply[n - 1] == '\n')
        reply[--n] = 0;
    char *last = strrchr(reply, '\n');
    last = last ? last + 1 : reply;
    fwrite(reply, 1, (size_t)(last - reply), stdout);
    int rc;
    if (!strcmp(last, "ok"))
        rc = 0;
    else if (!strncmp(last, "error: ", 7))
        /* a filter that selects none of the process's functions: refused, like bad usage
         * (only the process knows its functions, so it decides) */
        rc = fail(strncmp(last + 7, NO_MATCH, strlen(NO_MATCH)) ? 1 : 2, "%s", last + 7);
    else
        rc = fail(1, "process %d closed the connection without an answer", target_pid);
    free(reply);
    return rc;
}

/* Checks the command and its argument, and builds the request line. @return 0, or 2 */
static int build_request(int argc, char **argv, char *req, size_t reqlen)
{
    const char *cmd = argv[0], *arg = argc > 1 ? argv[1] : NULL;
    static const char *const plain[] = {"status", "on", "off"};
    static const char *const with_arg[] = {"filter", "depth",  "threshold",
                                           "args",   "retval", "libcall"};
    for (size_t i = 0; i < sizeof plain / sizeof plain[0]; i++)
        if (!strcmp(cmd, plain[i])) {
            if (argc > 1) return fail(2, "'%s' takes no argument (see --help)", cmd);
            snprintf(req, reqlen, "%s\n", cmd);
            return 0;
        }
    int known = 0;
    for (size_t i = 0; i < sizeof with_arg / sizeof with_arg[0]; i++)
        known |= !strcmp(cmd, with_arg[i]);
    if (!known)
        return fail(2,
                    "unknown command '%s' (expected status, on, off, filter, args, retval, "
                    "libcall, depth or threshold)",
                    cmd);
    if (argc != 2)
        return fail(2, "'%s' takes one argument%s (see --help)", cmd,
                    !strcmp(cmd, "filter") ? " (quote the expression)" : "");
    if (strchr(arg, '\n') || strchr(arg, '\r')) return fail(2, "the %s must be on one line", cmd);
    if (!strcmp(cmd, "filter")) {
        char err[512];
        struct ftr_filter *f = ftr_filter_parse(arg, err, sizeof err);
        if (!f) return fail(2, "%s", err);
        ftr_filter_free(f);
    } else if (!strcmp(cmd, "args") || !strcmp(cmd, "retval")) {
        char err[512];
        struct ftr_argspecs sp = {0};
        int bad = ftr_argspecs_parse(arg, !strcmp(cmd, "retval"), &sp, err, sizeof err) < 0;
        ftr_argspecs_free(&sp);
        if (bad) return fail(2, "%s", err);
    } else if (!strcmp(cmd, "libcall")) {
        if (strcmp(arg, "on") && strcmp(arg, "off"))
            return fail(2, "bad libcall '%s' (expected on or off)", arg);
    } else if (!strcmp(cmd, "depth")) {
        long d;
        if (parse_long(arg, 0, DEPTH_MAX, &d) < 0)
            return fail(2, "bad depth '%s' (expected 0 to %u; 0: no limit)", arg, DEPTH_MAX);
    } else {
        uint64_t ns;
        if (ftr_parse_duration(arg, &ns) < 0)
            return fail(2,
                        "bad threshold '%s' (expected a duration like 10us, 1.5ms, 2s; a "
                        "bare number is in us)",
                        arg);
    }
    if ((size_t)snprintf(req, reqlen, "%s %s\n", cmd, arg) >= reqlen)
        return fail(2, "the %s is too long (at most %d bytes)", cmd, REQUEST_MAX - 20);
    return 0;
}

int main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"timeout", required_argument, NULL, 't'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    long timeout_ms = 3000, pid = 0;
    int c;
    opterr = 0;
    /* options go before the command (so that "filter -b" means an exclusion): before PID or
     * right after it */
    for (;;) {
        c = getopt_long(argc, argv, "+t:h", opts, NULL);
        if (c == -1) {
            if (pid || optind >= argc) break;
            if (parse_long(argv[optind], 1, INT_MAX, &pid) < 0)
                return fail(2, "bad process id '%s'", argv[optind]);
            optind++;
            continue;
        }
        switch (c) {
        case 't':
            if (parse_long(optarg, 1, 3600000, &timeout_ms) < 0)
                return fail(2, "bad timeout '%s' (expected milliseconds, 1 to 3600000)", optarg);
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            if (optopt)
                return fail(2, "option '-%c' %s (see --help)", optopt,
                            strchr("t", optopt) ? "needs an argument" : "is unknown");
            return fail(2, "unknown option '%s' (see --help)", argv[optind - 1]);
        }
    }
    if (!pid) return fail(2, "no process given (see --help)");
    target_pid = (int)pid;
    if (optind >= argc) return fail(2, "no command given (see --help)");
    char request[REQUEST_MAX];
    int rc = build_request(argc - optind, argv + optind, request, sizeof request);
    if (rc) return rc;

    /* the process: there, with the preload, and ours to control */
    char state = proc_state();
    if (!state) return fail(1, "no process %d", target_pid);
    if (state == 'Z' || state == 'X') return fail(1, "process %d has exited", target_pid);
    int has = has_preload();
    if (has < 0 && (errno == EACCES || errno == EPERM) && !same_owner())
        return fail(1, "process %d belongs to another user (permission denied)", target_pid);
    if (has < 0)
        return fail(1, "cannot read the mappings of process %d: %s", target_pid, strerror(errno));
    if (!has)
        return fail(1, "process %d does not have %s loaded (start it with ftrace-run)", target_pid,
                    FTR_PRELOAD_NAME);
    char *status = read_proc("status", NULL);
    size_t envlen = 0;
    char *env = read_proc("environ", &envlen);
    if (!status) return fail(1, "no process %d", target_pid);
    const char *uid_line = status_field(status, "Uid");
    unsigned ruid = 0, euid = 0;
    if (!uid_line || sscanf(uid_line, "%u %u", &ruid, &euid) != 2) euid = (unsigned)geteuid();

    /* its socket: where its libftrace.so put it, from the environment it started with */
    const char *xdg = env ? environ_get(env, envlen, "XDG_RUNTIME_DIR") : getenv("XDG_RUNTIME_DIR");
    char *xdg_copy = xdg ? strdup(xdg) : NULL;
    if (xdg_copy)
        setenv("XDG_RUNTIME_DIR", xdg_copy, 1);
    else
        unsetenv("XDG_RUNTIME_DIR");
    free(xdg_copy);
    char path[512];
    ftr_ctl_socket_path(euid, target_pid, path, sizeof path);
    if (!path[0]) {
        free(status);
        free(env);
        return fail(1, "process %d has no control socket: its $XDG_RUNTIME_DIR is too long",
                    target_pid);
    }

    /* The server listens from the process's start; a process started a moment ago may not
     * have bound its socket yet. No signal is ever sent: it could land on a sleeping thread. */
    int fd;
    uint64_t deadline = now_ms() + (uint64_t)timeout_ms;
    while ((fd = try_connect(path)) < 0 && now_ms() < deadline) {
        if (fd == -EACCES || fd == -EPERM) break;
        if (kill(target_pid, 0) < 0 && errno == ESRCH) break;
        sleep_ms(20);
    }
    free(status);
    free(env);
    if (fd == -EACCES || fd == -EPERM)
        return fail(1, "cannot reach the control socket %s of process %d: permission denied", path,
                    target_pid);
    if (fd < 0) {
        state = proc_state();
        if (!state || state == 'Z' || state == 'X') return fail(1, "process %d exited", target_pid);
        if (state == 'T' || state == 't')
            return fail(1, "process %d is stopped and cannot answer", target_pid);
        if (fd == -ENOENT || fd == -ECONNREFUSED)
            return fail(1,
                        "process %d has no control socket (%s): %s is loaded but not tracing, "
                        "or its control is off (see its stderr)",
                        target_pid, path, FTR_PRELOAD_NAME);
        return fail(1, "process %d did not answer within %ld ms (%s: %s; its stderr may say why)",
                    target_pid, timeout_ms, path, strerror(-fd));
    }
    /* a stopped process has its socket but cannot answer: do not leave it a request */
    state = proc_state();
    if (state == 'T' || state == 't') {
        close(fd);
        return fail(1, "process %d is stopped and cannot answer", target_pid);
    }
    unsigned reply_ms = timeout_ms > REPLY_MIN_MS ? (unsigned)timeout_ms : REPLY_MIN_MS;
    rc = talk(fd, request, reply_ms);
    close(fd);
    return rc;
}
