/*
 * ftr_env.h - the contract between ftrace-run (cli/) and libftrace.so (preload/).
 *
 * ftrace-run only sets environment variables and execs the program; the preload reads them in
 * its constructor. Every variable the two share is named here and nowhere else, so that
 * `LD_PRELOAD=libftrace.so FTRACE_OUTPUT=... ./prog` works without ftrace-run.
 */
#ifndef FTR_ENV_H
#define FTR_ENV_H

#define FTR_PRELOAD_NAME "libftrace.so"

#define FTR_ENV_VARS(X)                                                                            \
    X(FTR_ENV_OUTPUT, "FTRACE_OUTPUT", "trace file to write (default ftrace.ftr)")                 \
    X(FTR_ENV_QUIET, "FTRACE_QUIET", "1: print nothing on stderr unless tracing fails")            \
    X(FTR_ENV_BUFSIZE, "FTRACE_BUFSIZE", "per-thread chunk size in KiB (default 256)")             \
    X(FTR_ENV_ZSTD_LEVEL, "FTRACE_ZSTD_LEVEL", "zstd level of the trace file (default 1)")         \
    X(FTR_ENV_FLUSH_MS, "FTRACE_FLUSH_MS", "flush partial buffers every N ms (default 50)")        \
    X(FTR_ENV_SESSION, "FTRACE_SESSION", "session id shared by every process of one run")          \
    X(FTR_ENV_RECORDER, "FTRACE_RECORDER",                                                         \
      "the session's recorder process (set by the tracer); 0: each process writes the file "       \
      "from a thread of its own")                                                                  \
    X(FTR_ENV_NOSITES, "FTRACE_NOSITES",                                                           \
      "files found without sites this session (set by the tracer: dev:ino:size:mtime, ...)")       \
    X(FTR_ENV_DEPTH_MAX, "FTRACE_SHADOW_DEPTH",                                                    \
      "shadow stack entries per thread (default 16384, at most 1048576)")                          \
    X(FTR_ENV_VERBOSE, "FTRACE_VERBOSE", "1: say on stderr what was patched and how")              \
    X(FTR_ENV_FILTER, "FTRACE_FILTER",                                                             \
      "functions to trace (-F): globs, -exclusions, mod:glob, @re")                                \
    X(FTR_ENV_GRAPH_FUNCTION, "FTRACE_GRAPH_FUNCTION", "trace only the call trees under these")    \
    X(FTR_ENV_NOTRACE, "FTRACE_NOTRACE", "hide the subtrees of these functions")                   \
    X(FTR_ENV_MAX_DEPTH, "FTRACE_MAX_DEPTH", "record calls up to this depth (0: no limit)")        \
    X(FTR_ENV_THRESHOLD, "FTRACE_THRESHOLD", "keep only calls at least this long (10us, 1ms)")     \
    X(FTR_ENV_ARGS, "FTRACE_ARGS",                                                                 \
      "record arguments (-A): FUNCS[@arg1/x,arg2/s,fparg1,...], ';' between specs")                \
    X(FTR_ENV_RETVAL, "FTRACE_RETVAL", "record return values (-R): FUNCS[@retval/d], ';' between") \
    X(FTR_ENV_AUTO_ARGS, "FTRACE_AUTO_ARGS",                                                       \
      "1: arguments and return values of every traced function its DWARF describes")               \
    X(FTR_ENV_LIBCALL, "FTRACE_LIBCALL",                                                           \
      "0: do not trace library calls (calls through the PLT/GOT; default 1)")                      \
    X(FTR_ENV_DISABLED, "FTRACE_DISABLED", "1: start with tracing off (every site a NOP)")         \
    X(FTR_ENV_LOSSLESS, "FTRACE_LOSSLESS",                                                         \
      "1: a thread with no free buffer waits for the writer (default: drops, counts)")             \
    X(FTR_ENV_CLOCK, "FTRACE_CLOCK",                                                               \
      "tsc, mono, or auto (default): the TSC where it can be trusted, else CLOCK_MONOTONIC")       \
    X(FTR_ENV_EXIT, "FTRACE_EXIT",                                                                 \
      "through (default): call functions that take no stack arguments through; hook: hook "        \
      "every return")

#define FTR_X_ENUM(id, name, help) id,
enum ftr_env_id { FTR_ENV_VARS(FTR_X_ENUM) FTR_ENV__COUNT };
#undef FTR_X_ENUM

/* ftr_env_name(FTR_ENV_OUTPUT) == "FTRACE_OUTPUT"; ftr_env_help() for --help texts. */
static inline const char *ftr_env_name(enum ftr_env_id id)
{
#define FTR_X_NAME(id, name, help) name,
    static const char *const names[] = {FTR_ENV_VARS(FTR_X_NAME)};
#undef FTR_X_NAME
    return names[id];
}
static inline const char *ftr_env_help(enum ftr_env_id id)
{
#define FTR_X_HELP(id, name, help) help,
    static const char *const helps[] = {FTR_ENV_VARS(FTR_X_HELP)};
#undef FTR_X_HELP
    return helps[id];
}

