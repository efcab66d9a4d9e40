/*
 * inject.c - ftr_inject() (inject.h says what it offers): the checks that refuse a process, the
 * choice of the thread, the remote call of dlopen through ptrace, and the restore.
 *
 * The steps, and why:
 *   1. /proc only, nobody stopped: the process exists, is neither a zombie nor stopped nor
 *      traced, is ours to trace, has no seccomp filter; its libc.so.6 is glibc's with dlopen
 *      and __restore_rt (elfsym.c); the library is visible through its root.
 *   2. Its threads are looked at through /proc/PID/task/TID/syscall, every POLL_MS: one blocked
 *      in a system call of the safe list (calls[] says why each) is a candidate; one seen
 *      blocked in the same call at two looks without having run between is chosen first (it
 *      is likelier to stay so for the few microseconds until it is stopped).
 *   3. That thread alone is seized and interrupted. Its registers must show it still waits in
 *      the same call, which the kernel will restart (an -ERESTART* code): else it woke up
 *      meanwhile, and it is let go at once, untouched, and another is chosen. A thread that
 *      waits inside a signal handler (the handler may have interrupted malloc) is let go too,
 *      and not taken again.
 *   4. Everything the call changes is saved: the general registers, the XSAVE state, the signal
 *      mask. The call is dlopen(path, RTLD_NOW): the path is written on the thread's stack
 *      below the red zone, and under it a signal frame as the kernel builds one for a handler,
 *      holding all that was saved, the interrupted system call set to restart
 *      (inject_x86_64.c). The call returns into glibc's __restore_rt (rt_sigreturn) on that
 *      frame: whatever happens to the injector from then on (SIGKILL, a crash: ptrace lets the
 *      thread go), the thread finishes the call and resumes as it was, its wait restarted.
 *      RTLD_NOW, so that a missing symbol fails the load here, and not later in the process at
 *      the first call; not RTLD_GLOBAL: the library's symbols have no business resolving the
 *      program's later loads. Asynchronous signals are blocked for the call (they wait, pending,
 *      and are delivered after it as they would have been); faults and traps are not (they
 *      belong to the call, and the kernel forces them open when blocked, resetting their
 *      handler to the default one); the frame's mask is the thread's own, so that they are
 *      delivered right after it even without the injector. The thread runs the call under
 *      PTRACE_SYSCALL (two stops per system call of dlopen's, some microseconds each), and the
 *      injector catches it at the entry of that rt_sigreturn. dlopen's value is lost there
 *      (__restore_rt sets rax first): the load succeeded if the library's file is mapped in
 *      the process now. If not, dlerror() is called the same way, but returning first through
 *      a "syscall; ret" of libc's, so that its value becomes a system call number the injector
 *      reads at the entry stop (ftr_inj_arch_value_stub); without the injector, that system
 *      call fails with ENOSYS (a pointer is no system call number, but for the 1 in 2^23 whose
 *      low 32 bits are one) and the ret goes on to __restore_rt.
 *   5. Restored exactly at that entry stop, then detached: the signal mask, the XSAVE state,
 *      the registers, and the interrupted system call restarted there, as the kernel would (a
 *      restart block's restart_syscall included, which rt_sigreturn would have reset).
 *      rt_sigreturn does not run. A signal that stopped the thread during the call is sent
 *      back at the detach (its siginfo is the kernel's then).
 * Every wait handles the thread's or the process's end. After the seize, an error before the
 * call restores what was changed and detaches; during the call, the injector detaches only, and
 * the thread resumes through the frame. The injector blocks its own asynchronous signals while
 * it holds the thread, so that it is not killed by a stray Ctrl-C between two steps.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pwd.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <sys/utsname.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "inject.h"
#include "inject_int.h"
#include "readall.h"

#define POLL_MS 2              /* between two looks at the threads */
#define SETTLE_LOOKS 3         /* after so many looks, a thread seen once will do */
#define STACK_NEED (64 * 1024) /* stack below the red zone a thread's must have for dlopen */
#define FRAME_NEED (16 * 1024) /* ... and for the signal frame (XSAVE areas: up to 11 KiB) */
#define SCAN_MAX (256 * 1024)  /* how much of its stack is searched for a signal frame */
#define MAX_RELEASES 64        /* threads stopped and let go, at most, per injection */
#define MAX_EXCLUDED 256       /* threads not to be taken again */
#define DLERROR_MAX 512        /* how much of dlerror()'s text is read */
#define RTLD_NOW_VALUE 2       /* RTLD_NOW, without <dlfcn.h>'s other baggage */
#define CAP_SYS_PTRACE_BIT 19

#define SIGBIT(s) (1ull << ((s)-1))
/* the signals a thread's own instructions raise, which the kernel forces through a mask */
#define SYNC_SIGNALS                                                                               \
    (SIGBIT(SIGSEGV) | SIGBIT(SIGBUS) | SIGBIT(SIGILL) | SIGBIT(SIGTRAP) | SIGBIT(SIGFPE) |        \
     SIGBIT(SIGSYS))

enum { DONE, RETRY, FAIL };

