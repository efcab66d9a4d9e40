/*
 * recorder_client.c - the process's side of the recorder (recorder.h says what it is).
 *
 * The process talks to the recorder over a socket once per image, for its HELLO, from where no
 * other thread of the program runs (the constructor, a fork child's handler) and closes it at
 * once: a descriptor of ours in the program's table is one the program can see, count and close.
 * The rest is the region's: metadata appended to its log under meta_lock (the constructor,
 * dlopen(), the control server), forks counted, the end written into its header.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "forkpage.h"
#include "ftr_env.h"
#include "recorder.h"
#include "region.h"
#include "tracer.h"

extern struct ftr_process_info ftr_process;
extern uint64_t ftr_start_raw_ns, ftr_start_cal_tsc;

static int on FTR_FORK_PAGE; /* this image's records go to the recorder */
static pthread_mutex_t meta_lock FTR_FORK_PAGE = PTHREAD_MUTEX_INITIALIZER;
static uint32_t parent_pid FTR_FORK_PAGE;    /* a fork child's HELLO says whose modules it has */
static uint64_t fork_meta FTR_FORK_PAGE;     /* ... and how much of that parent's log */
static char rec_name[FTR_RECORDER_NAME_MAX]; /* the recorder's socket */

int ftr_recorder_on(void)
{
    return on;
}

static socklen_t abstract_addr(struct sockaddr_un *sa, const char *name)
{
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    size_t n = strlen(name);
    if (n > sizeof sa->sun_path - 2) n = sizeof sa->sun_path - 2;
    memcpy(sa->sun_path + 1, name, n); /* sun_path[0] = 0: the abstract namespace */
    return (socklen_t)(offsetof(struct sockaddr_un, sun_path) + 1 + n);
}

