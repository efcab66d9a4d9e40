/*
 * control.c - the control server: lets ftrace-ctl change what a running process traces.
 *
 * The server is a thread that never traces, blocks every signal, is not counted among the
 * threads that may run patched code (ftr_stw_ignore), and sleeps in poll()/accept() on a Unix
 * stream socket at ftr_ctl_socket_path(), from the start of every traced process (the constructor
 * starts it; in a fork child, the child's writer thread does, once the child has recorded
 * something). ftrace-ctl only connects: no signal is ever sent to the process, since the kernel
 * would hand a process-directed signal to any thread, often one asleep in nanosleep() or
 * epoll_wait(), which would then fail with EINTR. The socket's
 * directory must be ours and closed to everyone else (0700), and every connection's credentials
 * (SO_PEERCRED) must be our effective uid or root.
 *
 * Protocol: one request line (at most 4 KiB, within a few seconds), answered by text lines and
 * a last line "ok" or "error: <message>", then the connection is closed:
 *   status | on | off | filter EXPR | depth N | threshold T | libcall on|off
 * T is a duration with unit ns, us, ms or s; a bare number is in microseconds, like the
 * kernel's tracing_thresh. The settings themselves are settings.c's.
 *
 * Descriptors: the server thread has a descriptor table of its own (unshare(CLONE_FILES)), in
 * which it makes its socket and accepts connections, and from which it closes the copies of
 * the program's descriptors at once. A descriptor is born at the lowest free number of its
 * table: born in the program's, the number could be one the program has just closed and is
 * about to dup2() onto, or close() again (soak run at 4402b35: limit-ctlreuse lost its file).
 * In a table of our own, no number of ours is ever the program's, none is seen in
 * /proc/self/fd, inherited by a fork child or closed by the program's close_range(). Other
 * threads therefore never touch the server's descriptors: stopping it is a generation number
 * it reads at least once a second. The socket file is removed when the image ends
 * (ftr_finish); a fork child starts a server of its own.
 */
#define _GNU_SOURCE
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "forkpage.h"
#include "ftr_env.h"
#include "ftr_patcher.h"
#include "recorder.h"
#include "region.h"
#include "sigguard.h"
#include "tracer.h"
#include "values.h"

#define CTL_LINE_MAX 4096 /* longest request line, newline included */
#define CTL_IO_MS 5000    /* a client has this long to send its request and take the reply */
#define CTL_FD_MIN 512    /* our descriptors sit above the program's (like the trace file's) */
#define CTL_DEPTH_MAX 1000000u

static atomic_int requested FTR_FORK_PAGE; /* a server is to be started (at start, in a child) */
static atomic_int stopping FTR_FORK_PAGE;  /* the image ends: refuse further requests */
/* Each server thread serves while gen holds the generation it was started with; starting and
 * stopping one both bump it. serving: the generation of the current server, 0 for none. */
static atomic_uint gen FTR_FORK_PAGE, serving FTR_FORK_PAGE;
/* A starting server thread says when its socket file exists (1) or will not (2, also: no start
 * under way): until then start_server() and stop_server() wait, so that an image ending at once
 * (an _exit() right after the start, also in another thread) finds the file to remove instead
 * of leaving it behind. */
static atomic_int bind_state FTR_FORK_PAGE = 2;
/* The server thread's own, numbers in its own descriptor table. Per thread: after an exec that
 * failed, a new server may start while the one stopped at the exec still sleeps in poll(). */
static __thread int listen_fd __attribute__((tls_model("initial-exec"))) = -1;
static __thread int conn_fd __attribute__((tls_model("initial-exec"))) = -1;
static pid_t server_pid;  /* the process that bound sock_path */
static char ctl_dir[256]; /* ftr_ctl_dir() as the process started (ftrace-ctl reads environ) */
static char sock_path[sizeof(((struct sockaddr_un *)0)->sun_path)];
/* a request being carried out */
static pthread_mutex_t cmd_lock FTR_FORK_PAGE = PTHREAD_MUTEX_INITIALIZER;
/* Starting a server and ending the image exclude each other: once ftr_finish ran, the writer
 * thread it stops starts no server (a writer started later, after an exec that failed, may). */