/*
 * The system calls a thread may be stopped in for the call, each under three conditions:
 *  1. glibc's allocator and loader never make it while holding their locks: dlopen takes the
 *     loader's lock and calls malloc, so a thread stopped while holding either would wait for
 *     itself. These are the waits of an idle thread. Not futex (waiting for a lock, maybe
 *     malloc's or the loader's), nor mmap, munmap, brk, mprotect, madvise (malloc makes them
 *     with an arena locked), nor openat, a read of a file, fstat (the loader makes them under
 *     its lock), nor restart_syscall (which call it resumes, a futex wait maybe, is not shown).
 *  2. The kernel ends it with an -ERESTART* code at a ptrace stop, to be restarted as if nothing
 *     happened. Not epoll_wait, epoll_pwait, epoll_pwait2, rt_sigtimedwait: Linux makes them
 *     fail with EINTR at any stop, even a debugger's, so stopping a thread there already changes
 *     what the program sees. Not accept on a socket with a receive timeout (SO_RCVTIMEO: EINTR
 *     too), checked on a copy of the descriptor. Not read, recvfrom or recvmsg on a socket: on
 *     top of the timeout, MSG_WAITALL or SO_RCVLOWAT would make it return early with what has
 *     come so far; read of a pipe, FIFO, eventfd, timerfd or signalfd only (never the loader's).
 *  3. The thread's own signal mask can be read, and put back: rt_sigsuspend, and ppoll and
 *     pselect6 given a mask, wait with a temporary one, the thread's own saved aside for their
 *     return. Since Linux 5.0, PTRACE_GETSIGMASK reads the saved one and PTRACE_SETSIGMASK
 *     drops the pending return to it: the injector reads the thread's own mask, sets the call's,
 *     sets the thread's own back, and the call, restarted, installs its temporary one again.
 *     Before 5.0 ptrace showed the temporary mask: only ppoll and pselect6 without one then.
 * (select is pselect6 in glibc; nanosleep is clock_nanosleep.) The unsafe calls listed are
 * named in the refusal's summary of what the threads were doing.
 */
static const struct {
    long nr;
    const char *name;
    enum ftr_inj_class cls;
} calls[] = {
#ifdef SYS_nanosleep
    {SYS_nanosleep, "nanosleep", FTR_INJ_SAFE},
#endif
    {SYS_clock_nanosleep, "clock_nanosleep", FTR_INJ_SAFE},
#ifdef SYS_poll
    {SYS_poll, "poll", FTR_INJ_SAFE},
#endif
#ifdef SYS_select
    {SYS_select, "select", FTR_INJ_SAFE},
#endif
    {SYS_ppoll, "ppoll", FTR_INJ_SAFE_PPOLL},
    {SYS_pselect6, "pselect6", FTR_INJ_SAFE_PSELECT},
#ifdef SYS_pause
    {SYS_pause, "pause", FTR_INJ_SAFE},
#endif
    {SYS_wait4, "wait4", FTR_INJ_SAFE},
    {SYS_waitid, "waitid", FTR_INJ_SAFE},
    {SYS_accept, "accept", FTR_INJ_SAFE_ACCEPT},
    {SYS_accept4, "accept4", FTR_INJ_SAFE_ACCEPT},
    {SYS_read, "read", FTR_INJ_SAFE_READ},
    {SYS_rt_sigsuspend, "rt_sigsuspend", FTR_INJ_SAFE_SIGSUSPEND},
    {SYS_futex, "futex", FTR_INJ_UNSAFE},
#ifdef SYS_epoll_wait
    {SYS_epoll_wait, "epoll_wait", FTR_INJ_UNSAFE},
#endif
    {SYS_epoll_pwait, "epoll_pwait", FTR_INJ_UNSAFE},
#ifdef SYS_epoll_pwait2
    {SYS_epoll_pwait2, "epoll_pwait2", FTR_INJ_UNSAFE},
#endif
    {SYS_rt_sigtimedwait, "rt_sigtimedwait", FTR_INJ_UNSAFE},

    {SYS_restart_syscall, "restart_syscall", FTR_INJ_UNSAFE},
    {SYS_recvfrom, "recvfrom", FTR_INJ_UNSAFE},
    {SYS_recvmsg, "recvmsg", FTR_INJ_UNSAFE},
};

enum ftr_inj_class ftr_inj_syscall_class(long nr, const char **name)
{
    for (size_t i = 0; i < sizeof calls / sizeof calls[0]; i++)
        if (calls[i].nr == nr) {
            *name = calls[i].name;
            return calls[i].cls;
        }
    *name = NULL;
    return FTR_INJ_UNSAFE;
}

/* ---- small helpers ---- */

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void sleep_ms(unsigned ms)
{
    struct timespec d = {0, (long)ms * 1000000};
    while (nanosleep(&d, &d) < 0 && errno == EINTR)
        ;
}

void ftr_inj_errf(char *err, size_t n, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, n, fmt, ap);
    va_end(ap);
}

/* A small /proc file into buf (truncated to cap). @return 0, -1 (errno) */
static int read_small(const char *path, char *buf, size_t cap)
{
    char *t = ftr_read_all(path, NULL);
    if (!t) return -1;
    snprintf(buf, cap, "%s", t);
    free(t);
    return 0;
}

static long field_long(const char *status, const char *key, long dflt)
{
    const char *v = ftr_inj_status_field(status, key);
    return v ? strtol(v, NULL, 10) : dflt;
}

/* Reads len bytes of the process's memory. @return 0, -1 */
static int mem_read(pid_t pid, uint64_t addr, void *buf, size_t len)
{
    struct iovec local = {buf, len}, remote = {(void *)(uintptr_t)addr, len};
    return process_vm_readv(pid, &local, 1, &remote, 1, 0) == (ssize_t)len ? 0 : -1;
}

/* Writes into a stopped thread's stack: process_vm_writev, else /proc/PID/mem (which a tracer
 * may always write). @return 0, -1 (errno) */
static int mem_write(pid_t tid, uint64_t addr, const void *buf, size_t len)
{
    struct iovec local = {(void *)buf, len}, remote = {(void *)(uintptr_t)addr, len};
    if (process_vm_writev(tid, &local, 1, &remote, 1, 0) == (ssize_t)len) return 0;
    char path[64];
    snprintf(path, sizeof path, "/proc/%d/mem", (int)tid);
    int fd = open(path, O_RDWR | O_CLOEXEC);
    if (fd < 0) return -1;
    int ok = pwrite(fd, buf, len, (off_t)addr) == (ssize_t)len;
    int e = errno;
    close(fd);
    errno = ok ? 0 : (e ? e : EIO);
    return ok ? 0 : -1;
}