/* @return 0, or -1 (the recorder is gone) */
static int send_all(int fd, const void *p, size_t n)
{
    const char *b = p;
    while (n) {
        ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return -1;
        b += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The recorder's socket of the file system: <ctl dir>/<name>.sock (0700, ours), which the
 * recorder listens on beside the abstract name. A process in a network namespace of its own
 * (unshare(CLONE_NEWNET) before a fork) cannot reach an abstract name, which belongs to the
 * namespace the recorder started in; a path it reaches. @return 0, -1 (too long) */
static int recorder_path(const char *name, struct sockaddr_un *sa)
{
    char dir[200];
    ftr_ctl_dir((unsigned)geteuid(), dir, sizeof dir);
    memset(sa, 0, sizeof *sa);
    sa->sun_family = AF_UNIX;
    int n = snprintf(sa->sun_path, sizeof sa->sun_path, "%s/%s.sock", dir, name);
    return dir[0] && n > 0 && (size_t)n < sizeof sa->sun_path ? 0 : -1;
}

/* A connection to the recorder at name: its abstract name, or else its path (recorder_path):
 * found at the image's start, a fork child's may not be computed anew (it reads the
 * environment the program may be changing). @return the descriptor (above the program's
 * numbers), -1 */
static struct sockaddr_un rec_sa_path;
static int connect_recorder(const char *name)
{
    struct sockaddr_un sa;
    socklen_t alen = abstract_addr(&sa, name);
    for (int i = 0; i < 2; i++) {
        if (i == 1 && !rec_sa_path.sun_path[0]) break;
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) return -1;
        fd = ftr_fd_high(fd);
        const struct sockaddr *to =
            i ? (const struct sockaddr *)&rec_sa_path : (const struct sockaddr *)&sa;
        socklen_t len = i ? (socklen_t)sizeof rec_sa_path : alen;
        int rc;
        while ((rc = connect(fd, to, len)) < 0 && errno == EINTR)
            ;
        if (rc == 0) return fd;
        syscall(SYS_close, fd);
    }
    return -1;
}

static char hello_err[160]; /* why the last HELLO could not be said */

const char *ftr_recorder_error(void)
{
    return hello_err[0] ? hello_err : "the session's recorder is gone";
}

/* HELLO to the recorder at name, with the region's memfd: a connection of its own, closed
 * after. @return 0, -1 (hello_err says why) */
static int hello(const char *name)
{
    int memfd = ftr_region_fd();
    if (memfd < 0) {
        snprintf(hello_err, sizeof hello_err, "no memory shared with the recorder");
        return -1;
    }
    int fd = connect_recorder(name);
    if (fd < 0)
        snprintf(hello_err, sizeof hello_err,
                 "the session's recorder is gone, or out of reach (a chroot and a network "
                 "namespace of its own?)");
    /* The recorder takes a HELLO from its own user or root only (a process that changed its
     * user since, as a server dropping its privileges before it forks does, would write into
     * memory nobody reads): said here, the process knows it is untraced. */
    struct ucred cr;
    socklen_t cl = sizeof cr;
    uid_t me = geteuid();
    if (fd >= 0 && me != 0 && getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) == 0 &&
        cr.uid != me) {
        snprintf(hello_err, sizeof hello_err, "it runs as uid %u, the session's recorder as uid %u",
                 (unsigned)me, (unsigned)cr.uid);
        syscall(SYS_close, fd);
        fd = -1;
    }
    int rc = fd >= 0 ? 0 : -1;
    size_t strings = 0;
    for (uint32_t i = 0; i < ftr_process.argc; i++)
        strings += strlen(ftr_process.argv[i]) + 1;
    const char *exe = ftr_process.exe ? ftr_process.exe : "";
    strings += strlen(exe) + 1;
    struct ftr_msg_hello h = {
        .size = (uint32_t)(sizeof h + strings),
        .pid = ftr_g.pid,
        .ppid = ftr_process.ppid,
        .fork_of = parent_pid,
        .fork_meta = fork_meta,
        .session_id = ftr_process.session_id,
        .start_realtime_ns = ftr_process.start_realtime_ns,
        .start_tsc = ftr_process.start_tsc,
        .cal_raw_ns = ftr_start_raw_ns,
        .cal_tsc = ftr_start_cal_tsc,
        .tsc_hz = ftr_g.tsc_hz,
        .tsc_calibration = ftr_hot.clock_mono ? FTR_TSC_CAL_MONOTONIC : FTR_TSC_CAL_MEASURED,
        .clock_check = ftr_process.clock_check,
        .clock_mono = (uint32_t)ftr_hot.clock_mono,
        .lossless = (uint32_t)ftr_cfg.lossless,
        .zstd_level = (uint32_t)ftr_cfg.zstd_level,
        .flush_ms = ftr_cfg.flush_ms,
        .chunk_nrec = (uint32_t)(ftr_cfg.chunk_bytes / sizeof(struct ftr_rec)),
        .argc = ftr_process.argc};
    /* the memfd, then (a fork child's) the eventfd that wakes its parked server on news */
    int fds[2] = {memfd, parent_pid ? ftr_control_child_wake_fd(0) : -1};
    size_t nfds = fds[1] >= 0 ? 2 : 1;
    union {
        char buf[CMSG_SPACE(2 * sizeof(int))];
        struct cmsghdr align;
    } u;
    struct iovec iov = {&h, sizeof h};
    struct msghdr mh = {.msg_iov = &iov,
                        .msg_iovlen = 1,
                        .msg_control = u.buf,
                        .msg_controllen = CMSG_SPACE(nfds * sizeof(int))};
    struct cmsghdr *cm = CMSG_FIRSTHDR(&mh);
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_RIGHTS;
    cm->cmsg_len = CMSG_LEN(nfds * sizeof(int));
    memcpy(CMSG_DATA(cm), fds, nfds * sizeof(int));
    ssize_t k = -1;
    if (rc == 0)
        while ((k = sendmsg(fd, &mh, MSG_NOSIGNAL)) < 0 && errno == EINTR)
            ;
    rc = k < 0 || ((size_t)k < sizeof h && send_all(fd, (char *)&h + k, sizeof h - (size_t)k));
    for (uint32_t i = 0; !rc && i < ftr_process.argc; i++)
        rc = send_all(fd, ftr_process.argv[i], strlen(ftr_process.argv[i]) + 1);
    if (!rc) rc = send_all(fd, exe, strlen(exe) + 1);
    if (fd >= 0) syscall(SYS_close, fd);
    return rc ? -1 : 0;
}

/* The value of FTRACE_RECORDER: the socket's name, and the file it writes ("dev:ino") */
static void recorder_value(char *buf, size_t len, const char *name, int trace_fd)
{
    struct stat st;
    if (fstat(trace_fd, &st) != 0) st.st_dev = st.st_ino = 0;
    snprintf(buf, len, "%s@%llx:%llx", name, (unsigned long long)st.st_dev,
             (unsigned long long)st.st_ino);
}

