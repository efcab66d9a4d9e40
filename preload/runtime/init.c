/*
 * init.c - start-up and end of libftrace.so: configuration, clocks, the writer, patching, and
 * the flush at every way a process can end.
 *
 * The tracer never breaks the program: when something fails here it prints one line on stderr
 * (even with FTRACE_QUIET) and leaves the program running untraced.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdatomic.h>
#include <ucontext.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <time.h>
#include <unistd.h>

#include <cpuid.h>
#include <link.h>

#include "forkpage.h"
#include "ftr_env.h"
#include "ftr_patcher.h"
#include "sigguard.h"
#include "libcalls.h"
#include "retaddr.h"
#include "recorder.h"
#include "region.h"
#include "tracer.h"
#include "values.h"

struct ftr_process_info ftr_process FTR_FORK_PAGE FTR_HIDDEN;
/* the TSC calibration base (writer.c): the start of this process's first image; a fork child
 * keeps its parent's */
uint64_t ftr_start_raw_ns FTR_HIDDEN, ftr_start_cal_tsc FTR_HIDDEN;
static struct ftr_end_info end_info;
static atomic_int ended FTR_FORK_PAGE;
int ftr_is_root FTR_FORK_PAGE;
static char *argv_copy[256];

void ftr_msg(const char *fmt, ...)
{
    if (ftr_cfg.quiet) return; /* -q: not a line on the program's stderr */
    char line[1024];
    int n = snprintf(line, sizeof line, "ftrace-run: ");
    va_list ap;
    va_start(ap, fmt);
    n += vsnprintf(line + n, sizeof line - (size_t)n, fmt, ap);
    va_end(ap);
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    line[n++] = '\n';
    /* straight to fd 2: stdio's stderr may be closed, redirected or locked by the program */
    if (write(2, line, (size_t)n) < 0) {
        /* nothing more we can do */
    }
}

uint32_t ftr_xsave_size;

/* Size of the xsave area for every state component the OS enabled (cpuid 0xd, ebx), plus room
 * for the alignment ftr_call_saving() applies. */
uint8_t ftr_have_xsavec;
uint64_t ftr_slow_area_size;
__thread void *ftr_slow_area __attribute__((tls_model("initial-exec")));
__thread uint32_t ftr_slow_busy __attribute__((tls_model("initial-exec")));
__thread uint32_t ftr_slow_deferred_trap __attribute__((tls_model("initial-exec")));

#define SLOW_STACK_BYTES (64 * 1024) /* what the slow paths' C code may use */

void ftr_xsave_init(void)
{
    unsigned a, b, c, d;
    __cpuid_count(0xd, 0, a, b, c, d);
    ftr_xsave_size = b + 64;
    __cpuid_count(0xd, 1, a, b, c, d);
    ftr_have_xsavec = (a >> 1) & 1;
    ftr_slow_area_size = ((uint64_t)ftr_xsave_size + SLOW_STACK_BYTES + 4095) & ~4095ull;
}

void ftr_slow_nothing(void *arg)
{
    (void)arg;
}

void ftr_slow_area_free(void)
{
    void *a = ftr_slow_area;
    if (!a || ftr_slow_busy) return;
    ftr_slow_area = NULL;
    munmap(a, ftr_slow_area_size);
}

static long env_long(enum ftr_env_id id, long dflt, long lo, long hi)
{
    const char *s = getenv(ftr_env_name(id));
    if (!s || !*s) return dflt;
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
    snprintf(ftr_cfg.output, sizeof ftr_cfg.output, "%s", out && *out ? out : FTR_DEFAULT_OUTPUT);
    ftr_cfg.quiet = env_long(FTR_ENV_QUIET, 0, 0, 1);
    ftr_cfg.verbose = env_long(FTR_ENV_VERBOSE, 0, 0, 1);
    ftr_cfg.chunk_bytes = (size_t)env_long(FTR_ENV_BUFSIZE, 256, 4, 65536) * 1024;
    ftr_cfg.zstd_level = (int)env_long(FTR_ENV_ZSTD_LEVEL, 1, -50, 19);
    ftr_cfg.flush_ms = (unsigned)env_long(FTR_ENV_FLUSH_MS, 50, 1, 60000);
    ftr_cfg.shadow_entries = (size_t)env_long(FTR_ENV_DEPTH_MAX, 16384, 64, FTR_DEPTH_MAX);
    ftr_cfg.lossless = (int)env_long(FTR_ENV_LOSSLESS, 0, 0, 1);
    const char *exit = getenv(ftr_env_name(FTR_ENV_EXIT));
    if (exit && *exit && strcmp(exit, "through") && strcmp(exit, "hook"))
        ftr_msg("ignoring %s=%s (expected through or hook)", ftr_env_name(FTR_ENV_EXIT), exit);
    ftr_cfg.exit_hook = exit && !strcmp(exit, "hook");
}

