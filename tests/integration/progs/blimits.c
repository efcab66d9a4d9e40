/* blimits: limits of the process. usage: blimits MODE
 *   deep      recursion 100000 levels deep (recurse), in a thread with a 512 MiB stack.
 *             Expectation: no crash, output unchanged; the thread's tree is a chain
 *             deep_thread;recurse;recurse;... (each level once, however deep the tracer went),
 *             nothing left open. main: {main}.
 *   closefds  closes fds 3..1023 (the tracer's included), then writes bl_closefds.txt through a
 *             new fd (likely 3) in 40 rounds, each followed by phase -> leaf x 200 and a 2 ms
 *             sleep (so the tracer flushes meanwhile); the file must hold exactly what was
 *             written. tree: {main 1, main;phase 40, main;phase;leaf 8000}
 *   dup2      dup2()s a file (bl_dup2.txt) over fds 3..20, then in 20 rounds writes one line
 *             to each of those fds, with phase -> leaf x 200 and a 2 ms sleep in between.
 *             tree: {main 1, main;phase 20, main;phase;leaf 4000}
 *   reuse     20000 rounds of: close fds 3..20, dup2() a file over each of them again, write
 *             one byte to each, then phase -> leaf once. A descriptor the tracer opens for a
 *             moment (while the program's numbers are free) takes the lowest free number: the
 *             program's dup2() then replaces it, and the tracer's close() would close the
 *             program's file. Every write must succeed: exit status 104, else 50 + the round's
 *             first failing fd. tree: {main 1, main;phase1 20000, main;phase1;leaf 20000}
 *   ctlreuse  the rounds of reuse (5000), while a child process connects to the tracer's
 *             control socket of this process over and over (as ftrace-ctl PID status does): the
 *             descriptor the tracer's server accepts must never be one the program owns or
 *             takes over meanwhile. Exit status 105, else as reuse. tree: {main 1,
 *             main;phase1 5000, main;phase1;leaf 5000} (the child runs untraced code only)
 *   cancelclose  a thread cancelled inside close() (pthread_cancel before it calls it); then
 *             the tracer's control server is asked for its status once, and the program
 *             closes and dup2()s in 100 rounds of phase1 -> leaf: nothing may hang. Exit 106.
 *             tree: {main 1, main;phase1 100, main;phase1;leaf 100}
 *   sockets   asks the tracer's control server for its status (so that it surely runs and has
 *             served), then counts the sockets among its descriptors (/proc/self/fd): the
 *             tracer's are none of the program's business. Prints "sockets: 0", exit 107.
 *             tree: {main 1, main;phase1 1, main;phase1;leaf 1}
 * The program reads its file back and says whether it is intact; the test checks it too. */
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <signal.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "behave.h"

static volatile long sink;
NOINLINE long recurse(long n)
{
    if (n == 0) return 0;
    long r = recurse(n - 1);
    KEEP(r);
    return r + 1;
}
NOINLINE void *deep_thread(void *arg)
{
    long r = recurse((long)arg);
    KEEP(r);
    return (void *)r;
}

NOINLINE void leaf(void)
{
    sink++;
}
NOINLINE void phase(void)
{
    for (int i = 0; i < 200; i++)
        leaf();
    NOTAIL();
}

NOINLINE void phase1(void)
{
    leaf();
    NOTAIL();
}

NOTRACE static void pause_2ms(void)
{
    struct timespec ts = {0, 2 * 1000000};
    nanosleep(&ts, NULL);
}

/* Reads path back and compares it with want; prints the verdict. */
NOTRACE static void verify(const char *mode, const char *path, const char *want, size_t len)
{
    static char got[1 << 16];
    int fd = open(path, O_RDONLY);
    ssize_t n = fd >= 0 ? read(fd, got, sizeof got) : -1;
    if (fd >= 0) close(fd);
    int ok = n == (ssize_t)len && !memcmp(got, want, len);
    printf("%s: wrote %zu bytes, file %s\n", mode, len, ok ? "intact" : "CORRUPTED");
}

/* Asks the tracer's control server of process pid for its status once, as ftrace-ctl PID
 * status does (untraced code: it records nothing). @return 1 when it answered; 0 when there is
 * no server (an untraced run). */
NOTRACE static int ask_status(pid_t pid)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (xdg && *xdg)
        snprintf(a.sun_path, sizeof a.sun_path, "%s/ftrace-run/%d.sock", xdg, (int)pid);
    else
        snprintf(a.sun_path, sizeof a.sun_path, "/tmp/ftrace-run-%u/%d.sock", (unsigned)geteuid(),
                 (int)pid);
    int s = socket(AF_UNIX, SOCK_STREAM, 0), got = 0;
    if (s >= 0 && connect(s, (struct sockaddr *)&a, sizeof a) == 0) {
        char buf[4096];
        if (write(s, "status\n", 7) == 7)
            while (read(s, buf, sizeof buf) > 0)
                got = 1;
    }
    if (s >= 0) close(s);
    return got;
}
/* ctlreuse: a child that asks for the status of process pid again and again, until killed */
NOTRACE static void client_loop(pid_t pid)
{
    for (;;)
        if (!ask_status(pid)) usleep(1000);
}
NOTRACE static pid_t start_client(pid_t parent)
{
    pid_t p = fork();
    if (p == 0) {
        prctl(PR_SET_PDEATHSIG, SIGKILL); /* whichever way the parent ends */
        if (getppid() != parent) _exit(0);
        client_loop(parent);
    }
    usleep(20000); /* the server is listening by now */
    return p;
}