/* ---- the injection's state ---- */

struct look { /* one thread, as seen in one look */
    pid_t tid;
    struct ftr_inj_sysc sc;
    unsigned long switches; /* its context switches so far: it ran if they changed */
    uint64_t stack_end;     /* the end of the mapping its stack pointer is in */
};

struct ctx {
    pid_t pid;
    const char *lib;
    char task[64]; /* /proc/PID/task/TID of a live thread: the process's maps, fds, root */
    struct ftr_inj_libc lc;
    dev_t lib_dev; /* the library's file, as the process sees it: mapped after the load */
    ino_t lib_ino;
    struct look *prev, *cur;
    size_t nprev, ncur, cap;
    pid_t excluded[MAX_EXCLUDED];
    size_t nexcluded;
    char why[400];     /* why threads were passed over, as long as it fits */
    char summary[240]; /* what the threads were doing at the last look */
    unsigned char *scan;
    struct ftr_inj_saved *saved;
    struct ftr_inject_result *res;
    char *err;
    size_t errlen;
};

static int excluded(const struct ctx *c, pid_t tid)
{
    for (size_t i = 0; i < c->nexcluded; i++)
        if (c->excluded[i] == tid) return 1;
    return 0;
}

static void exclude(struct ctx *c, pid_t tid, const char *why)
{
    if (c->nexcluded < MAX_EXCLUDED) c->excluded[c->nexcluded++] = tid;
    size_t n = strlen(c->why);
    snprintf(c->why + n, sizeof c->why - n, "%sthread %d %s", n ? "; " : "", (int)tid, why);
}

/* Is the thread whose /proc directory is dir alive (not a zombie)? */
static int task_alive(const char *dir)
{
    char path[96], buf[512];
    snprintf(path, sizeof path, "%s/stat", dir);
    if (read_small(path, buf, sizeof buf) < 0) return 0;
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && p[2] != 'Z' && p[2] != 'X';
}

/* Does the process still run: its main thread, or the live thread found at the start (the main
 * thread may have called pthread_exit)? */
static int alive(const struct ctx *c)
{
    char dir[64];
    snprintf(dir, sizeof dir, "/proc/%d", (int)c->pid);
    return task_alive(dir) || task_alive(c->task);
}

/* ---- 1. the process ---- */

static int have_cap_ptrace(void)
{
    char *st = ftr_read_all("/proc/self/status", NULL);
    const char *v = st ? ftr_inj_status_field(st, "CapEff") : NULL;
    unsigned long long caps = v ? strtoull(v, NULL, 16) : 0;
    free(st);
    return (caps >> CAP_SYS_PTRACE_BIT) & 1;
}

/* The kernel lets a process trace another whose real, effective and saved uids and gids are
 * its own real ones (or with CAP_SYS_PTRACE). @return 0, or -1 with err */
static int check_owner(struct ctx *c, const char *status)
{
    if (have_cap_ptrace()) return 0;
    unsigned u[3] = {0}, g[3] = {0};
    const char *uv = ftr_inj_status_field(status, "Uid"), *gv = ftr_inj_status_field(status, "Gid");
    if (!uv || !gv || sscanf(uv, "%u %u %u", &u[0], &u[1], &u[2]) != 3 ||
        sscanf(gv, "%u %u %u", &g[0], &g[1], &g[2]) != 3)
        return 0; /* the kernel will say */
    uid_t me = getuid();
    gid_t mg = getgid();
    for (int i = 0; i < 3; i++) {
        if (u[i] != me) {
            struct passwd *pw = getpwuid(u[i]);
            ftr_inj_errf(c->err, c->errlen,
                         "%d runs as user %s (uid %u): only its owner or root (CAP_SYS_PTRACE) may "
                         "inject into it",
                         (int)c->pid, pw ? pw->pw_name : "?", u[i]);
            return -1;
        }
        if (g[i] != mg) {
            ftr_inj_errf(
                c->err, c->errlen,
                "%d runs with group id %u, not ours: only root (CAP_SYS_PTRACE) may inject "
                "into it",
                (int)c->pid, g[i]);
            return -1;
        }
    }
    return 0;
}

/* Every thread: none traced, none under seccomp; one alive (c->task). @return 0, -1 */
static int check_threads(struct ctx *c, int *stopped)
{
    char path[96];
    snprintf(path, sizeof path, "/proc/%d/task", (int)c->pid);
    DIR *d = opendir(path);
    if (!d) {
        ftr_inj_errf(c->err, c->errlen, "no such process %d", (int)c->pid);
        return -1;
    }
    int rc = 0;
    *stopped = 0;
    struct dirent *de;
    while (rc == 0 && (de = readdir(d))) {
        int tid = atoi(de->d_name);
        if (tid <= 0) continue;
        snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)c->pid, tid);
        char *st = ftr_read_all(path, NULL);
        if (!st) continue; /* gone meanwhile */
        const char *state = ftr_inj_status_field(st, "State");
        long tracer = field_long(st, "TracerPid", 0), seccomp = field_long(st, "Seccomp", 0);
        if (tracer) {
            char comm[64] = "?";
            snprintf(path, sizeof path, "/proc/%ld/comm", tracer);
            if (read_small(path, comm, sizeof comm) == 0) comm[strcspn(comm, "\n")] = 0;
            ftr_inj_errf(c->err, c->errlen, "%d is already traced by process %ld (%s)", (int)c->pid,
                         tracer, comm);
            rc = -1;
        } else if (seccomp) {
            ftr_inj_errf(
                c->err, c->errlen,
                "%d runs under a seccomp %s (Seccomp: %ld): the loader's system calls could be "
                "refused, or kill it",
                (int)c->pid, seccomp == 1 ? "strict mode" : "filter", seccomp);
            rc = -1;
        } else if (state && *state != 'Z' && *state != 'X') {
            if (*state == 'T') *stopped = 1;
            if (!c->task[0])
                snprintf(c->task, sizeof c->task, "/proc/%d/task/%d", (int)c->pid, tid);
        }
        free(st);
    }
    closedir(d);
    if (rc == 0 && !c->task[0]) {
        ftr_inj_errf(c->err, c->errlen,
                     "%d is a zombie: it has exited (its parent has not reaped it)", (int)c->pid);
        rc = -1;
    }
    return rc;
}