/* The command line, read back from /proc (the constructor is not given argv portably). */
static void read_cmdline(void)
{
    static char buf[65536];
    int fd = open("/proc/self/cmdline", O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0) close(fd);
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

static void start_clocks(int calibration_base)
{
    struct timespec rt, raw;
    clock_gettime(CLOCK_REALTIME, &rt);
    clock_gettime(CLOCK_MONOTONIC_RAW, &raw);
    ftr_g.start_tsc = ftr_rdtsc();
    ftr_g.start_ns = (uint64_t)rt.tv_sec * 1000000000u + (uint64_t)rt.tv_nsec;
    if (!calibration_base) return;
    ftr_start_raw_ns = (uint64_t)raw.tv_sec * 1000000000u + (uint64_t)raw.tv_nsec;
    ftr_start_cal_tsc = ftr_g.start_tsc;
}

/* Durations assume a TSC that ticks at one rate on every CPU, in every power state: the CPU
 * says it is invariant (cpuid 0x80000007 edx[8]: constant_tsc and nonstop_tsc), and the kernel,
 * which checks at boot that every CPU's TSC agrees and watches it after, still offers it as a
 * clocksource. Otherwise timestamps are CLOCK_MONOTONIC nanoseconds (slower, but right: a
 * system call per event where the kernel's vDSO cannot read the clock either), said in the
 * run's one summary line (summary.c), not by every process of the run that starts.
 * FTRACE_CLOCK=tsc|mono decides instead. A fork child keeps its parent's clock. */
static void choose_clock(void)
{
    const char *want = getenv(ftr_env_name(FTR_ENV_CLOCK));
    unsigned check = FTR_CLOCK_CHECKED, a, b, c, d;
    __cpuid(0x80000000, a, b, c, d);
    if (a >= 0x80000007) {
        __cpuid(0x80000007, a, b, c, d);
        if (d & (1u << 8)) check |= FTR_CLOCK_INVARIANT;
    }
    char list[256] = "";
    int fd = open("/sys/devices/system/clocksource/clocksource0/available_clocksource",
                  O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, list, sizeof list - 1) : -1;
    if (fd >= 0) close(fd);
    list[n > 0 ? n : 0] = 0;
    int kernel = n <= 0; /* unreadable (no sysfs): no objection */
    for (char *t = strtok(list, " \n"); t && !kernel; t = strtok(NULL, " \n"))
        kernel = !strcmp(t, "tsc");
    if (kernel && n > 0) check |= FTR_CLOCK_KERNEL;
    int trusted = (check & FTR_CLOCK_INVARIANT) && kernel;
    int mono = !trusted;
    if (want && (!strcmp(want, "tsc") || !strcmp(want, "mono"))) {
        check |= FTR_CLOCK_FORCED;
        mono = !strcmp(want, "mono");
    }
    ftr_process.clock_check = check;
    if (!mono) return;
    atomic_thread_fence(memory_order_seq_cst);
    ftr_hot.clock_mono = 1;
    ftr_g.tsc_hz = 1000000000u; /* ticks are nanoseconds: nothing to calibrate */
    start_clocks(1);
}

static void fill_end(uint32_t how, int code)
{
    end_info.tsc = ftr_rdtsc();
    end_info.how = how;
    end_info.code = code;
    end_info.sites = ftr_g.sites;
    end_info.patched = ftr_g.patched;
    end_info.skipped = ftr_g.skipped;
    end_info.through = ftr_g.through;
}

/* The image ends (exit status, signal or exec in how/code): stop recording, write all that
 * was recorded, then the END chunk. Runs once per image. Not in a vfork child: it shares our
 * memory and must not stop the parent's writer. */
int ftr_finish(uint32_t how, int code)
{
    if (!ftr_g.ready || !ftr_own_process() || atomic_exchange(&ended, 1)) return 0;
    atomic_store(&ftr_hot.recording, 0);
    ftr_tls.in_slow = 1; /* this thread records nothing more */
    fill_end(how, code);
    ftr_control_cleanup();
    ftr_writer_stop(&end_info);
    if (how != FTR_END_EXEC) ftr_summary_print(); /* at an exec: process.c, summary.c */
    return 1;
}

/* The main thread ended with pthread_exit() or a raw exit system call, and every other thread
 * of the program has ended since: without our threads the process would be over (glibc's last
 * thread calls exit(0); the kernel ends a group with no thread left). */
static int stat_fd = -1; /* /proc/<pid>/stat, above the program's numbers; guarded by fdguard.c */
static int task_fd = -1; /* /proc/<pid>/task, alike */
static pid_t stat_pid;

static void unwatch(int *fd)
{
    if (*fd < 0) return;
    ftr_fd_unprotect(fd);
    close(*fd);
    *fd = -1;
}

static int open_high(const char *fmt, pid_t pid, int flags)
{
    char path[64];
    snprintf(path, sizeof path, fmt, (int)pid);
    int fd = open(path, O_RDONLY | O_CLOEXEC | flags);
    int high = fd >= 0 ? fcntl(fd, F_DUPFD_CLOEXEC, 512) : -1;
    if (fd >= 0) close(fd);
    return high;
}

/* Opened where no other thread of the program runs (the constructor, a fork child's handler),
 * then kept, also across an exec that failed (it is the same process): a descriptor born while
 * the program's threads run takes the lowest free number, which the program could be about to
 * dup2() onto; our move and close() would then take its file (soak run 12 at 04bffc6:
 * limit-dup2; case limit-fdreuse). */
void ftr_program_watch(int open_it)
{
    pid_t pid = (pid_t)ftr_getpid();
    if (stat_fd >= 0 && stat_pid == pid) return;
    unwatch(&stat_fd); /* a fork child: the parent's */
    unwatch(&task_fd);
    if (!open_it) return;
    stat_fd = open_high("/proc/%d/stat", pid, 0);
    task_fd = open_high("/proc/%d/task", pid, O_DIRECTORY);
    if (stat_fd < 0 || task_fd < 0) { /* a chroot() without /proc: the server looks (control.c) */
        unwatch(&stat_fd);
        unwatch(&task_fd);
        return;
    }
    stat_pid = pid;
    ftr_fd_protect(&stat_fd);
    ftr_fd_protect(&task_fd);
}

static int program_gone(ssize_t n, char *buf, int *leader_gone, int task);

int ftr_program_gone(int *leader_gone)
{
    char buf[1024];
    ftr_fd_lock(); /* the numbers stay ours while they are read */
    ssize_t n = stat_fd >= 0 ? pread(stat_fd, buf, sizeof buf - 1, 0) : -1;
    int gone = n > 0 && program_gone(n, buf, leader_gone, task_fd);
    ftr_fd_unlock();
    return gone;
}

int ftr_program_gone_read(int fd, int task, int *leader_gone)
{
    char buf[1024];
    return program_gone(pread(fd, buf, sizeof buf - 1, 0), buf, leader_gone, task);
}

static int program_gone(ssize_t n, char *buf, int *leader_gone, int task)
{
    if (n <= 0) return 0;
    buf[n] = 0;
    const char *p = strrchr(buf, ')'); /* "pid (comm) S ppid ..." */
    if (!p || p[1] != ' ') return 0;
    *leader_gone = p[2] == 'Z' || p[2] == 'X';
    if (!*leader_gone) return 0;
    /* p ends field 2 (comm); each space starts the next field: 20 is num_threads (counted
     * from 3 here, it read field 19, the nice value: a program run under nice 5 never ended) */
    for (int field = 2; *p && field < 20; p++)
        if (*p == ' ') field++;
    long threads = strtol(p, NULL, 10);
    if (threads > 4) return 0; /* the zombie leader, the writer, the control server, more */
    /* (with a recorder, the control server is the only one of ours); from the list alone,
     * which a descriptor opened before can read after a chroot() too */
    return ftr_stw_others_listed(task, (pid_t)ftr_getpid()) == 0;
}

/* The watcher of main's pthread_exit() could not open what it reads (a chroot() without
 * /proc): the control server looks for it, from its own descriptors (control.c) */
static atomic_int watch_blind, seen_gone;

int ftr_orphan_watch_blind(void)
{
    return atomic_load(&watch_blind);
}

void ftr_orphan_seen_gone(void)
{
    atomic_store(&seen_gone, 1);
}

const struct ftr_end_info *ftr_end_orphaned(void)
{
    if (atomic_exchange(&ended, 1)) return &end_info;
    atomic_store(&ftr_hot.recording, 0);
    fill_end(FTR_END_EXIT, 0);
    ftr_control_cleanup();
    return &end_info;
}

/* What the program would have done without our threads: after pthread_exit() in main, glibc's
 * last thread calls exit(0) (exit handlers, stdio flushed); after a raw exit system call in
 * main, glibc never counted the main thread out and runs nothing, and the process ends with
 * the exit code of its last thread, which glibc's threads leave with 0. */
void ftr_orphan_exit(void)
{
    ftr_summary_print();
    if (ftr_main_pthread_exited) exit(0);
    for (;;)
        syscall(SYS_exit_group, 0);
}

/* With a recorder there is no writer thread to see the program gone (writer.c): when the
 * main thread calls pthread_exit(), a thread of ours starts watching, in the program's
 * descriptor table (exit(0) flushes the program's stdio there). */
static void *orphan_watch_main(void *arg)
{
    (void)arg;
    ftr_thread_off();
    ftr_stw_ignore((int)syscall(SYS_gettid));
    /* a signal sent to this thread alone (a thread walker's) is taken as the control server
     * takes its own (ctlsig.c), from the program's table */
    ftr_ctlsig_open(1);
    for (int leader_gone = 0, waits = 0;;) {
        struct pollfd p = {.fd = ftr_ctlsig_fd(), .events = POLLIN};
        if (p.fd < 0) {
            struct timespec d = {0, 5 * 1000 * 1000};
            nanosleep(&d, NULL);
        } else if (poll(&p, 1, 5) > 0 && (p.revents & POLLIN)) {
            ftr_ctlsig_take();
        } else if (++waits % 200 == 0) {
            ftr_ctlsig_refresh(); /* about once a second */
        }
        if (atomic_load(&seen_gone) || ftr_program_gone(&leader_gone)) {
            ftr_writer_stop(ftr_end_orphaned());
            ftr_orphan_exit();
        }
    }
    return NULL;
}

void ftr_orphan_watch(void)
{
    static atomic_int started;
    pthread_t th;
    if (!ftr_g.ready || ftr_writer_tid || atomic_exchange(&started, 1)) return;
    ftr_program_watch(1); /* here, in the program's table: the watcher reads it */
    if (stat_fd < 0) atomic_store(&watch_blind, 1);
    ftr_create_own_thread(&th, 1, orphan_watch_main, NULL);
}

/* exec failed after ftr_finish(FTR_END_EXEC): this image goes on, and so does its trace. */
void ftr_resume(void)
{
    char err[256];
    ftr_summary_resume();
    ftr_writer_reset(0);
    memset(&end_info, 0, sizeof end_info);
    if (ftr_writer_start(err, sizeof err) < 0) {
        ftr_msg("%s; tracing stops", err);
        ftr_output_release();
        return;
    }
    if (ftr_writer_tid) ftr_stw_ignore((int)ftr_writer_tid);
    struct ftr_buf meta = {0};
    ftr_modules_describe(&meta);
    ftr_writer_add_meta(&meta);
    ftr_buf_free(&meta);
    ftr_tls.in_slow = 0;
    atomic_store(&ended, 0);
    atomic_store(&ftr_hot.recording, 1);
    ftr_control_start();
}

/* Every lock of the preload is taken across fork(), in the one order they nest in
 * (settings, modules, threads, writer, descriptor), so that the child's copies of what they
 * guard are consistent; the child then makes new locks (their owners do not exist there). */
static void fork_prepare(void)
{
    ftr_settings_lock(1);
    ftr_modules_lock(1);
    ftr_threads_prepare_fork();
    ftr_writer_lock(1);
    ftr_recorder_prepare_fork();
    ftr_fd_lock();
}

static void fork_parent(void)
{
    ftr_fd_unlock();
    ftr_recorder_parent_fork();
    ftr_writer_lock(0);
    ftr_threads_parent_fork();
    ftr_modules_lock(0);
    ftr_settings_lock(0);
}

/* A fork child's modules, once it has news (writer.c, begin_image): every module loaded then;
 * the descriptions of those a dlopen() brought since the fork are waiting in the writer's
 * metadata already, and are dropped. (A library loaded and unloaded since the fork, before any
 * news, is not named.) */
static void describe_child(struct ftr_buf *out)
{
    ftr_modules_lock(1);
    ftr_writer_drop_meta();
    ftr_modules_describe(out);
    ftr_modules_lock(0);
}

/* A fork child is a process of the session in its own right: new pid, its own writer thread
 * appending to the same file, its own PROCESS, MODULE and SITES chunks. Records the parent had
 * not written yet stay the parent's to write. Most children exec or _exit at once (a shell, a
 * build tool): the child's writer begins its image only once the child records something of
 * its own (writer.c, begin_image), and the fork handler does nothing more than this. */
void ftr_child_after_fork(void)
{
    ftr_settings_lock(-1);
    ftr_modules_lock(-1);
    ftr_fd_lock_reset();
    ftr_threads_child_fork();
    int tracing = ftr_g.ready && !atomic_load(&ended);
    ftr_control_child_fork(0);
    if (!tracing) {
        ftr_recorder_forget();
        ftr_output_fork_child(0);
        return;
    }
    /* the parent is the process that forked: its pid now, not getppid() later (by then the
     * parent may have exited, and the child been given to init) */
    ftr_process.ppid = ftr_g.pid;
    ftr_g.pid = ftr_getpid();
    ftr_process.pid = ftr_g.pid;
    ftr_output_fork_child(1); /* its own lock, not its parent's */
    start_clocks(0);          /* the parent's TSC calibration stands */
    ftr_process.start_realtime_ns = ftr_g.start_ns;
    ftr_process.start_tsc = ftr_g.start_tsc;
    ftr_is_root = 0;
    ftr_writer_reset(1);
    ftr_stw_forget_ignored();
    ftr_reopen_frames();
    ftr_writer_lazy_child(describe_child);
    ftr_control_child_wake_fd(1); /* for the HELLO: it wakes the parked server */
    char err[256];
    int started = ftr_writer_start(err, sizeof err);
    ftr_region_parent(1); /* settled (recorder_client.c), or never counted: no writer there */
    if (started < 0) {
        ftr_msg("fork child %u: %s; running untraced", ftr_g.pid, err);
        atomic_store(&ftr_hot.recording, 0);
        /* its one thread hooks no more calls: no clock read at each (a system call where the
         * TSC is not trusted); the returns already hooked still return through the hook */
        (void)ftr_thread_pause();
        atomic_store(&ended, 1);
        ftr_output_release();
        ftr_control_child_wake_fd(-1);
        return;
    }
    if (ftr_writer_tid) ftr_stw_ignore((int)ftr_writer_tid);
    ftr_control_child_fork(1); /* while the child is one thread (control.c says why) */
}

/* exit(): the status reaches on_exit() handlers only, which run in the reverse order of their
 * registration: ours, registered just before main (__libc_start_main is wrapped to do it from
 * inside), runs before the handlers registered earlier (by constructors: atexit, C++ static
 * objects' destructors) and before the dynamic linker's destructor pass. It only keeps the
 * status; the trace ends in our own destructor, which runs after the executable's destructors
 * (ftr_fini): what those handlers and destructors call is in the trace. Binaries linked against
 * glibc < 2.34 pass init/fini and expect that version. */
static int exit_status, exit_status_known;

static void on_exit_handler(int status, void *arg)
{
    (void)arg;
    exit_status = status;
    exit_status_known = 1;
}

/* exit() called again from an exit handler (one registered before main runs after ours): the
 * process ends with that status. */
typedef void (*exit_fn)(int) __attribute__((noreturn));
static exit_fn real_exit;
__attribute__((visibility("default"), noreturn)) void exit(int status)
{
    if (!real_exit) real_exit = (exit_fn)dlsym(RTLD_NEXT, "exit");
    exit_status = status;
    exit_status_known = 1;
    if (real_exit) real_exit(status);
    _exit(status);
}

/* quick_exit(): the at_quick_exit() handlers, then glibc's internal _exit (not ours). Ours is
 * registered in our constructor, before the program's constructors and main can register
 * theirs, so it runs after all of them, with the status kept by the wrapper. */
static int quick_status;
static void on_quick_exit(void)
{
    ftr_finish(FTR_END_EXIT, quick_status);
}

typedef void (*quick_exit_fn)(int) __attribute__((noreturn));
__attribute__((visibility("default"), noreturn)) void quick_exit(int status)
{
    quick_exit_fn real = (quick_exit_fn)dlsym(RTLD_NEXT, "quick_exit");
    quick_status = status;
    if (real) real(status);
    _exit(status);
}

/* abort(): glibc raises SIGABRT; if a handler of the program's returns, it restores the default
 * action and raises again, and the process dies with nothing of ours run (our fatal-signal
 * handler is installed only where the program left the default action). So abort() is done
 * here the same way, with the trace ended between the two raises. */
static void finish_fast(uint32_t how, int code);

__attribute__((visibility("default"), noreturn)) void abort(void)
{
    sigset_t abrt;
    sigemptyset(&abrt);
    sigaddset(&abrt, SIGABRT);
    pthread_sigmask(SIG_UNBLOCK, &abrt, NULL);
    raise(SIGABRT);
    /* a handler of the program's returned: the process ends now, by SIGABRT. abort() comes
     * from signal handlers and from code holding any lock (malloc's consistency checks): the
     * trace ends the way _exit() ends it, with no lock and a bounded wait. */
    finish_fast(FTR_END_SIGNAL, SIGABRT);
    struct sigaction dfl;
    memset(&dfl, 0, sizeof dfl);
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGABRT, &dfl, NULL);
    pthread_sigmask(SIG_UNBLOCK, &abrt, NULL);
    raise(SIGABRT);
    for (;;)
        syscall(SYS_exit_group, 127);
}
typedef int (*main_fn)(int, char **, char **);
typedef int (*start_fn)(main_fn, int, char **, void (*)(void), void (*)(void), void (*)(void),
                        void *);
