/*
 * init.c - start-up and end of libftrace.so: configuration, clocks, the writer, patching, and
 * the flush at every way a process can end.
 *
 * The tracer never breaks the program: when something fails here it prints one line on stderr
 * (even with FTRACE_QUIET) and leaves the program running untraced.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cpuid.h>

#include "ftr_env.h"
#include "ftr_patcher.h"
#include "tracer.h"

struct ftr_global ftr_g = {.fd = -1};
struct ftr_process_info ftr_process FTR_HIDDEN;
uint64_t ftr_start_raw_ns FTR_HIDDEN;
static struct ftr_end_info end_info;
static atomic_int ended;
static char *argv_copy[256];

void ftr_msg(const char *fmt, ...)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "ftrace-run: ");
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2)
        n = (int)sizeof line - 2;
    line[n++] = '\n';
    /* straight to fd 2: stdio's stderr may be closed, redirected or locked by the program */
    if (write(2, line, (size_t)n) < 0) {
        /* nothing more we can do */
    }
}

uint32_t ftr_xsave_size;

/* Size of the xsave area for every state component the OS enabled (cpuid 0xd, ebx), plus room
 * for the alignment ftr_call_saving() applies. */
void ftr_xsave_init(void)
{
    unsigned a, b, c, d;
    __cpuid_count(0xd, 0, a, b, c, d);
    ftr_xsave_size = b + 64;
}

static long env_long(enum ftr_env_id id, long dflt, long lo, long hi)
{
    const char *s = getenv(ftr_env_name(id));
    if (!s || !*s)
        return dflt;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end || v < lo || v > hi) {
        ftr_msg("ignoring %s=%s (expected a number from %ld to %ld)", ftr_env_name(id), s, lo, hi);
        return dflt;
    }
    return v;
}

static void read_config(void)
{
    const char *out = getenv(ftr_env_name(FTR_ENV_OUTPUT));
    snprintf(ftr_g.output, sizeof ftr_g.output, "%s", out && *out ? out : FTR_DEFAULT_OUTPUT);
    ftr_g.quiet = env_long(FTR_ENV_QUIET, 0, 0, 1);
    ftr_g.verbose = env_long(FTR_ENV_VERBOSE, 0, 0, 1);
    ftr_g.chunk_bytes = (size_t)env_long(FTR_ENV_BUFSIZE, 64, 4, 65536) * 1024;
    ftr_g.zstd_level = (int)env_long(FTR_ENV_ZSTD_LEVEL, 1, -50, 19);
    ftr_g.flush_ms = (unsigned)env_long(FTR_ENV_FLUSH_MS, 50, 1, 60000);
    ftr_g.shadow_entries = (size_t)env_long(FTR_ENV_DEPTH_MAX, 16384, 64, 1 << 24);
    ftr_g.stw_signal = (int)env_long(FTR_ENV_SIGNAL, SIGRTMIN + 7, SIGRTMIN + 2, SIGRTMAX);
}

/* The command line, read back from /proc (the constructor is not given argv portably). */
static void read_cmdline(void)
{
    static char buf[65536];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0)
        close(fd);
    uint32_t argc = 0;
    for (ssize_t i = 0; n > 0 && i < n && argc < 256; i += (ssize_t)strlen(buf + i) + 1)
        argv_copy[argc++] = buf + i;
    ftr_process.argc = argc;
    ftr_process.argv = (const char *const *)argv_copy;
    static char exe[PATH_MAX];
    ssize_t m = readlink("/proc/self/exe", exe, sizeof exe - 1);
    exe[m > 0 ? m : 0] = 0;
    ftr_process.exe = exe;
}

static void start_clocks(void)
{
    struct timespec rt, raw;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC_RAW, &raw);
    ftr_g.start_tsc = ftr_rdtsc();
    ftr_g.start_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
    ftr_start_raw_ns = (uint64_t)raw.tv_sec * 1000000000u + (uint64_t)raw.tv_nsec;
}

static void print_summary(void)
{
    int failed = ftr_writer_failed();
    uint64_t lost = end_info.lost;
    if (failed)
        ftr_msg("writing %s failed (%s): %llu bytes of trace lost", ftr_g.output, strerror(failed),
                (unsigned long long)ftr_writer_dropped());
    else if (!ftr_g.quiet)
        ftr_msg("%llu calls traced into %s (%.1f KiB)%s", (unsigned long long)ftr_writer_calls(),
                ftr_g.output, (double)ftr_writer_bytes() / 1024.0,
                lost ? ", some events lost" : "");
}

static void sum_thread(struct ftr_thread *thr, void *arg)
{
    struct ftr_end_info *e = arg;
    if (!thr->ended && thr->tls) {
        e->lost += thr->tls->lost;
        e->overruns += thr->tls->overruns;
    }
}

static void fill_end(uint32_t how, int code)
{
    end_info.tsc = ftr_rdtsc();
    end_info.how = how;
    end_info.code = code;
    end_info.sites = ftr_g.sites;
    end_info.patched = ftr_g.patched;
    end_info.skipped = ftr_g.skipped;
}

