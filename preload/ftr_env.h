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
    X(FTR_ENV_QUIET, "FTRACE_QUIET", "1: print nothing on stderr unless tracing fails")           \
    X(FTR_ENV_SIGNAL, "FTRACE_SIGNAL", "signal number of the stop-the-world handshake")            \
    X(FTR_ENV_BUFSIZE, "FTRACE_BUFSIZE", "per-thread chunk size in KiB (default 256)")             \
    X(FTR_ENV_ZSTD_LEVEL, "FTRACE_ZSTD_LEVEL", "zstd level of the trace file (default 1)")        \
    X(FTR_ENV_FLUSH_MS, "FTRACE_FLUSH_MS", "flush partial buffers every N ms (default 50)")        \
    X(FTR_ENV_SESSION, "FTRACE_SESSION", "session id shared by every process of one run")         \
    X(FTR_ENV_DEPTH_MAX, "FTRACE_SHADOW_DEPTH", "shadow stack entries per thread (default 16384)") \
    X(FTR_ENV_VERBOSE, "FTRACE_VERBOSE", "1: say on stderr what was patched and how")

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

#endif /* FTR_ENV_H */