static main_fn real_main;

/* gcrt1 (a program linked with -pg) armed gprof's ITIMER_PROF before main: its SIGPROF would
 * land on sleeping threads (usleep() returning EINTR) as soon as the writer burns CPU time. Our
 * mcount replaced gprof's, so its histogram is empty anyway: disarm the timer when the handler
 * is the C library's own (profil()); a profiler of the program's own keeps its timer. */
static void disarm_gprof(void)
{
    struct itimerval it;
    struct sigaction sa;
    Dl_info di;
    if (getitimer(ITIMER_PROF, &it) < 0 || (!it.it_value.tv_sec && !it.it_value.tv_usec) ||
        sigaction(SIGPROF, NULL, &sa) < 0)
        return;
    void *h = (sa.sa_flags & SA_SIGINFO) ? (void *)sa.sa_sigaction : (void *)sa.sa_handler;
    if (!dladdr(h, &di) || !di.dli_fname || !strstr(di.dli_fname, "/libc.so")) return;
    struct itimerval off;
    memset(&off, 0, sizeof off);
    setitimer(ITIMER_PROF, &off, NULL);
    if (ftr_cfg.verbose) ftr_msg("gprof's profiling timer (ITIMER_PROF) disarmed");
}

static int main_wrapper(int argc, char **argv, char **envp)
{
    int e = errno; /* main finds it as the program's start and constructors left it */
    if (ftr_g.ready) {
        on_exit(on_exit_handler, NULL);
        disarm_gprof();
    }
    errno = e;
    return real_main(argc, argv, envp);
}