static int check_process(struct ctx *c)
{
    char path[PATH_MAX + 96];
    if (c->pid <= 0 || c->pid == getpid()) {
        ftr_inj_errf(c->err, c->errlen,
                     c->pid <= 0 ? "no such process %d" : "%d is this very process", (int)c->pid);
        return -1;
    }
    if (c->lib[0] != '/' || strlen(c->lib) >= PATH_MAX) {
        ftr_inj_errf(c->err, c->errlen, "the library must be given by its absolute path: %s",
                     c->lib);
        return -1;
    }
    int stopped;
    if (check_threads(c, &stopped) < 0) return -1;
    snprintf(path, sizeof path, "%s/status", c->task);
    char *status = ftr_read_all(path, NULL);
    if (!status) {
        ftr_inj_errf(c->err, c->errlen, "no such process %d", (int)c->pid);
        return -1;
    }
    int rc = -1;
    const char *arch = ftr_inj_arch_refusal(status);
    if (stopped)
        ftr_inj_errf(c->err, c->errlen, "%d is stopped (SIGSTOP or the like): continue it first",
                     (int)c->pid);
    else if (check_owner(c, status) < 0)
        ;
    else if (arch)
        ftr_inj_errf(c->err, c->errlen, "%d: %s", (int)c->pid, arch);
    else
        rc = 0;
    free(status);
    if (rc < 0) return -1;

    snprintf(path, sizeof path, "%s/maps", c->task);
    char *maps = ftr_read_all(path, NULL);
    char why[PATH_MAX + 128];
    rc = -1;
    if (!maps) {
        ftr_inj_errf(c->err, c->errlen, "cannot read %s: %s", path, strerror(errno));
        return -1;
    }
    if (ftr_inj_find_libc(c->pid, c->task, maps, &c->lc, why, sizeof why) < 0)
        ftr_inj_errf(c->err, c->errlen, "cannot load a library into %d: %s", (int)c->pid, why);
    else if (!c->lc.sigreturn || !c->lc.syscall_ret)
        ftr_inj_errf(c->err, c->errlen,
                     "cannot load a library into %d: its glibc's signal return (__restore_rt) "
                     "or a system call followed by a return was not found",
                     (int)c->pid);
    else
        rc = 0;
    free(maps);
    if (rc < 0) return -1;

    /* dlopen will open the path in the process's own view of the file system */
    snprintf(path, sizeof path, "%s/root%s", c->task, c->lib);
    struct stat st;
    if (access(path, R_OK) < 0 || stat(path, &st) < 0) {
        ftr_inj_errf(c->err, c->errlen, "%s: %s (as process %d sees it)", c->lib, strerror(errno),
                     (int)c->pid);
        return -1;
    }
    c->lib_dev = st.st_dev;
    c->lib_ino = st.st_ino;
    return 0;
}

/* ---- 2. the thread ---- */

/* Is descriptor fd of the process one a read or accept may wait on (see calls[])? */
static int fd_ok(struct ctx *c, enum ftr_inj_class cls, uint64_t fd)
{
    char path[96], link[64];
    struct stat st;
    if (fd > INT_MAX) return 0;
    snprintf(path, sizeof path, "%s/fd/%d", c->task, (int)fd);
    if (stat(path, &st) < 0) return 0;
    if (cls == FTR_INJ_SAFE_READ) {
        if (S_ISFIFO(st.st_mode)) return 1;
        ssize_t n = readlink(path, link, sizeof link - 1);
        if (n <= 0) return 0;
        link[n] = 0;
        return !strcmp(link, "anon_inode:[eventfd]") || !strcmp(link, "anon_inode:[timerfd]") ||
               !strcmp(link, "anon_inode:[signalfd]");
    }
    if (!S_ISSOCK(st.st_mode)) return 0;
    /* its receive timeout, read on a copy of the descriptor (the process is not touched) */
    int ok = 0, pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
    int copy = pidfd < 0 ? -1 : (int)syscall(SYS_pidfd_getfd, pidfd, (int)fd, 0);
    struct timeval tv;
    socklen_t len = sizeof tv;
    if (copy >= 0 && getsockopt(copy, SOL_SOCKET, SO_RCVTIMEO, &tv, &len) == 0)
        ok = tv.tv_sec == 0 && tv.tv_usec == 0;
    if (copy >= 0) close(copy);
    if (pidfd >= 0) close(pidfd);
    return ok;
}

/* Does ptrace show a thread's own signal mask while it waits with a temporary one (Linux 5.0)? */
static int mask_shown(void)
{
    struct utsname u;
    unsigned major = 0, minor = 0;
    return uname(&u) == 0 && sscanf(u.release, "%u.%u", &major, &minor) == 2 && major >= 5;
}

/* Do the call's arguments make it safe (calls[]'s conditions)? */
static int args_ok(struct ctx *c, pid_t tid, enum ftr_inj_class cls, const struct ftr_inj_sysc *sc)
{
    uint64_t mask;
    switch (cls) {
    case FTR_INJ_SAFE:
        return 1;
    case FTR_INJ_SAFE_READ:
    case FTR_INJ_SAFE_ACCEPT:
        return fd_ok(c, cls, sc->args[0]);
    case FTR_INJ_SAFE_PPOLL:
        return sc->args[3] == 0 || mask_shown();
    case FTR_INJ_SAFE_PSELECT: /* arg 5: {const sigset_t *mask; size_t size} */
        return sc->args[5] == 0 || mask_shown() ||
               (mem_read(tid, sc->args[5], &mask, sizeof mask) == 0 && !mask);
    case FTR_INJ_SAFE_SIGSUSPEND:
        return mask_shown();
    case FTR_INJ_UNSAFE:
        break;
    }
    return 0;
}