static pthread_mutex_t start_lock FTR_FORK_PAGE = PTHREAD_MUTEX_INITIALIZER;
static int finished FTR_FORK_PAGE;
static uint32_t finished_writer;
/* A fork child's server thread is made in the fork handler, while the child is one thread:
 * glibc's pthread_create() calls the program's calloc() and free() (the new thread's TLS
 * vector), which an allocator of the program's own may not expect from another thread while the
 * child's code runs. It waits, parked, until the child's image begins (most children exec or
 * _exit first). park_gen: 0 while it waits, then the generation it serves; park_tid: its thread
 * id, once it is on the handshake's ignored list. */
static atomic_uint park_gen FTR_FORK_PAGE;
static atomic_int park_tid FTR_FORK_PAGE;
static int parked FTR_FORK_PAGE; /* such a thread waits (under start_lock) */
/* It waits in poll(), so that it can take a signal sent to it alone (a thread walker's:
 * ctlsig.c), on an eventfd in the program's table (guarded) that says the image began: written
 * by the recorder (it has it from the child's HELLO) or by the child's writer thread. */
static int park_efd FTR_FORK_PAGE = -1;
static int self_unpark FTR_FORK_PAGE; /* it starts itself (under start_lock) */
/* it could not be made (an errno value): the child has no server */
static int park_err FTR_FORK_PAGE;

void ftr_control_start(void)
{
    atomic_store(&requested, 1);
    ftr_control_poll();
}

static uint64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static int server_current(void)
{
    unsigned s = atomic_load(&serving);
    return s && s == atomic_load(&gen);
}

/* The server's descriptors are closed by the system call: fdguard.c's close() looks numbers up
 * in the program's table, where ours may be the number of one of its own. */
static void close_own(int *var)
{
    if (*var >= 0) syscall(SYS_close, *var);
    *var = -1;
}

/* ---- one connection ---- */

static void wait_conn(short events, uint64_t deadline)
{
    uint64_t now = now_ms();
    int ms = deadline > now ? (int)(deadline - now) : 0;
    struct pollfd p = {.fd = conn_fd, .events = events};
    poll(&p, 1, ms < 200 ? ms : 200);
}

/* Reads one line into buf (CTL_LINE_MAX + 1 bytes), without its newline. A line cut short by
 * the end of the stream counts. @return its length, -1 (nothing, or error, or timeout), or -2
 * (too long). */
static int read_line(char *buf, uint64_t deadline)
{
    size_t len = 0;
    while (now_ms() < deadline) {
        wait_conn(POLLIN, deadline);
        ssize_t n = recv(conn_fd, buf + len, CTL_LINE_MAX - len, MSG_DONTWAIT);
        int e = errno;
        if (n > 0) {
            char *nl = memchr(buf + len, '\n', (size_t)n);
            len += (size_t)n;
            if (nl) {
                *nl = 0;
                return (int)(nl - buf);
            }
            if (len == CTL_LINE_MAX) return -2;
        } else if (n == 0) {
            buf[len] = 0;
            return len ? (int)len : -1;
        } else if (e != EAGAIN && e != EINTR) {
            return -1;
        }
    }
    return -1;
}

static void send_all(const struct ftr_buf *b, uint64_t deadline)
{
    size_t off = 0;
    while (off < b->len && now_ms() < deadline) {
        ssize_t n = send(conn_fd, b->data + off, b->len - off, MSG_DONTWAIT | MSG_NOSIGNAL);
        int e = errno;
        if (n > 0)
            off += (size_t)n;
        else if (n < 0 && e != EAGAIN && e != EINTR)
            return;
        else
            wait_conn(POLLOUT, deadline);
    }
}

static void add_str(struct ftr_buf *out, const char *s)
{
    ftr_buf_append(out, s, strlen(s));
}