__attribute__((visibility("default"))) int __libc_start_main(main_fn main, int argc, char **argv,
                                                             void (*init)(void), void (*fini)(void),
                                                             void (*rtld_fini)(void),
                                                             void *stack_end)
{
    start_fn next = NULL;
    if (init) next = (start_fn)dlvsym(RTLD_NEXT, "__libc_start_main", "GLIBC_2.2.5");
    if (!next) next = (start_fn)dlsym(RTLD_NEXT, "__libc_start_main");
    real_main = main;
    return next(main_wrapper, argc, argv, init, fini, rtld_fini, stack_end);
}

__attribute__((destructor)) static void ftr_fini(void)
{
    ftr_finish(FTR_END_EXIT, exit_status_known ? exit_status : 0);
}

/* _exit() skips atexit handlers and destructors; the trace must still be complete. */
/* _exit() is called from signal handlers and from code that holds any lock: it finishes the
 * trace with no lock (the writer is woken through its futex and waited for, bounded) and never
 * waits for a control request. A vfork child shares our memory and does nothing here. */
static void finish_fast(uint32_t how, int code)
{
    if (!ftr_g.ready || !ftr_own_process() || atomic_exchange(&ended, 1)) return;
    atomic_store(&ftr_hot.recording, 0);
    ftr_tls.in_slow = 1;
    fill_end(how, code);
    ftr_control_cleanup_fast();
    ftr_writer_stop_from_signal(&end_info); /* the writer counts what was lost itself */
    ftr_summary_print();
}

