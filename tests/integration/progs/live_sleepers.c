/* live_sleepers.c - a server at rest: ftrace-ctl status, off and on must not wake any of its
 * sleeping threads (live_tests.py ctl_sleepers).
 *
 * usage: live_sleepers DIR
 * Two workers wait for main's stop message on a pipe: one in a single epoll_wait, one in a
 * single poll (20 s timeouts). Main creates DIR/ready, sleeps 3 s in a single nanosleep, then
 * writes the stop message. Every thread of the process is asleep in a system call meanwhile.
 * Prints how each call ended: "main: nanosleep slept 3 s", "epoll_wait: woken by the stop",
 * "poll: woken by the stop" when undisturbed; otherwise what happened (EINTR, early, timeout).
 */
#include "live_common.c"

#include <poll.h>
#include <pthread.h>
#include <string.h>
#include <sys/epoll.h>

static int stop_pipe[2];
static atomic_int main_slept; /* main's sleep is over: a wake-up after this is the stop */
static char epoll_end[128], poll_end[128];

HELPER void describe(char *out, const char *call, int n, int e)
{
    if (n < 0)
        snprintf(out, 128, "%s: failed with %s", call, e == EINTR ? "EINTR" : strerror(e));
    else if (n == 0)
        snprintf(out, 128, "%s: timed out", call);
    else if (!main_slept)
        snprintf(out, 128, "%s: woken before main's sleep ended", call);
    else
        snprintf(out, 128, "%s: woken by the stop", call);
}

static void *epoll_worker(void *arg)
{
    (void)arg;
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    epoll_ctl(ep, EPOLL_CTL_ADD, stop_pipe[0], &ev);
    int n = epoll_wait(ep, &ev, 1, 20000);
    describe(epoll_end, "epoll_wait", n, errno);
    return NULL;
}

static void *poll_worker(void *arg)
{
    (void)arg;
    struct pollfd p = {.fd = stop_pipe[0], .events = POLLIN};
    int n = poll(&p, 1, 20000);
    describe(poll_end, "poll", n, errno);
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2 || pipe(stop_pipe) < 0) return 2;
    live_dir = argv[1];
    live_stop_gprof_timer(); /* see live_common.c */
    pthread_t ew, pw;
    pthread_create(&ew, NULL, epoll_worker, NULL);
    pthread_create(&pw, NULL, poll_worker, NULL);
    live_touch("ready");
    struct timespec d = {3, 0}, rem = {0, 0};
    uint64_t t0 = live_now_ns();
    int rc = nanosleep(&d, &rem);
    int e = errno;
    if (rc < 0)
        printf("main: nanosleep failed with %s\n", e == EINTR ? "EINTR" : strerror(e));
    else if (live_early(t0, 3000000000u))
        printf("main: nanosleep returned early\n");
    else
        printf("main: nanosleep slept 3 s\n");
    main_slept = 1;
    if (write(stop_pipe[1], "s", 1) != 1) return 1;
    pthread_join(ew, NULL);
    pthread_join(pw, NULL);
    printf("%s\n%s\n", epoll_end, poll_end);
    return 0;
}