#define FTR_DEFAULT_OUTPUT "ftrace.ftr"

/* Not a setting: ftrace-run put the ASan runtime the program needs ahead of libftrace.so in
 * LD_PRELOAD (it must be loaded first) and names that entry here; the preload's constructor
 * takes it out of LD_PRELOAD again and drops this variable, so that the program and the
 * processes it starts see the environment of an untraced run (process.c). */
#define FTR_ENV_RUNTIME_PRELOAD "FTRACE_RUNTIME_PRELOAD"

/* Not settings either: what the exec and spawn wrappers add to a new image's environment for
 * it alone, which its constructor takes out again (process.c, summary.c): the summary line's
 * totals so far, carried across an exec, and the names of the variables the wrapper added to
 * an environment the program made without them ("LD_PRELOAD" added, "LD_PRELOAD+" ours put
 * first in the program's, "FTRACE_X" added), comma-separated. */
#define FTR_ENV_CARRY "FTRACE_SUMMARY_CARRY"
#define FTR_ENV_ADDED "FTRACE_ENV_ADDED"

/* ---- the control channel (ftrace-ctl <-> libftrace.so) ----
 * Every traced process listens, from its start, on a Unix stream socket at
 * ftr_ctl_socket_path(): a directory only its owner can enter, plus the peer's credentials
 * checked on every connection (same uid, or root). ftrace-ctl only connects (no signal).
 * Protocol: one request line, answered by text lines and a last line "ok" or
 * "error: <message>". */

#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Parses a duration: a number with ns, us, ms or s; a bare number is in microseconds (like the
 * kernel's tracing_thresh). @return 0, or -1 when malformed. */
static inline int ftr_parse_duration(const char *s, uint64_t *ns)
{
    char *end;
    if (!s || *s < '0' || *s > '9') return -1;
    double v = strtod(s, &end);
    double mul = 1e3;
    if (!strcmp(end, "ns"))
        mul = 1;
    else if (!strcmp(end, "us") || !*end)
        mul = 1e3;
    else if (!strcmp(end, "ms"))
        mul = 1e6;
    else if (!strcmp(end, "s"))
        mul = 1e9;
    else
        return -1;
    if (v < 0 || v * mul > 1e18) return -1;
    *ns = (uint64_t)(v * mul + 0.5);
    return 0;
}

/* Directory of the control sockets of one user: $XDG_RUNTIME_DIR/ftrace-run when set, else
 * /tmp/ftrace-run-UID. */
static inline void ftr_ctl_dir(unsigned uid, char *buf, size_t len)
{
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    int n;
    if (xdg && *xdg)
        n = snprintf(buf, len, "%s/ftrace-run", xdg);
    else
        n = snprintf(buf, len, "/tmp/ftrace-run-%u", uid);
    if (n < 0 || (size_t)n >= len) buf[0] = 0; /* too long: none (never a truncated one) */
}
/* The socket directory dir: created 0700, or else it must be a directory of ours that nobody
 * else can enter. @return 0, or -1 with the reason in why. */
static inline int ftr_ctl_dir_check(const char *dir, char *why, size_t len)
{
    struct stat st;
    if (!dir[0]) {
        snprintf(why, len, "the control directory's path ($XDG_RUNTIME_DIR) is too long");
        return -1;
    }
    if (mkdir(dir, 0700) < 0 && errno != EEXIST) {
        snprintf(why, len, "cannot create %s: %s", dir, strerror(errno));
        return -1;
    }
    if (lstat(dir, &st) < 0) {
        snprintf(why, len, "cannot use %s: %s", dir, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode))
        snprintf(why, len, "%s is not a directory", dir);
    else if (st.st_uid != geteuid())
        snprintf(why, len, "%s belongs to uid %u, not to uid %u", dir, (unsigned)st.st_uid,
                 (unsigned)geteuid());
    else if (st.st_mode & 077)
        snprintf(why, len, "%s is open to other users (mode %03o; want 700)", dir,
                 (unsigned)(st.st_mode & 0777));
    else
        return 0;
    return -1;
}
static inline void ftr_ctl_socket_path(unsigned uid, int pid, char *buf, size_t len)
{
    char dir[200];
    ftr_ctl_dir(uid, dir, sizeof dir);
    if (!dir[0] || snprintf(buf, len, "%s/%d.sock", dir, pid) >= (int)len) buf[0] = 0;
}

#endif /* FTR_ENV_H */