__attribute__((visibility("default"), noreturn)) void _exit(int status)
{
    finish_fast(FTR_END_EXIT, status);
    for (;;)
        syscall(SYS_exit_group, status);
}
__attribute__((visibility("default"), noreturn)) void _Exit(int status)
{
    _exit(status);
}

/* Best effort on a fatal signal: flush what was recorded, then die of the same signal. The
 * handlers are installed for every signal whose default action ends the process (SIGTRAP:
 * on_sigtrap), only where the program left that default action, and read back as SIG_DFL
 * (sigguard.c); a program that installs its own handler later replaces ours, as it expects. */
static const int fatal_signals[] = {SIGSEGV, SIGBUS,    SIGFPE,  SIGILL,  SIGABRT, SIGSYS,
                                    SIGTERM, SIGINT,    SIGHUP,  SIGQUIT, SIGPIPE, SIGALRM,
                                    SIGUSR1, SIGUSR2,   SIGXCPU, SIGXFSZ, SIGPROF, SIGVTALRM,
                                    SIGIO,   SIGSTKFLT, SIGPWR}; /* and SIGRTMIN..SIGRTMAX */

static void flush_for_fatal(int sig)
{
    if (ftr_g.ready && ftr_own_process() && !atomic_exchange(&ended, 1)) {
        atomic_store(&ftr_hot.recording, 0);
        fill_end(FTR_END_SIGNAL, sig);
        ftr_writer_stop_from_signal(&end_info);
    }
}