/* "error: msg\n", on one line whatever msg holds */
static void add_error(struct ftr_buf *out, const char *msg)
{
    char line[1024];
    int n = snprintf(line, sizeof line, "error: %s", msg);
    if (n < 0) n = 0;
    if (n > (int)sizeof line - 2) n = (int)sizeof line - 2;
    for (int i = 0; i < n; i++)
        if ((unsigned char)line[i] < 0x20 || line[i] == 0x7f) line[i] = ' ';
    line[n++] = '\n';
    ftr_buf_append(out, line, (size_t)n);
}

/* A decimal number in [0, max]. @return 0 or -1 */
static int parse_uint(const char *s, unsigned max, unsigned *v)
{
    if (!*s) return -1;
    unsigned long long x = 0;
    for (; *s; s++) {
        if (*s < '0' || *s > '9') return -1;
        x = x * 10 + (unsigned)(*s - '0');
        if (x > max) return -1;
    }
    *v = (unsigned)x;
    return 0;
}

/* Carries out one request line; the reply goes to out. */
static void dispatch(char *line, struct ftr_buf *out)
{
    char err[1024] = "";
    size_t len = strlen(line);
    while (len && isspace((unsigned char)line[len - 1]))
        line[--len] = 0;
    char *cmd = line;
    while (isspace((unsigned char)*cmd))
        cmd++;
    char *arg = cmd;
    while (*arg && !isspace((unsigned char)*arg))
        arg++;
    if (*arg) {
        *arg++ = 0;
        while (isspace((unsigned char)*arg))
            arg++;
    }

    int rc = -1;
    int no_arg = !strcmp(cmd, "status") || !strcmp(cmd, "on") || !strcmp(cmd, "off");
    pthread_mutex_lock(&cmd_lock);
    if (atomic_load(&stopping)) {
        snprintf(err, sizeof err, "the process is exiting");
    } else if (!*cmd) {
        snprintf(err, sizeof err, "empty request");
    } else if (no_arg && *arg) {
        snprintf(err, sizeof err, "'%s' takes no argument", cmd);
    } else if (!strcmp(cmd, "status")) {
        ftr_status(out);
        rc = 0;
    } else if (!strcmp(cmd, "on") || !strcmp(cmd, "off")) {
        rc = ftr_set_recording(!strcmp(cmd, "on"), err, sizeof err);
    } else if (!strcmp(cmd, "filter")) {
        rc = ftr_set_filter(arg, err, sizeof err); /* empty: trace everything */
    } else if (!strcmp(cmd, "args") || !strcmp(cmd, "retval")) {
        rc = ftr_values_set(!strcmp(cmd, "retval"), arg, err, sizeof err); /* empty: none */
    } else if (!strcmp(cmd, "libcall")) {
        if (strcmp(arg, "on") && strcmp(arg, "off"))
            snprintf(err, sizeof err, "bad libcall '%.64s' (expected on or off)", arg);
        else
            rc = ftr_set_libcall(!strcmp(arg, "on"), err, sizeof err);
    } else if (!strcmp(cmd, "depth")) {
        unsigned d;
        if (parse_uint(arg, CTL_DEPTH_MAX, &d) < 0)
            snprintf(err, sizeof err, "bad depth '%.64s' (expected 0 to %u; 0: no limit)", arg,
                     CTL_DEPTH_MAX);
        else
            rc = ftr_set_depth(d, err, sizeof err);
    } else if (!strcmp(cmd, "threshold")) {
        uint64_t ns;
        if (ftr_parse_duration(arg, &ns) < 0)
            snprintf(err, sizeof err,
                     "bad threshold '%.64s' (expected a duration like 10us, 1.5ms, 2s; a bare "
                     "number is in us)",
                     arg);
        else
            rc = ftr_set_threshold(ns, err, sizeof err);
    } else {
        snprintf(err, sizeof err, "unknown command '%.64s'", cmd);
    }
    pthread_mutex_unlock(&cmd_lock);
    if (rc == 0)
        add_str(out, "ok\n");
    else
        add_error(out, *err ? err : "failed");
}