/* Can the call use the stack at sp? The main thread's (it grows on demand), or a thread stack
 * as glibc makes them (an anonymous mapping just above a PROT_NONE guard) with room enough: not
 * a stack in the heap or in an alternate signal stack, where dlopen's frames could overwrite
 * the program's data. */
static int stack_ok(const char *maps, uint64_t sp, uint64_t *end)
{
    struct ftr_inj_map m, below;
    if (ftr_inj_maps_find(maps, sp, &m, &below) < 0) return 0;
    *end = m.end;
    if (m.path_len == 7 && !memcmp(m.path, "[stack]", 7)) return 1;
    int anon =
        m.path_len == 0 || (m.path_len > 27 && !memcmp(m.path, "[anon: glibc: pthread stack", 27));
    return anon && !strcmp(m.perms, "rw-p") && below.end == m.start &&
           !memcmp(below.perms, "---", 3) &&
           sp - m.start >= STACK_NEED + FRAME_NEED + 128 + PATH_MAX;
}

/* Adds "name" to the summary of what the threads do, counted. */
static void tally(char (*names)[24], unsigned *counts, int *n, const char *name)
{
    for (int i = 0; i < *n; i++)
        if (!strcmp(names[i], name)) {
            counts[i]++;
            return;
        }
    if (*n < 8) {
        snprintf(names[*n], 24, "%s", name);
        counts[(*n)++] = 1;
    }
}

/* One look at every thread. @return the thread to stop (in c->cur), or NULL */
static const struct look *survey(struct ctx *c, unsigned looks)
{
    char path[128], buf[512], *maps = NULL;
    char names[8][24];
    unsigned counts[8];
    int nnames = 0;
    snprintf(path, sizeof path, "/proc/%d/task", (int)c->pid);
    DIR *d = opendir(path);
    if (!d) return NULL;
    c->ncur = 0;
    struct dirent *de;
    while ((de = readdir(d))) {
        int tid = atoi(de->d_name);
        struct ftr_inj_sysc sc;
        const char *name;
        if (tid <= 0) continue;
        snprintf(path, sizeof path, "/proc/%d/task/%d/syscall", (int)c->pid, tid);
        if (read_small(path, buf, sizeof buf) < 0 || ftr_inj_parse_syscall(buf, &sc) < 0) continue;
        if (sc.nr < 0) {
            tally(names, counts, &nnames, sc.nr == FTR_INJ_RUNNING ? "running" : "no call");
            continue;
        }
        enum ftr_inj_class cls = ftr_inj_syscall_class(sc.nr, &name);
        char num[24];
        snprintf(num, sizeof num, "call %ld", sc.nr);
        tally(names, counts, &nnames, name ? name : num);
        if (cls == FTR_INJ_UNSAFE || excluded(c, tid) || !args_ok(c, tid, cls, &sc)) continue;
        snprintf(path, sizeof path, "/proc/%d/task/%d/status", (int)c->pid, tid);
        char *st = ftr_read_all(path, NULL);
        if (!st) continue;
        unsigned long sw = (unsigned long)field_long(st, "voluntary_ctxt_switches", 0) +
                           (unsigned long)field_long(st, "nonvoluntary_ctxt_switches", 0);
        free(st);
        if (!maps) {
            snprintf(path, sizeof path, "%s/maps", c->task);
            if (!(maps = ftr_read_all(path, NULL))) break;
        }
        uint64_t stack_end;
        if (!stack_ok(maps, sc.sp, &stack_end)) {
            exclude(c, tid, "runs on a stack the call cannot safely grow into");
            continue;
        }
        if (c->ncur == c->cap) {
            size_t cap = c->cap ? 2 * c->cap : 16;
            struct look *p = realloc(c->prev, cap * sizeof *p),
                        *q = p ? realloc(c->cur, cap * sizeof *q) : NULL;
            if (p) c->prev = p;
            if (!q) break;
            c->cur = q;
            c->cap = cap;
        }
        c->cur[c->ncur++] = (struct look){tid, sc, sw, stack_end};
    }
    closedir(d);
    free(maps);
    char *s = c->summary;
    size_t left = sizeof c->summary;
    s[0] = 0;
    for (int i = 0; i < nnames && left > 1; i++) {
        int n = snprintf(s, left, "%s%u %s", i ? ", " : "", counts[i], names[i]);
        if (n < 0 || (size_t)n >= left) break;
        s += n, left -= (size_t)n;
    }
    /* a thread in the same call as at the last look, which has not run since, first */
    const struct look *pick = NULL;
    for (size_t i = 0; i < c->ncur && !pick; i++)
        for (size_t j = 0; j < c->nprev; j++)
            if (c->prev[j].tid == c->cur[i].tid && c->prev[j].switches == c->cur[i].switches &&
                !memcmp(&c->prev[j].sc, &c->cur[i].sc, sizeof c->cur[i].sc)) {
                pick = &c->cur[i];
                break;
            }
    if (!pick && c->ncur && looks + 1 >= SETTLE_LOOKS) pick = &c->cur[0];
    return pick;
}

/* ---- 3-5. the call ---- */

struct pending { /* a signal that stopped the thread during the call, to give back after */
    int sig;
    siginfo_t si;
};

/* waitpid for the thread, through EINTR. @return 0, or -1 (it is gone: ECHILD) */
static int wait_tid(pid_t tid, int *st)
{
    for (;;) {
        if (waitpid(tid, st, __WALL) == tid) return 0;
        if (errno != EINTR) return -1;
    }
}