/* SIGTRAP is always ours (sigguard.c keeps it so): first a thread that met a site during a
 * breakpoint batch, sent on; otherwise the program's own handler, or its default action (the
 * trace is flushed first, as for the other fatal signals). */
static void on_sigtrap(int sig, siginfo_t *si, void *uc)
{
    int saved = errno;
    if (ftr_bp_trap(si, uc)) {
        errno = saved;
        return;
    }
    /* Sent by someone (not a trap of this thread's) while the thread is in a slow path, on its
     * private area (its top included: rsp there, the area's stack still empty): put off until
     * ftr_call_saving() is back on the thread's stack. */
    uintptr_t sp = (uintptr_t)((ucontext_t *)uc)->uc_mcontext.gregs[REG_RSP];
    uintptr_t area = (uintptr_t)ftr_slow_area;
    if (si && si->si_code <= 0 && ftr_slow_busy && area && sp - area <= ftr_slow_area_size) {
        ftr_slow_deferred_trap = 1;
        errno = saved;
        return;
    }
    /* The program's action, as its mask has it (sigguard.c): held while the program blocks
     * it (also while its own SIGTRAP handler runs, without SA_NODEFER: our handler leaves
     * SIGTRAP open in the kernel), delivered when it opens it. */
    if (ftr_sigguard_fatal(sig, si)) flush_for_fatal(sig);
    errno = saved;
    ftr_sigguard_chain(sig, si, uc);
    errno = saved;
}