static void serve(uint64_t deadline)
{
    struct ftr_buf out = {0};
    struct ucred cred;
    socklen_t clen = sizeof cred;
    int rc = getsockopt(conn_fd, SOL_SOCKET, SO_PEERCRED, &cred, &clen);
    if (rc < 0) {
        add_error(&out, "cannot read the peer's credentials");
    } else if (cred.uid != geteuid() && cred.uid != 0) {
        char msg[128];
        snprintf(msg, sizeof msg, "permission denied: uid %u is not the owner", (unsigned)cred.uid);
        add_error(&out, msg);
    } else {
        char line[CTL_LINE_MAX + 1];
        int n = read_line(line, deadline);
        if (n == -2)
            add_error(&out, "request longer than 4096 bytes");
        else if (n == -1)
            add_error(&out, "no request line received");
        else if (memchr(line, 0, (size_t)n))
            add_error(&out, "malformed request (NUL byte)");
        else
            dispatch(line, &out);
    }
    send_all(&out, deadline);
    ftr_buf_free(&out);
    /* Closing with unread input would reset the connection, and the client could lose the
     * reply: say we are done, and read what the client still sends (briefly). */
    shutdown(conn_fd, SHUT_WR);
    uint64_t end = now_ms() + 200;
    char sink[4096];
    for (int n = 0; n < 64 && now_ms() < end; n++) {
        ssize_t r = recv(conn_fd, sink, sizeof sink, MSG_DONTWAIT);
        int e = errno;
        if (r == 0 || (r < 0 && e != EAGAIN && e != EINTR)) break;
        if (r < 0) wait_conn(POLLIN, end);
    }
}

/* ---- the server thread ---- */

/* A listening socket at path (a stale file of a killed process with our pid is replaced), in
 * the server's own table. @return it, or -1 with the reason in why. */
static int bind_socket(const char *path, char *why, size_t len)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof sa.sun_path) {
        snprintf(why, len, "socket path %s is too long", path);
        return -1;
    }
    memcpy(sa.sun_path, path, strlen(path) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
    if (fd < 0) {
        snprintf(why, len, "cannot create a socket: %s", strerror(errno));
        return -1;
    }
    unlink(path);
    if (bind(fd, (struct sockaddr *)&sa, sizeof sa) < 0 || listen(fd, 16) < 0) {
        snprintf(why, len, "cannot listen on %s: %s", path, strerror(errno));
        close_own(&fd);
        return -1;
    }
    return fd;
}

/* Is listen_fd still our listening socket, bound to sock_path? */
static int listening_ours(void)
{
    struct sockaddr_un sa;
    socklen_t len = sizeof sa;
    int acc = 0;
    socklen_t alen = sizeof acc;
    return listen_fd >= 0 && getsockname(listen_fd, (struct sockaddr *)&sa, &len) == 0 &&
           sa.sun_family == AF_UNIX && strcmp(sa.sun_path, sock_path) == 0 &&
           getsockopt(listen_fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &alen) == 0 && acc;
}

/* The socket file is gone while we serve, or our socket is broken: listen on a new socket at
 * the same path. */
static void rebind_if_gone_or_lost(void)
{
    struct stat st;
    if (listen_fd >= 0 && (lstat(sock_path, &st) == 0 || errno != ENOENT)) return;
    char why[600];
    int fd = bind_socket(sock_path, why, sizeof why);
    if (fd < 0) return; /* tried again at the next idle second */
    close_own(&listen_fd);
    listen_fd = fd;
}

/* Makes the calling thread's descriptor table its own, holding only keep (moved above
 * CTL_FD_MIN) and, at 0, 1 and 2, the two ends of a pipe: a message of ours (ftr_msg writes to
 * 2) then fails there, and no connection of ours is ever number 2. The copies of the program's
 * descriptors are closed (kept, a pipe's write end would keep its reader from seeing the end).
 * @return keep's new number, or -1. */