/* The process ended while we held its thread: what to say. */
static int gone(struct ctx *c, int have_status, int st)
{
    if (have_status && WIFSIGNALED(st))
        ftr_inj_errf(c->err, c->errlen, "%d was killed by signal %d (%s) while its thread was held",
                     (int)c->pid, WTERMSIG(st), strsignal(WTERMSIG(st)));
    else if (have_status && WIFEXITED(st))
        ftr_inj_errf(c->err, c->errlen, "%d exited (status %d) while its thread was held",
                     (int)c->pid, WEXITSTATUS(st));
    else
        ftr_inj_errf(c->err, c->errlen, "%d ended while its thread was held", (int)c->pid);
    return FAIL;
}

/* Lets a stopped thread go untouched; another will be chosen. */
static int release(struct ctx *c, pid_t tid, int sig)
{
    ptrace(PTRACE_DETACH, tid, NULL, (void *)(long)sig);
    if (++c->res->released >= MAX_RELEASES) {
        ftr_inj_errf(c->err, c->errlen,
                     "%d: %u threads woke up as they were being stopped; try again when it is idle",
                     (int)c->pid, c->res->released);
        return FAIL;
    }
    return RETRY;
}

static int restartable(long ret)
{
    return ret == -FTR_INJ_ERESTARTSYS || ret == -FTR_INJ_ERESTARTNOINTR ||
           ret == -FTR_INJ_ERESTARTNOHAND || ret == -FTR_INJ_ERESTART_RESTARTBLOCK;
}

/* Does the thread's stack hold a frame of glibc's signal delivery (its return address,
 * __restore_rt) between sp and the end of its mapping (stack_end, SCAN_MAX at most)? Then it waits
 * inside a signal handler, which may have interrupted malloc or the loader. */
static int in_handler(struct ctx *c, pid_t tid, uint64_t sp, uint64_t stack_end)
{
    int found = 0;
    sp &= ~(uint64_t)7;
    size_t len = stack_end - sp > SCAN_MAX ? SCAN_MAX : (size_t)(stack_end - sp);
    if (c->lc.sigreturn && mem_read(tid, sp, c->scan, len) == 0)
        for (size_t i = 0; i + 8 <= len && !found; i += 8) {
            uint64_t w;
            memcpy(&w, c->scan + i, 8);
            found = w == c->lc.sigreturn;
        }
    return found;
}

/* Runs fn(a0, a1) in the stopped thread from entry_sp (its return address written there) under
 * PTRACE_SYSCALL, with the signal mask call_mask, until the entry stop of a system call at
 * stop_pc with stop_sp (the call's return path): its number in *nr. Its faults and traps go to
 * it (the program's handlers, or its end, as if it had made the call itself); any other signal
 * that stops it is kept in *pend (the first) or delivered now (the next).
 * @return 0, -1 (err set; the thread somewhere in the call) or FAIL via gone() */
static int remote_call(struct ctx *c, pid_t tid, uint64_t fn, uint64_t entry_sp, uint64_t a0,
                       uint64_t call_mask, uint64_t stop_pc, uint64_t stop_sp, uint64_t *nr,
                       struct pending *pend)
{
    /* the registers first: if the injector died between the two, the call would run with the
     * thread's own mask, and return through the frame all the same */
    if (ftr_inj_arch_set_call(tid, c->saved, fn, entry_sp, a0, RTLD_NOW_VALUE) < 0 ||
        ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof call_mask, &call_mask) < 0) {
        ftr_inj_errf(c->err, c->errlen, "cannot set the registers of thread %d: %s", (int)tid,
                     strerror(errno));
        return -1;
    }
    int sig = 0, st;
    for (;;) {
        long cont = ptrace(PTRACE_SYSCALL, tid, NULL, (void *)(long)sig);
        int e = errno;
        if (wait_tid(tid, &st) < 0) return gone(c, 0, 0);
        if (WIFEXITED(st) || WIFSIGNALED(st)) return gone(c, 1, st);
        if (cont < 0) {
            ftr_inj_errf(c->err, c->errlen, "PTRACE_SYSCALL of thread %d: %s", (int)tid,
                         strerror(e));
            return -1;
        }
        sig = 0;
        if (!WIFSTOPPED(st) || st >> 16 == PTRACE_EVENT_STOP) continue; /* a group stop */
        int s = WSTOPSIG(st);
        if (s == (SIGTRAP | 0x80)) { /* a system call's entry or exit */
            uint64_t pc, sp;
            if (ftr_inj_arch_at_syscall(tid, &pc, &sp, nr) < 0) {
                ftr_inj_errf(c->err, c->errlen, "cannot read the registers of thread %d: %s",
                             (int)tid, strerror(errno));
                return -1;
            }
            if (pc == stop_pc && sp == stop_sp) return 0;
            continue;
        }
        siginfo_t si;
        if (ptrace(PTRACE_GETSIGINFO, tid, NULL, &si) < 0) memset(&si, 0, sizeof si);
        if ((SIGBIT(s) & SYNC_SIGNALS) && si.si_code > 0)
            sig = s;
        else if (!pend->sig)
            pend->sig = s, pend->si = si;
        else
            sig = s;
    }
}

/* Puts back what was changed and lets the thread go: its system call restarts (at_entry: the
 * thread is at a system call entry stop; the restart is made there). The mask first and the
 * registers last: until they are set, the thread would still resume through the frame.
 * @return 0, -1 */