/* Starts the session's recorder: a double fork, so that it is neither the program's child
 * (no SIGCHLD, nothing for wait() to reap) nor its parent, in a session of its own (a Ctrl-C
 * at the terminal is the program's). The middle process takes the file's lock for us, on a
 * description of its own that the recorder then has: there is no moment when neither holds
 * one. @return 0 (its name in name), -1 */
static int start_recorder(int trace_fd, char *name, size_t len)
{
    uint64_t rnd = ftr_rdtsc() ^ (uint64_t)ftr_g.start_ns * 0x9e3779b97f4a7c15ull;
    snprintf(name, len, "ftrace-rec-%u-%016llx", ftr_g.pid, (unsigned long long)rnd);
    struct sockaddr_un sa;
    socklen_t alen = abstract_addr(&sa, name);
    int lfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lfd < 0) return -1;
    if (bind(lfd, (struct sockaddr *)&sa, alen) < 0 || listen(lfd, 512) < 0) {
        close(lfd);
        return -1;
    }
    /* its path too, where the directory is ours (without it, no namespace but this one) */
    struct sockaddr_un psa;
    char dir[200], why[300];
    ftr_ctl_dir((unsigned)geteuid(), dir, sizeof dir);
    int pfd = -1;
    if (recorder_path(name, &psa) == 0 && ftr_ctl_dir_check(dir, why, sizeof why) == 0 &&
        (pfd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) >= 0 &&
        (bind(pfd, (struct sockaddr *)&psa, sizeof psa) < 0 || listen(pfd, 512) < 0)) {
        close(pfd);
        pfd = -1;
    }
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", trace_fd);
    pid_t mid = (pid_t)syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
    if (mid == 0) { /* the middle process */
        int own = open(path, O_WRONLY | O_APPEND | O_CLOEXEC);
        if (own < 0 || ftr_lock_writer(own, ftr_g.pid) < 0) _exit(1);
        setsid();
        pid_t rec = (pid_t)syscall(SYS_clone, SIGCHLD, 0, NULL, NULL, 0);
        if (rec == 0) ftr_recorder_main(lfd, pfd, own, ftr_g.pid);
        _exit(rec > 0 ? 0 : 1);
    }
    close(lfd);
    if (pfd >= 0) close(pfd);
    if (mid < 0) {
        if (pfd >= 0) unlink(psa.sun_path);
        return -1;
    }
    int st = 0;
    while (waitpid(mid, &st, __WALL) < 0)
        if (errno != EINTR) {
            st = errno == ECHILD ? 0 : 1; /* SIGCHLD ignored: reaped by the kernel */
            break;
        }
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 0;
    if (pfd >= 0) unlink(psa.sun_path); /* no recorder was started to remove it */
    return -1;
}

int ftr_recorder_join(int trace_fd)
{
    const char *v = getenv(ftr_env_name(FTR_ENV_RECORDER));
    if (v && !strcmp(v, "0")) return -1;
    char mine[FTR_RECORDER_NAME_MAX + 64], name[FTR_RECORDER_NAME_MAX] = "";
    recorder_value(mine, sizeof mine, "", trace_fd);
    const char *at = v ? strchr(v, '@') : NULL;
    int joined = -1;
    if (at && !strcmp(at, strchr(mine, '@')) && (size_t)(at - v) < sizeof name) {
        memcpy(name, v, (size_t)(at - v)); /* the session's, and it writes this file */
        name[at - v] = 0;
        if (recorder_path(name, &rec_sa_path) < 0) rec_sa_path.sun_path[0] = 0;
        joined = hello(name);
    }
    if (joined < 0) {
        if (start_recorder(trace_fd, name, sizeof name) < 0) return -1;
        if (recorder_path(name, &rec_sa_path) < 0) rec_sa_path.sun_path[0] = 0;
        if (hello(name) < 0) return -1;
        recorder_value(mine, sizeof mine, name, trace_fd);
        ftr_env_session_set(FTR_ENV_RECORDER, mine);
    }
    snprintf(rec_name, sizeof rec_name, "%s", name);
    on = 1;
    return 0;
}