/* SIGTRAP stays ours (sigguard.c): never blocked, the program's handler chained. Every other
 * signal is blocked while our handler runs (but SIGTRAP itself: SA_NODEFER), so that no handler
 * of the program can jump out of ftr_bp_trap(). */
static int install_signals(char *err, size_t errlen)
{
    const int guarded[1] = {SIGTRAP};
    ftr_sigguard_init(guarded, 1);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_sigtrap;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART | SA_ONSTACK;
    sigfillset(&sa.sa_mask);
    if (ftr_sigguard_install(SIGTRAP, &sa) < 0) {
        snprintf(err, errlen, "cannot install the SIGTRAP handler: %s", strerror(errno));
        return -1;
    }
    /* Handlers returning to glibc's restorer get ftr_tramp_sigret, which counts on it loading
     * every register from the signal frame: mov $15, %rax; syscall (rt_sigreturn). */
    static const unsigned char rt_sigreturn[9] = {0x48, 0xc7, 0xc0, 0x0f, 0, 0, 0, 0x0f, 0x05};
    uintptr_t r = ftr_sigguard_restorer();
    if (r && !memcmp((const void *)r, rt_sigreturn, sizeof rt_sigreturn)) ftr_hot.sig_restorer = r;
    return 0;
}

static void on_fatal_signal(int sig, siginfo_t *si, void *uc)
{
    (void)uc;
    int saved = errno;
    flush_for_fatal(sig);
    /* SA_RESETHAND restored the default action: a fault re-executes and kills; any other signal
     * (sent, or the kernel's own: SIGPIPE, a timer's, a seccomp SIGSYS) is sent again, and
     * stays pending until we return. */
    int fault =
        (sig == SIGSEGV || sig == SIGBUS || sig == SIGFPE || sig == SIGILL) && si->si_code > 0;
    if (!fault) { /* to this process: the pid known (a sandbox may fail or forbid getpid()) */
        long pid = atomic_load(&ftr_vforks) ? syscall(SYS_getpid) : (long)ftr_g.pid;
        syscall(SYS_tgkill, pid > 0 ? (pid_t)pid : (pid_t)ftr_g.pid, syscall(SYS_gettid), sig);
    }
    errno = saved;
}

static void install_fatal_handler(int sig)
{
    struct sigaction old, sa;
    if (sigaction(sig, NULL, &old) < 0 || old.sa_handler != SIG_DFL || (old.sa_flags & SA_SIGINFO))
        return;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_fatal_signal;
    sa.sa_flags = SA_SIGINFO | SA_RESETHAND | SA_NODEFER | SA_ONSTACK;
    sigemptyset(&sa.sa_mask);
    sigaction(sig, &sa, NULL);
}

static void install_fatal_handlers(void)
{
    ftr_sigguard_hide(on_fatal_signal);
    for (size_t i = 0; i < sizeof fatal_signals / sizeof fatal_signals[0]; i++)
        install_fatal_handler(fatal_signals[i]);
    for (int sig = SIGRTMIN; sig <= SIGRTMAX; sig++)
        install_fatal_handler(sig);
}

/* Every program the session runs loads us, most of them uninstrumented (a shell, `true`, the
 * tools a build runs): the sites are looked for first, and such a child of the session leaves
 * with nothing more done than the wrappers need (no /proc reads, no cpuid, no file, no
 * thread). */