/* cancelclose: a thread cancelled inside close() (a cancellation point: the unwind leaves the
 * close() wrapper of the tracer from inside, past whatever it meant to do after the call) */
static volatile int cancel_go;
NOTRACE static void *close_cancelled(void *arg)
{
    while (!cancel_go) /* no cancellation point: the cancel waits for close() */
        ;
    close(*(int *)arg);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    static char want[1 << 16];
    size_t len = 0;
    if (!strcmp(mode, "deep")) {
        pthread_attr_t at;
        pthread_attr_init(&at);
        pthread_attr_setstacksize(&at, 512u << 20);
        pthread_t t;
        void *r;
        if (pthread_create(&t, &at, deep_thread, (void *)100000L) != 0) {
            printf("deep: no thread\n");
            return 1;
        }
        pthread_join(t, &r);
        printf("deep: %ld levels\n", (long)r);
        return 101;
    }
    if (!strcmp(mode, "closefds")) {
        for (int fd = 3; fd < 1024; fd++)
            close(fd);
        int fd = open("bl_closefds.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        for (int r = 0; r < 40; r++) {
            char line[64];
            int n =
                snprintf(line, sizeof line, "closefds round %d fd %s\n", r, fd == 3 ? "3" : ">3");
            if (write(fd, line, (size_t)n) != n) break;
            memcpy(want + len, line, (size_t)n);
            len += (size_t)n;
            phase();
            pause_2ms();
        }
        close(fd);
        verify(mode, "bl_closefds.txt", want, len);
        return 102;
    }
    if (!strcmp(mode, "dup2")) {
        int f = open("bl_dup2.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        for (int fd = 3; fd <= 20; fd++)
            if (fd != f) dup2(f, fd);
        if (f > 20) close(f);
        for (int r = 0; r < 20; r++) {
            for (int fd = 3; fd <= 20; fd++) {
                char line[64];
                int n = snprintf(line, sizeof line, "dup2 round %d fd %d\n", r, fd);
                if (write(fd, line, (size_t)n) != n) break;
                memcpy(want + len, line, (size_t)n);
                len += (size_t)n;
            }
            phase();
            pause_2ms();
        }
        for (int fd = 3; fd <= 20; fd++)
            close(fd);
        verify(mode, "bl_dup2.txt", want, len);
        return 103;
    }
    int ctl = !strcmp(mode, "ctlreuse");
    if (!strcmp(mode, "reuse") || ctl) {
        int f = open("bl_reuse.txt", O_WRONLY | O_CREAT | O_TRUNC, 0644);
        int hi = fcntl(f, F_DUPFD_CLOEXEC, 100); /* out of the way of 3..20 */
        close(f);
        pid_t client = ctl ? start_client(getpid()) : -1;
        int rounds = scaled(ctl ? 5000 : 20000);
        for (int r = 0; r < rounds; r++) {
            for (int fd = 3; fd <= 20; fd++)
                close(fd);
            for (int fd = 3; fd <= 20; fd++)
                dup2(hi, fd);
            for (int fd = 3; fd <= 20; fd++)
                if (write(fd, "x", 1) != 1) {
                    printf("reuse: round %d: write to fd %d failed\n", r, fd);
                    return 50 + fd;
                }
            phase1();
        }
        if (client > 0) {
            kill(client, SIGKILL);
            waitpid(client, NULL, 0);
        }
        printf("%s: %d rounds\n", mode, rounds);
        return ctl ? 105 : 104;
    }
    if (!strcmp(mode, "cancelclose")) {
        int fds[2];
        if (pipe(fds) < 0) return 1;
        pthread_t t;
        pthread_create(&t, NULL, close_cancelled, &fds[0]);
        pthread_cancel(t);
        cancel_go = 1;
        void *res;
        pthread_join(t, &res);
        /* the tracer's control server makes a descriptor now (traced runs only), and the
         * program's close() and dup2() go on as before */
        ask_status(getpid());
        for (int r = 0; r < 100; r++) {
            int fd = dup(fds[1]);
            dup2(fds[1], fd);
            close(fd);
            phase1();
        }
        printf("cancelclose: %s, 100 rounds\n", res == PTHREAD_CANCELED ? "cancelled" : "ran");
        return 106;
    }
    if (!strcmp(mode, "sockets")) {
        ask_status(getpid());
        int n = 0;
        for (int fd = 0; fd < 4096; fd++) {
            char link[64], target[256];
            snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
            ssize_t len = readlink(link, target, sizeof target - 1);
            if (len > 0 && !strncmp(target, "socket:", 7)) n++;
        }
        phase1();
        printf("sockets: %d\n", n);
        return 107;
    }
    fprintf(stderr, "usage: blimits deep|closefds|dup2|reuse|ctlreuse|cancelclose|sockets\n");
    return 2;
}