static int restore(struct ctx *c, pid_t tid, uint64_t mask, struct pending *pend, int at_entry)
{
    int rc = 0;
    if (ptrace(PTRACE_SETSIGMASK, tid, (void *)sizeof mask, &mask) < 0) rc = -1;
    if (ftr_inj_arch_restore(tid, c->saved, at_entry) < 0) rc = -1;
    if (pend->sig && !at_entry && ptrace(PTRACE_SETSIGINFO, tid, NULL, &pend->si) < 0)
        pend->sig = 0;
    if (ptrace(PTRACE_DETACH, tid, NULL, (void *)(long)pend->sig) < 0) rc = -1;
    return rc;
}

/* Is the library's file mapped in the process (the load succeeded)? Where, in *base. */
static int lib_mapped(struct ctx *c, uint64_t *base)
{
    char path[96];
    snprintf(path, sizeof path, "%s/maps", c->task);
    char *maps = ftr_read_all(path, NULL);
    struct ftr_inj_map m;
    *base = 0;
    for (const char *l = maps; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        if (ftr_inj_parse_maps_line(l, &m) == 0 && m.inode == (uint64_t)c->lib_ino &&
            m.dev_major == major(c->lib_dev) && m.dev_minor == minor(c->lib_dev) &&
            (!*base || m.start < *base))
            *base = m.start;
    free(maps);
    return *base != 0;
}

/* Stops thread lk->tid, makes it call dlopen and gives it back. @return DONE, RETRY, FAIL */
static int attempt(struct ctx *c, const struct look *lk)
{
    pid_t tid = lk->tid;
    int st;
    if (ptrace(PTRACE_SEIZE, tid, NULL, (void *)(long)PTRACE_O_TRACESYSGOOD) < 0) {
        if (errno == ESRCH) return RETRY; /* the thread has ended */
        return -errno;                    /* the caller explains */
    }
    uint64_t t0 = now_ns();
    if (ptrace(PTRACE_INTERRUPT, tid, NULL, NULL) < 0) {
        waitpid(tid, &st, __WALL | WNOHANG); /* it has ended: reap it */
        return alive(c) ? RETRY : gone(c, 0, 0);
    }
    if (wait_tid(tid, &st) < 0 || WIFEXITED(st) || WIFSIGNALED(st))
        return alive(c) ? RETRY : gone(c, 0, 0);
    if (st >> 16 != PTRACE_EVENT_STOP) return release(c, tid, WSTOPSIG(st)); /* a signal's stop */
    if (WSTOPSIG(st) != SIGTRAP) {                                           /* a group stop */
        ptrace(PTRACE_DETACH, tid, NULL, NULL);
        ftr_inj_errf(c->err, c->errlen, "%d was stopped (SIGSTOP or the like) meanwhile",
                     (int)c->pid);
        return FAIL;
    }
    /* still waiting in the call seen, to be restarted? */
    struct ftr_inj_sysc sc;
    long ret;
    unsigned char insn[8];
    if (ftr_inj_arch_get_regs(tid, c->saved) < 0) return release(c, tid, 0);
    ftr_inj_arch_syscall(c->saved, &sc, &ret);
    size_t il = ftr_inj_arch_syscall_insn_len;
    if (memcmp(&sc, &lk->sc, sizeof sc) || !restartable(ret) ||
        mem_read(tid, sc.pc - il, insn, il) < 0 || memcmp(insn, ftr_inj_arch_syscall_insn, il))
        return release(c, tid, 0);
    uint64_t mask;
    if (ptrace(PTRACE_GETSIGMASK, tid, (void *)sizeof mask, &mask) < 0) return release(c, tid, 0);
    if (in_handler(c, tid, sc.sp, lk->stack_end)) {
        exclude(c, tid, "waits inside a signal handler");
        return release(c, tid, 0);
    }
    if (ftr_inj_arch_get_fp(tid, c->saved) < 0) {
        ftr_inj_errf(c->err, c->errlen, "cannot read the FP state of thread %d: %s", (int)tid,
                     strerror(errno));
        ptrace(PTRACE_DETACH, tid, NULL, NULL);
        return FAIL;
    }

    ftr_inj_arch_set_mask(c->saved, mask);

    /* the call's frame: the path, and under it the signal frame the call returns into */
    struct ftr_inj_frame f;
    size_t len = strlen(c->lib) + 1;
    if (ftr_inj_arch_frame(c->saved, c->lc.sigreturn, sc.sp, c->lib, len, &f) < 0 ||
        mem_write(tid, f.at, f.img, f.len) < 0) {
        ftr_inj_errf(c->err, c->errlen, "cannot write to the stack of thread %d: %s", (int)tid,
                     strerror(errno));
        ptrace(PTRACE_DETACH, tid, NULL, NULL);
        return FAIL;
    }
    /* from here on the thread can resume alone */
    struct pending pend = {0};
    uint64_t call_mask = mask | ~SYNC_SIGNALS; /* asynchronous signals wait */
    uint64_t stop_pc, stop_sp, nr = 0, base = 0, msg = 0;
    ftr_inj_arch_sigreturn_stop(c->lc.sigreturn, f.ret_at, &stop_pc, &stop_sp);
    int rc = remote_call(c, tid, c->lc.dlopen, f.ret_at, f.data, call_mask, stop_pc, stop_sp, &nr,
                         &pend);
    if (rc == FAIL) return FAIL; /* the process is gone */
    char text[DLERROR_MAX] = "";
    int loaded = rc == 0 && lib_mapped(c, &base);
    if (rc == 0 && !loaded) {
        uint64_t words[2], entry_sp;
        ftr_inj_arch_value_stub(c->lc.syscall_ret, f.ret_at, words, &entry_sp, &stop_pc, &stop_sp);
        if (mem_write(tid, entry_sp, words, sizeof words) == 0 &&
            (rc = remote_call(c, tid, c->lc.dlerror, entry_sp, 0, call_mask, stop_pc, stop_sp, &msg,
                              &pend)) == FAIL)
            return FAIL;
        /* read up to the end of its page first: the next one may not be mapped */
        size_t first = 4096 - (size_t)(msg & 4095);
        if (rc == 0 && msg &&
            mem_read(tid, msg, text, first < sizeof text ? first : sizeof text - 1) == 0 &&
            first < sizeof text - 1)
            mem_read(tid, msg + first, text + first, sizeof text - 1 - first);
        text[sizeof text - 1] = 0;
        text[strcspn(text, "\n")] = 0;
    }
    /* at the stop of the call's return, restored; anywhere else (an error), let go: the thread
     * returns through the frame */
    int restored = rc == 0 ? restore(c, tid, mask, &pend, 1)
                           : (int)ptrace(PTRACE_DETACH, tid, NULL, (void *)(long)pend.sig);
    c->res->held_ns = now_ns() - t0;
    c->res->tid = tid;
    c->res->base = base;
    if (restored < 0) {
        if (!alive(c)) return gone(c, 0, 0);
        ftr_inj_errf(c->err, c->errlen, "could not restore thread %d of %d exactly: %s", (int)tid,
                     (int)c->pid, strerror(errno));
        return FAIL;
    }
    if (rc < 0) return FAIL;
    if (!loaded) {
        ftr_inj_errf(c->err, c->errlen, "dlopen in %d failed: %s", (int)c->pid,
                     text[0] ? text : "(no message)");
        return FAIL;
    }
    return DONE;
}

/* PTRACE_SEIZE was refused though we may act as the owner: say why, and what would allow it. */
static void explain_eperm(struct ctx *c, int e)
{
    char buf[32], path[64];
    int scope = -1;
    if (read_small("/proc/sys/kernel/yama/ptrace_scope", buf, sizeof buf) == 0) scope = atoi(buf);
    int cap = have_cap_ptrace();
    struct stat st;
    snprintf(path, sizeof path, "/proc/%d", (int)c->pid);
    int dumpable = stat(path, &st) < 0 || st.st_uid != 0 || getuid() == 0;
    if (scope >= 3)
        ftr_inj_errf(
            c->err, c->errlen,
            "tracing %d is not permitted: Yama's ptrace_scope is 3, no process may be traced "
            "until reboot",
            (int)c->pid);
    else if (scope == 2 && !cap)
        ftr_inj_errf(
            c->err, c->errlen,
            "tracing %d is not permitted: Yama's ptrace_scope is 2, only root (CAP_SYS_PTRACE) "
            "may trace; run as root",
            (int)c->pid);
    else if (scope == 1 && !cap)
        ftr_inj_errf(
            c->err, c->errlen,
            "tracing %d is not permitted: Yama's ptrace_scope is 1 (only a parent may trace its "
            "children); run as root or with CAP_SYS_PTRACE, or allow it with 'echo 0 > "
            "/proc/sys/kernel/yama/ptrace_scope', or have the program call "
            "prctl(PR_SET_PTRACER, PR_SET_PTRACER_ANY)",
            (int)c->pid);
    else if (!dumpable)
        ftr_inj_errf(c->err, c->errlen,
                     "tracing %d is not permitted: it is not dumpable (set-user-ID, or "
                     "prctl(PR_SET_DUMPABLE, 0)); only root may",
                     (int)c->pid);
    else
        ftr_inj_errf(c->err, c->errlen, "PTRACE_SEIZE of %d: %s (a security module?)", (int)c->pid,
                     strerror(e));
}

int ftr_inject(pid_t pid, const char *lib_path, const struct ftr_inject_opts *opts,
               struct ftr_inject_result *res, char *err, size_t errlen)
{
    struct ctx c = {.pid = pid, .lib = lib_path, .res = res, .err = err, .errlen = errlen};
    unsigned wait_ms = opts && opts->wait_ms ? opts->wait_ms : FTR_INJECT_WAIT_MS;
    memset(res, 0, sizeof *res);
    if (errlen) err[0] = 0;
    if (check_process(&c) < 0) return -1;
    c.scan = malloc(SCAN_MAX);
    c.saved = ftr_inj_arch_alloc();
    int rc = c.scan && c.saved ? RETRY : FAIL;
    if (rc == FAIL) ftr_inj_errf(err, errlen, "out of memory");
    uint64_t deadline = now_ns() + (uint64_t)wait_ms * 1000000u;
    for (unsigned looks = 0; rc == RETRY; looks++) {
        const struct look *lk = survey(&c, looks);
        if (lk) {
            /* our own asynchronous signals wait while the thread is held (not faults) */
            sigset_t all, old;
            sigfillset(&all);
            for (int s = 1; s < 32; s++)
                if (SIGBIT(s) & SYNC_SIGNALS) sigdelset(&all, s);
            pthread_sigmask(SIG_BLOCK, &all, &old);
            rc = attempt(&c, lk);
            pthread_sigmask(SIG_SETMASK, &old, NULL);
            if (rc < 0) {
                explain_eperm(&c, -rc);
                rc = FAIL;
            }
            if (rc == RETRY) {
                c.ncur = 0; /* the threads are looked at afresh */
                looks = (unsigned)-1;
            }
        }
        struct look *t = c.prev;
        c.prev = c.cur, c.nprev = c.ncur;
        c.cur = t;
        if (rc != RETRY) break;
        if (!alive(&c)) {
            ftr_inj_errf(err, errlen, "%d has exited", (int)pid);
            rc = FAIL;
        } else if (now_ns() >= deadline) {
            ftr_inj_errf(
                err, errlen,
                "no thread of %d waits in a system call where loading is safe (%s%s%s); try "
                "again when it is idle",
                (int)pid, c.summary[0] ? c.summary : "no thread", c.why[0] ? "; " : "", c.why);
            rc = FAIL;
        } else if (!lk) {
            sleep_ms(POLL_MS);
        }
    }
    free(c.prev);
    free(c.cur);
    free(c.scan);
    ftr_inj_arch_free(c.saved);
    return rc == DONE ? 0 : -1;
}