void ftr_recorder_meta(const struct ftr_buf *chunks)
{
    if (!on || !chunks->len) return;
    pthread_mutex_lock(&meta_lock);
    ftr_region_meta_append(chunks->data, chunks->len); /* full (64 MiB): not named, counted */
    pthread_mutex_unlock(&meta_lock);
    struct ftr_region_hdr *h = ftr_region_header();
    if (h) ftr_region_wake(h);
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

/* Waits for the recorder to say ENDED. Bounded: a recorder that makes no progress for limit ms
 * is not waited for (it counts what it writes as it goes). Only futex and the clock: a
 * sandbox's allowlist has those. @return 1 (ENDED), 0 */
static int wait_ended(struct ftr_region_hdr *h, uint64_t limit)
{
    uint64_t since = mono_ms(), seen = atomic_load(&h->written) + atomic_load(&h->passes);
    while (atomic_load(&h->end_state) != FTR_REGION_ENDED) {
        struct timespec ts = {0, 20 * 1000 * 1000};
        syscall(SYS_futex, &h->end_state, FUTEX_WAIT, FTR_REGION_ENDING, &ts, NULL, 0);
        uint64_t now = mono_ms(), progress = atomic_load(&h->written) + atomic_load(&h->passes);
        if (progress != seen) seen = progress, since = now;
        if (now - since > limit) return 0;
    }
    return 1;
}

int ftr_recorder_end(const struct ftr_end_info *end, int from_signal)
{
    struct ftr_region_hdr *h = ftr_region_header();
    if (!on || !h) return 0;
    h->end_how = end->how;
    h->end_code = end->code;
    h->end_tsc = end->tsc;
    h->end_lost = end->lost;
    h->end_lost_calls = end->lost_calls;
    h->end_overruns = end->overruns;
    h->sites = end->sites;
    h->patched = end->patched;
    h->skipped = end->skipped;
    h->through = end->through;
    atomic_store(&h->end_state, FTR_REGION_ENDING);
    ftr_region_wake(h);
    return ftr_summary_may_say() ? wait_ended(h, from_signal ? 1000 : 2000) : 0;
}

static int fork_counted FTR_FORK_PAGE; /* the prepare handler counted this fork (forking) */

void ftr_recorder_prepare_fork(void)
{
    pthread_mutex_lock(&meta_lock);
    fork_counted = 0;
    struct ftr_region_hdr *h = ftr_region_header();
    if (!on || !h || atomic_load(&h->end_state) != FTR_REGION_RUNNING) return; /* no HELLO */
    atomic_fetch_add(&h->forking, 1); /* the recorder holds our lock until the child's HELLO */
    fork_meta = atomic_load(&h->meta_len);
    fork_counted = 1;
}

void ftr_recorder_parent_fork(void)
{
    pthread_mutex_unlock(&meta_lock);
}

/* A fork child that will say no HELLO (it does not trace, or could not reach the recorder)
 * takes back what its parent's prepare handler counted, so that the recorder does not hold the
 * parent's end for it (2 s, CHILDREN_MS); the parent's header goes from its memory either way. */
static void settle_fork(int said_hello)
{
    struct ftr_region_hdr *ph = ftr_region_parent(0);
    if (!said_hello && fork_counted && ph) atomic_fetch_sub(&ph->forking, 1);
    fork_counted = 0;
    ftr_region_parent(1);
}

void ftr_recorder_forget(void)
{
    pthread_mutex_init(&meta_lock, NULL);
    on = 0;
    settle_fork(0);
}

int ftr_recorder_child_fork(void)
{
    int was_on = on;
    pthread_mutex_init(&meta_lock, NULL);
    on = 0;
    if (was_on && rec_name[0]) {
        parent_pid = ftr_process.ppid;
        on = hello(rec_name) == 0;
    }
    settle_fork(on);
    return on ? 0 : -1;
}

int ftr_recorder_resume(void)
{
    struct ftr_region_hdr *h = ftr_region_header();
    if (!on || !h) return -1;
    wait_ended(h, 2000); /* the END of the image that failed to exec, if it did not wait */
    atomic_store(&h->end_state, FTR_REGION_RUNNING);
    parent_pid = 0;
    atomic_store(&h->meta_len, 0); /* the next image's log: its own MODULE and SITES again */
    if (hello(rec_name) == 0) return 0;
    on = 0;
    return -1;
}