static int own_table(int keep)
{
    int high = (int)syscall(SYS_fcntl, keep, F_DUPFD_CLOEXEC, CTL_FD_MIN);
    if (high < 0) /* RLIMIT_NOFILE at CTL_FD_MIN or below: anywhere past 2 will do */
        high = (int)syscall(SYS_fcntl, keep, F_DUPFD_CLOEXEC, 3);
    if (high < 0) high = keep; /* then keep stays where it is, and the rest goes */
    if (syscall(SYS_close_range, 0u, (unsigned)high - 1, 0u) < 0 ||
        syscall(SYS_close_range, (unsigned)high + 1, ~0u, 0u) < 0) {
        struct rlimit rl; /* before Linux 5.9: one by one */
        unsigned max = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < (1u << 20)
                           ? (unsigned)rl.rlim_cur
                           : 1u << 20;
        for (unsigned fd = 0; fd < max; fd++)
            if ((int)fd != high) syscall(SYS_close, fd);
    }
    if (high < 3) { /* cannot be kept clear of 0-2: closed with the rest */
        syscall(SYS_close, high);
        return -1;
    }
    int p[2];
    if (pipe2(p, O_CLOEXEC) == 0) syscall(SYS_fcntl, p[0], F_DUPFD_CLOEXEC, 0);
    return high;
}

/* Until a thread of ours sets *word (a futex word, 0 until then): microseconds, a second at
 * most on a host that starves it. */