/* The process ends (exit status or signal known in how/code): stop recording, write all that
 * was recorded, then the END chunk. Runs once. */
static void finish(uint32_t how, int code)
{
    if (!ftr_g.ready || atomic_exchange(&ended, 1))
        return;
    atomic_store(&ftr_g.recording, 0);
    ftr_tls.in_slow = 1; /* this thread records nothing more */
    fill_end(how, code);
    ftr_for_each_thread(sum_thread, &end_info);
    ftr_writer_stop(&end_info);
    end_info.bytes_raw = 0;
    print_summary();
}

static void on_exit_handler(int status, void *arg)
{
    (void)arg;
    finish(FTR_END_EXIT, status);
}

__attribute__((destructor)) static void ftr_fini(void) { finish(FTR_END_EXIT, 0); }

/* _exit() skips atexit handlers and destructors; the trace must still be complete. */
__attribute__((visibility("default"), noreturn)) void _exit(int status)
{
    finish(FTR_END_EXIT, status);
    for (;;)
        syscall(SYS_exit_group, status);
}
__attribute__((visibility("default"), noreturn)) void _Exit(int status) { _exit(status); }

/* Best effort on a fatal signal: flush what was recorded, then die of the same signal. The
 * handlers are installed only where the program left the default action; a program that
 * installs its own handler later replaces ours, as it expects. */
static const int fatal_signals[] = {SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGABRT, SIGTRAP,
                                    SIGSYS,  SIGTERM, SIGINT, SIGHUP, SIGQUIT};

static void on_fatal_signal(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    int saved = errno;
    if (ftr_g.ready && !atomic_exchange(&ended, 1)) {
        atomic_store(&ftr_g.recording, 0);
        fill_end(FTR_END_SIGNAL, sig);
        ftr_writer_stop_from_signal(&end_info);
    }
    /* SA_RESETHAND restored the default action: a fault re-executes and kills; a sent signal
     * is sent again (it stays pending until we return). */
    if (si->si_code <= 0 || sig == SIGTERM || sig == SIGINT || sig == SIGHUP || sig == SIGQUIT ||
        sig == SIGABRT)
        syscall(SYS_tgkill, getpid(), syscall(SYS_gettid), sig);
    errno = saved;
}

static void install_fatal_handlers(void)
{
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++) {
        struct sigaction old, sa;
        if (sigaction(fatal_signals[i], NULL, &old) < 0 || old.sa_handler != SIG_DFL ||
            (old.sa_flags & SA_SIGINFO))
            continue;
        memset(&sa, 0, sizeof sa);
        sa.sa_sigaction = on_fatal_signal;
        sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER | SA_ONSTACK;
        sigemptyset(&sa.sa_mask);
        sigaction(fatal_signals[i], &sa, NULL);
    }
}

static void child_after_fork(void)
{
    /* The writer thread did not survive fork; until fork is supported, the child runs with
     * its hooks quiet (they keep the shadow stack so returns still work). */
    atomic_store(&ftr_g.recording, 0);
    ftr_g.ready = 0;
    atomic_store(&ended, 1);
}

__attribute__((constructor)) static void ftr_init(void)
{
    char err[512];
    read_config();
    start_clocks();
    ftr_g.pid = (uint32_t)getpid();
    unsigned a, b, c, d;
    __cpuid(1, a, b, c, d);
    if (!(c & bit_OSXSAVE)) {
        ftr_msg("this CPU or OS lacks XSAVE; running untraced");
        return;
    }
    ftr_xsave_init();
    read_cmdline();
    ftr_process.pid = ftr_g.pid;
    ftr_process.ppid = (uint32_t)getppid();
    ftr_process.start_realtime_ns = ftr_g.start_ns;
    ftr_process.start_tsc = ftr_g.start_tsc;
    ftr_process.session_id = (uint64_t)env_long(FTR_ENV_SESSION, 0, 0, LONG_MAX);
    if (!ftr_process.session_id)
        ftr_process.session_id = ftr_g.start_ns ^ ((uint64_t)ftr_g.pid << 32);

    ftr_g.fd = open(ftr_g.output, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (ftr_g.fd < 0) {
        ftr_msg("cannot open %s: %s; running untraced", ftr_g.output, strerror(errno));
        return;
    }
    if (ftr_threads_init() < 0 || ftr_writer_start(err, sizeof err) < 0) {
        ftr_msg("%s; running untraced", err);
        return;
    }
    pthread_atfork(NULL, NULL, child_after_fork);
    atomic_store(&ftr_g.recording, 1);
    ftr_g.ready = 1;
    on_exit(on_exit_handler, NULL);
    install_fatal_handlers();
    if (ftr_modules_patch_all(err, sizeof err) < 0) {
        ftr_msg("%s; running untraced", err);
        return;
    }
}