static void start(void)
{
    char err[512];
    ftr_libunwind_resolve(); /* first: its wrappers forward whether we trace or not */
    ftr_unwind_fde_resolve();
    read_config();
    start_clocks(1);
    ftr_g.pid = ftr_getpid();
    ftr_process.session_id = (uint64_t)env_long(FTR_ENV_SESSION, 0, 0, LONG_MAX);
    ftr_is_root = ftr_process.session_id == 0;
    if (ftr_is_root) {
        /* its low 32 bits: the pid of the session's first process */
        ftr_process.session_id = (ftr_g.start_ns & 0x7fffffff) << 32 | (uint32_t)ftr_g.pid;
        char id[32];
        snprintf(id, sizeof id, "%llu", (unsigned long long)ftr_process.session_id);
        setenv(ftr_env_name(FTR_ENV_SESSION), id, 1); /* children and exec'd images join */
    }
    ftr_env_snapshot();

    ftr_nosites_init();
    size_t nsites = ftr_modules_scan();
    ftr_nosites_publish(); /* for the images this one starts */
    if (nsites == 0 && !ftr_is_root)
        return; /* an uninstrumented child of the session (a shell, a tool): stay silent */
    choose_clock();
    unsigned a, b, c, d;
    __cpuid(1, a, b, c, d);
    if (!(c & bit_OSXSAVE)) {
        ftr_msg("this CPU or OS lacks XSAVE; running untraced");
        return;
    }
    ftr_xsave_init();
    read_cmdline();
    ftr_process.pid = ftr_g.pid;
    ftr_process.ppid = ftr_getppid();
    ftr_process.start_realtime_ns = ftr_g.start_ns;
    ftr_process.start_tsc = ftr_g.start_tsc;
    if (ftr_settings_init(err, sizeof err) < 0) {
        ftr_msg("%s; running untraced", err);
        return;
    }
    ftr_libcalls_init();
    ftr_g.fd = ftr_output_open();
    if (ftr_g.fd < 0) {
        ftr_msg("cannot write %s: %s; running untraced", ftr_cfg.output, strerror(errno));
        return;
    }
    if (nsites == 0) {
        ftr_msg("no function entry hooks found in %s: build with -pg -mfentry (or -pg, "
                "-mnop-mcount -mrecord-mcount, -fpatchable-function-entry=5); running untraced",
                ftr_process.exe);
        if (ftr_is_root) { /* no summary owner: each instrumented child says its own */
            char id[32];
            ftr_process.session_id &= ~(uint64_t)0xffffffff;
            if (!ftr_process.session_id) ftr_process.session_id = (uint64_t)1 << 32;
            snprintf(id, sizeof id, "%llu", (unsigned long long)ftr_process.session_id);
            setenv(ftr_env_name(FTR_ENV_SESSION), id, 1);
        }
        return; /* the file stays, with its header, for instrumented children */
    }
    /* before the writer thread exists: registering for membarrier in a single-threaded process
     * is immediate, later it waits for an RCU grace period (~15 ms) */
    char bperr[256] = "";
    ftr_bp_init(bperr, sizeof bperr); /* without it, only single-threaded rewrites work */
    ftr_names_init();
    if (install_signals(err, sizeof err) < 0 || ftr_threads_init() < 0 ||
        ftr_writer_start(err, sizeof err) < 0) {
        ftr_msg("%s; running untraced", err);
        ftr_output_release(); /* nothing will be written */
        return;
    }
    if (bperr[0] && ftr_cfg.verbose) ftr_msg("%s", bperr);
    if (ftr_writer_tid) ftr_stw_ignore((int)ftr_writer_tid);
    pthread_atfork(fork_prepare, fork_parent, ftr_child_after_fork);
    atomic_store(&ftr_hot.recording, 1);
    at_quick_exit(on_quick_exit);
    ftr_g.ready = 1;
    install_fatal_handlers();
    if (ftr_modules_patch(err, sizeof err) < 0)
        ftr_msg("%s; running untraced", err);
    else if (ftr_g.patched == 0 && ftr_settings_enabled() && ftr_settings_filter_expr())
        ftr_modules_say_unmatched(ftr_settings_filter_expr());
    else
        ftr_values_say_unmatched();
    ftr_control_start();
}

/* Loaded as the program started (LD_PRELOAD, /etc/ld.so.preload, a DT_NEEDED entry), not
 * dlopen()ed into a process already running (ftrace-inject, a program's own dlopen): in the
 * base namespace, before libc, which a library loaded later finds loaded already. */
static int loaded_at_start(void)
{
    Dl_info info;
    struct link_map *self = NULL;
    Lmid_t ns = LM_ID_BASE;
    if (!dladdr1((void *)loaded_at_start, &info, (void **)&self, RTLD_DL_LINKMAP) || !self ||
        dlinfo(self, RTLD_DI_LMID, &ns) < 0) /* glibc: a handle is its link map */
        return 1;                            /* cannot tell: as before */
    if (ns != LM_ID_BASE) return 0;
    for (const struct link_map *m = self->l_prev; m; m = m->l_prev) {
        const char *base = strrchr(m->l_name, '/');
        if (!strncmp(base ? base + 1 : m->l_name, "libc.so", 7)) return 0;
    }
    return 1;
}

__attribute__((constructor)) static void ftr_init(void)
{
    int e = errno; /* as it was (C: 0 at the start), whatever start-up did */
    if (!loaded_at_start()) {
        /* Attaching (docs/design.md, "Attaching to a running process") starts differently:
         * until it is built, nothing here runs on the program's threads, and nothing changes
         * in its environment, signal actions or text. Not even a line: on the program's
         * stderr, a pipe without a reader would kill it (SIGPIPE) and a full one would hang
         * it inside dlopen(), the loader's lock held. */
        errno = e;
        return;
    }
    ftr_summary_take_carried();
    start();
    ftr_env_restore(); /* every FTRACE_* variable read: the environment the program was given */
    if (!ftr_g.ready) ftr_summary_untraced(); /* a chain of images that ends here */
    errno = e;
}