static void wait_set(atomic_int *word)
{
    uint64_t until = now_ms() + 1000;
    for (uint64_t now; !atomic_load(word) && (now = now_ms()) < until;) {
        struct timespec ts = {(time_t)((until - now) / 1000),
                              (long)((until - now) % 1000) * 1000000};
        syscall(SYS_futex, word, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
    }
}

/* Until a starting server has bound its socket or given up (past the second, an image ending
 * at once may leave the socket file behind). */
static void wait_bound(void)
{
    wait_set(&bind_state);
}

static void bound(int state)
{
    atomic_store(&bind_state, state);
    syscall(SYS_futex, &bind_state, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

static void start_server(void);

/* With no writer thread (a recorder writes), the server is the thread of ours that would keep
 * the process alive once every thread of the program has ended (writer.c says what happens
 * then): it looks, each second, then often once the main thread is gone. Through descriptors
 * of its own table, opened as it starts (before main(): a program that chroot()s where there
 * is no /proc never ended). */
static __thread int stat_fd __attribute__((tls_model("initial-exec"))) = -1;
static __thread int task_fd __attribute__((tls_model("initial-exec"))) = -1;

static void watch_open(void)
{
    if (stat_fd < 0) stat_fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    if (task_fd < 0) task_fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
}

static void watch_program(int *leader_gone)
{
    ftr_threads_housekeep(); /* threads that ended without a word, meanwhile */
    /* A main thread that called pthread_exit() has a watcher of its own (ftr_orphan_watch):
     * exit(0) flushes the program's stdio through the program's descriptors, which this
     * thread's table does not have; this one looks only when the watcher cannot, and tells
     * it. After a raw exit system call, glibc runs nothing. */
    int pthread_exited = ftr_main_pthread_exited;
    if (pthread_exited && !ftr_orphan_watch_blind()) return;
    if (stat_fd < 0 || task_fd < 0 || !ftr_program_gone_read(stat_fd, task_fd, leader_gone)) return;
    if (pthread_exited) {
        ftr_orphan_seen_gone();
        return;
    }
    ftr_writer_stop(ftr_end_orphaned());
    ftr_orphan_exit();
}

/* A parked server (a fork child's) waits for the child's image to begin: the writer thread
 * starts it (ftr_control_poll), or, with a recorder, the recorder says so in the region's
 * header (news) and the server starts itself. @return its generation, 0: never (the image
 * ended first) */
static unsigned wait_unparked(void)
{
    struct ftr_region_hdr *h = ftr_region_header();
    unsigned me;
    int sig_fd = ftr_ctlsig_open(1);
    while (!(me = atomic_load(&park_gen))) {
        if (h && atomic_load(&h->news) && ftr_recorder_on()) {
            pthread_mutex_lock(&start_lock);
            if (parked && atomic_load(&requested) && !finished) {
                atomic_store(&requested, 0);
                self_unpark = 1;
                start_server(); /* sets park_gen, and does not wait for us */
                self_unpark = 0;
            }
            me = atomic_load(&park_gen);
            pthread_mutex_unlock(&start_lock);
            break; /* 0: it could not start, or the image ended first */
        }
        struct pollfd p[2] = {
            {.fd = ftr_ctlsig_fd(), .events = POLLIN},
            {.fd = __atomic_load_n(&park_efd, __ATOMIC_RELAXED), .events = POLLIN}};
        if (sig_fd < 0 || p[1].fd < 0) { /* no descriptors: the futexes, as before */
            struct timespec ts = {1, 0};
            if (h && ftr_recorder_on())
                syscall(SYS_futex, &h->news, FUTEX_WAIT, 0, &ts, NULL, 0);
            else
                syscall(SYS_futex, &park_gen, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
            continue;
        }
        int r = poll(p, 2, 1000);
        if (r > 0 && (p[0].revents & POLLIN)) ftr_ctlsig_take();
        if (r == 0) ftr_ctlsig_refresh();
    }
    /* the server goes on in a descriptor table of its own: these stay in the program's */
    ftr_ctlsig_close();
    ftr_control_child_wake_fd(-1);
    return me;
}

static void *server_main(void *arg)
{
    unsigned me = (unsigned)(uintptr_t)arg;
    sigset_t all;
    sigfillset(&all);
    ftr_sigguard_real_sigmask(SIG_SETMASK, &all, NULL);
    ftr_thread_off();
    int tid = (int)syscall(SYS_gettid);
    ftr_stw_ignore(tid);
    if (!me) { /* parked: tell the fork handler it may go on, then wait to be wanted */
        atomic_store(&park_tid, tid);
        syscall(SYS_futex, &park_tid, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        if (!(me = wait_unparked())) return NULL;
    }
    char why[600] = "";
    /* A seccomp filter may kill the process for a system call it did not expect (unshare()
     * first): with one installed, no server (the program's filter was made without us). */
    if (prctl(PR_GET_SECCOMP) != 0)
        snprintf(why, sizeof why, "a seccomp filter is installed");
    else if (syscall(SYS_unshare, CLONE_FILES) < 0)
        snprintf(why, sizeof why, "cannot have a descriptor table of its own: %s", strerror(errno));
    else if ((listen_fd = bind_socket(sock_path, why, sizeof why)) >= 0 && ftr_cfg.verbose)
        ftr_msg("control: listening on %s", sock_path);
    if (listen_fd < 0) {
        ftr_msg("control: %s; not listening for ftrace-ctl", why); /* fd 2 is still stderr */
        atomic_compare_exchange_strong(&serving, &me, 0);
        bound(2);
        return NULL;
    }
    if (atomic_load(&gen) != me) { /* stopped meanwhile: the stopper waits for this */
        unlink(sock_path);
        close_own(&listen_fd);
        bound(2);
        return NULL;
    }
    listen_fd = own_table(listen_fd);
    /* before main() runs (the constructor waits for bound()): it may chroot() */
    int sig_fd = ftr_ctlsig_open(0); /* signals sent to this thread alone (ctlsig.c) */
    watch_open();
    bound(1);
    int failures = 0; /* in a row: past a few, slow down (never spin) */
    int leader_gone = 0;
    /* What is done each second (each 5 ms once the main thread is gone) is done by the clock,
     * not when a wait times out: connections coming more often than that (every new session's
     * recorder looks at every live socket) kept a process whose main thread had exited from
     * ever ending (threads-pokedexit) */
    uint64_t tick = now_ms() + 1000;
    while (atomic_load(&gen) == me && failures < 1000) {
        struct pollfd p[2] = {{.fd = listen_fd, .events = POLLIN},
                              {.fd = sig_fd, .events = POLLIN}};
        uint64_t now = now_ms();
        int ms = tick > now ? (int)(tick - now) : 0;
        int r = listen_fd >= 0 ? poll(p, 2, ms) : (usleep((useconds_t)ms * 1000), 0);
        if (atomic_load(&gen) != me) break;
        if (r > 0 && p[1].revents) ftr_ctlsig_take();
        if (now_ms() >= tick) {
            if (sig_fd >= 0) ftr_ctlsig_refresh();
            if (!ftr_writer_tid) watch_program(&leader_gone);
            rebind_if_gone_or_lost(); /* the socket file removed (by hand, /tmp cleaner) */
            tick = now_ms() + (leader_gone ? 5 : 1000);
        }
        if (r <= 0 || !p[0].revents) continue;
        if ((p[0].revents & (POLLHUP | POLLERR | POLLNVAL)) || !listening_ours()) {
            close_own(&listen_fd); /* broken: listen anew */
            rebind_if_gone_or_lost();
            continue;
        }
        conn_fd = accept4(listen_fd, NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK);
        if (conn_fd < 0) {
            int e = errno;
            if (e != EAGAIN && e != EINTR && e != ECONNABORTED && e != EMFILE && e != ENFILE &&
                e != ENOBUFS && e != ENOMEM)
                break; /* broken */
            if (++failures > 5) {
                struct timespec d = {0, 20 * 1000 * 1000};
                nanosleep(&d, NULL);
            }
            continue;
        }
        failures = 0;
        serve(now_ms() + CTL_IO_MS);
        close_own(&conn_fd);
    }
    /* still the current server (it broke): nobody else will remove the socket file */
    if (atomic_compare_exchange_strong(&serving, &me, 0) && !atomic_load(&stopping))
        unlink(sock_path);
    close_own(&listen_fd);
    ftr_ctlsig_close();
    return NULL; /* the table goes with the thread */
}

static void stop_server(void);

static void start_server(void)
{
    char why[600];
    if (!ctl_dir[0])
        ftr_ctl_dir((unsigned)geteuid(), ctl_dir, sizeof ctl_dir); /* before its ctor */
    if (ftr_ctl_dir_check(ctl_dir, why, sizeof why) < 0) {
        ftr_msg("control: %s; refusing to listen for ftrace-ctl", why);
        return;
    }
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    char path[sizeof ctl_dir + 32];
    snprintf(path, sizeof path, "%s/%d.sock", ctl_dir, (int)ftr_getpid());
    if (strlen(path) >= sizeof sa.sun_path) {
        ftr_msg("control: socket path %s is too long; not listening for ftrace-ctl", path);
        return;
    }
    memcpy(sock_path, path, strlen(path) + 1);
    server_pid = (pid_t)ftr_getpid();
    atomic_store(&stopping, 0);
    unsigned me = atomic_fetch_add(&gen, 1) + 1;
    if (!me) me = atomic_fetch_add(&gen, 1) + 1; /* 0 means none */
    atomic_store(&serving, me);

    pthread_t th;
    atomic_store(&bind_state, 0);
    int rc = park_err;
    if (parked) {
        parked = 0;
        atomic_store(&park_gen, me);
        syscall(SYS_futex, &park_gen, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
        if (self_unpark) return; /* the caller is that thread: it binds next */
        ftr_control_wake_parked();
    } else if (!rc)
        rc = ftr_create_own_thread(&th, 1, server_main, (void *)(uintptr_t)me);
    if (rc) {
        ftr_msg("control: cannot start the server thread: %s", strerror(rc));
        atomic_store(&serving, 0);
        atomic_store(&bind_state, 2);
        return;
    }
    wait_bound();
    if (__atomic_load_n(&finished, __ATOMIC_SEQ_CST)) stop_server(); /* an _exit() meanwhile */
}

void ftr_control_poll(void)
{
    if (!atomic_load_explicit(&requested, memory_order_relaxed) || !ftr_g.ready)
        return; /* a request before the constructor finished waits for it */
    atomic_store(&requested, 0);
    pthread_mutex_lock(&start_lock);
    if (finished && finished_writer == ftr_writer_gen) {
        pthread_mutex_unlock(&start_lock);
        return;
    }
    finished = 0;
    if (!server_current()) start_server();
    pthread_mutex_unlock(&start_lock);
}

/* The image ends: no request is carried out from here on, and the server thread ends within a
 * second (or with the process). */
static void stop_server(void)
{
    atomic_store(&stopping, 1);
    atomic_store(&serving, 0);
    atomic_fetch_add(&gen, 1);
    wait_bound(); /* a server still starting (another thread is in start_server) */
    unlink(sock_path);
}

/* The server is this process's (not a vfork child's on its memory; a getpid() that a sandbox
 * fails, -1, counts as this process: see ftr_own_process()) */
static int server_here(void)
{
    return server_current() && ftr_own_process() && (pid_t)ftr_g.pid == server_pid;
}

void ftr_control_cleanup(void)
{
    pthread_mutex_lock(&start_lock);
    finished = 1;
    finished_writer = ftr_writer_gen;
    if (server_here()) {
        /* let a request being carried out finish (bounded: never hang an exiting process) */
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_sec += 2;
        int locked = pthread_mutex_timedlock(&cmd_lock, &ts) == 0;
        stop_server();
        if (locked) pthread_mutex_unlock(&cmd_lock);
    }
    pthread_mutex_unlock(&start_lock);
}

void ftr_control_cleanup_fast(void)
{
    /* no start_lock (a signal handler's _exit may come here): a start under way in the writer
     * either set serving before this reads it, or reads finished after this sets it */
    finished_writer = ftr_writer_gen;
    __atomic_store_n(&finished, 1, __ATOMIC_SEQ_CST);
    if (server_here()) stop_server(); /* a request being carried out is not waited for */
}

/* A fork child has no server thread, and none of its descriptors (they are in the thread's own
 * table; the socket file stays the parent's). Its own server thread is made here, parked; the
 * child's writer thread wakes it when the child's image begins (ftr_control_poll). */
void ftr_control_child_fork(int park)
{
    atomic_store(&requested, 1);
    pthread_mutex_init(&cmd_lock, NULL);
    pthread_mutex_init(&start_lock, NULL);
    finished = 0;
    atomic_store(&serving, 0);
    atomic_store(&stopping, 0);
    atomic_store(&bind_state, 2);
    atomic_store(&park_gen, 0);
    atomic_store(&park_tid, 0);
    parked = park_err = 0;
    pthread_t th;
    if (!park) {
        ftr_control_child_wake_fd(-1); /* the parent's, if any: not this child's */
        return;
    }
    /* if it cannot, the child's writer says so when the child records, and makes none: it
     * would call the program's allocator while the program runs */
    if ((park_err = ftr_create_own_thread(&th, 1, server_main, NULL)) != 0) return;
    parked = 1;
    wait_set(&park_tid); /* until it is on the handshake's ignored list */
}

int ftr_control_child_wake_fd(int make)
{
    if (make < 0) { /* closed under the guard's lock: the number is ours until then */
        ftr_fd_lock();
        if (park_efd >= 0) syscall(SYS_close, park_efd);
        park_efd = -1;
        ftr_fd_unlock();
        ftr_fd_unprotect(&park_efd);
        return -1;
    }
    if (park_efd < 0 && make) {
        park_efd = ftr_fd_high(eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK));
        if (park_efd >= 0) ftr_fd_protect(&park_efd);
    }
    return park_efd;
}

void ftr_control_wake_parked(void)
{
    uint64_t one = 1;
    ftr_fd_lock(); /* the number stays ours while it is written */
    if (park_efd >= 0 && write(park_efd, &one, sizeof one) < 0) {
    }
    ftr_fd_unlock();
}

__attribute__((constructor)) static void control_init(void)
{
    int e = errno;
    ftr_ctl_dir((unsigned)geteuid(), ctl_dir, sizeof ctl_dir);
    errno = e;
}
