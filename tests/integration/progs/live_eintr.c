/* live_eintr.c - blocking system calls must neither fail with EINTR nor return early because
 * of the tracer, whether it traces from the start or is switched by ftrace-ctl (live_tests.py
 * eintr).
 *
 * usage: live_eintr DIR
 * Threads block over and over, each in one kind of call: nanosleep (main, 2 ms), epoll_wait
 * (3 ms) and poll (4 ms) on pipes nobody writes, read on a pipe a feeder thread writes a byte
 * to every 1 ms, pthread_cond_timedwait (3 ms, never signalled), and sigtimedwait (5 ms, for a
 * signal nobody sends) in a thread that blocks every signal; after each call a thread works
 * for 20 us (without traced calls), as a server handles what it waited for. Two busy threads call
 * traced functions and check their results; busy thread 0 serves the test's marker requests. Every
 * blocking call's result is checked: EINTR is counted, and so is any other return before its
 * timeout (less than 3/4 of it elapsed, CLOCK_MONOTONIC) or with something unexpected.
 * (-pg builds: gcrt1's profiling timer is stopped first, see live_common.c.) Runs until DIR/stop;
 * prints "CALL: E EINTR, R early" for each call and "busy: N wrong results" (all 0 when nothing
 * disturbed the program).
 */
#include "live_common.c"

#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/epoll.h>

enum { T_NANOSLEEP, T_EPOLL, T_POLL, T_READ, T_COND, T_SIGWAIT, NTALLY };
static struct tally {
    const char *name;
    atomic_long eintr, early;
} tally[NTALLY] = {{.name = "nanosleep"},
                   {.name = "epoll_wait"},
                   {.name = "poll"},
                   {.name = "read"},
                   {.name = "pthread_cond_timedwait"},
                   {.name = "sigtimedwait"}};
static atomic_int stop;
static atomic_long wrong;

#define MS 1000000u

/* One call's end: failed with EINTR, or else came back early (or with something unexpected). */
HELPER void count(int which, int eintr, int early)
{
    if (eintr)
        tally[which].eintr++;
    else if (early)
        tally[which].early++;
}

static void *epoll_thread(void *arg)
{
    (void)arg;
    int pfd[2], ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN};
    if (pipe(pfd) < 0 || ep < 0 || epoll_ctl(ep, EPOLL_CTL_ADD, pfd[0], &ev) < 0) return NULL;
    while (!stop) {
        uint64_t t0 = live_now_ns();
        int n = epoll_wait(ep, &ev, 1, 3);
        int e = errno;
        count(T_EPOLL, n < 0 && e == EINTR,
              (n < 0 && e != EINTR) || n > 0 || live_early(t0, 3 * MS));
        live_spin_us(20);
    }
    return NULL;
}

static void *poll_thread(void *arg)
{
    (void)arg;
    int pfd[2];
    if (pipe(pfd) < 0) return NULL;
    while (!stop) {
        struct pollfd p = {.fd = pfd[0], .events = POLLIN};
        uint64_t t0 = live_now_ns();
        int n = poll(&p, 1, 4);
        int e = errno;
        count(T_POLL, n < 0 && e == EINTR,
              (n < 0 && e != EINTR) || n > 0 || live_early(t0, 4 * MS));
        live_spin_us(20);
    }
    return NULL;
}

static int feed[2];

static void *feeder_thread(void *arg)
{
    (void)arg;
    while (!stop) {
        live_nap_us(1000);
        if (write(feed[1], "x", 1) != 1) break;
    }
    ssize_t w = write(feed[1], "q", 1); /* the reader ends at 'q' */
    (void)w;
    return NULL;
}

static void *read_thread(void *arg)
{
    (void)arg;
    for (;;) {
        char c = 0;
        ssize_t n = read(feed[0], &c, 1);
        int e = errno;
        count(T_READ, n < 0 && e == EINTR, n == 0 || (n < 0 && e != EINTR));
        if ((n == 1 && c == 'q') || n == 0) break;
        live_spin_us(20);
    }
    return NULL;
}

static void *cond_thread(void *arg)
{
    (void)arg;
    pthread_mutex_t m = PTHREAD_MUTEX_INITIALIZER;
    pthread_condattr_t ca;
    pthread_cond_t cv;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&cv, &ca);
    while (!stop) {
        uint64_t t0 = live_now_ns(), end = t0 + 3 * MS;
        struct timespec dl = {(time_t)(end / 1000000000u), (long)(end % 1000000000u)};
        pthread_mutex_lock(&m);
        int rc = pthread_cond_timedwait(&cv, &m, &dl);
        pthread_mutex_unlock(&m);
        count(T_COND, rc == EINTR, (rc != EINTR && rc != ETIMEDOUT) || live_early(t0, 3 * MS));
        live_spin_us(20);
    }
    return NULL;
}

static void *sigwait_thread(void *arg)
{
    (void)arg;
    sigset_t all, usr2;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    sigemptyset(&usr2);
    sigaddset(&usr2, SIGUSR2);
    while (!stop) {
        struct timespec ts = {0, 5 * MS};
        uint64_t t0 = live_now_ns();
        int rc = sigtimedwait(&usr2, NULL, &ts);
        int e = errno;
        count(T_SIGWAIT, rc < 0 && e == EINTR,
              rc >= 0 || (rc < 0 && e != EINTR && e != EAGAIN) || live_early(t0, 5 * MS));
        live_spin_us(20);
    }
    return NULL;
}

static volatile int vsink;
NOINLINE int busy_leaf(int x)
{
    vsink = x;
    return x ^ 0x5a;
}
NOINLINE int busy_mid(int x)
{
    int r = busy_leaf(x) + busy_leaf(x + 1);
    KEEP(r);
    return r;
}
NOINLINE void marker(int n)
{
    vsink = n;
}

static void *busy_thread(void *arg)
{
    long id = (long)arg;
    for (int i = 0; !stop; i++) {
        for (int k = 0; k < 20; k++)
            if (busy_mid(i + k) != ((i + k) ^ 0x5a) + ((i + k + 1) ^ 0x5a)) wrong++;
        live_spin_us(100);
        if (id == 0 && i % 16 == 0) live_serve_marks(marker);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    live_dir = argv[1];
    live_stop_gprof_timer();
    if (pipe(feed) < 0) return 1;
    void *(*fns[])(void *) = {epoll_thread, poll_thread,    feeder_thread, read_thread,
                              cond_thread,  sigwait_thread, busy_thread,   busy_thread};
    enum { N = sizeof fns / sizeof fns[0] };
    pthread_t th[N];
    for (long i = 0; i < N; i++)
        pthread_create(&th[i], NULL, fns[i], (void *)(i - (N - 2))); /* busy ids: 0, 1 */
    live_touch("ready");
    while (!live_exists("stop")) {
        struct timespec d = {0, 2 * MS}, rem;
        uint64_t t0 = live_now_ns();
        int rc = nanosleep(&d, &rem);
        int e = errno;
        count(T_NANOSLEEP, rc < 0 && e == EINTR,
              (rc < 0 && e != EINTR) || (rc == 0 && live_early(t0, 2 * MS)));
        live_spin_us(20);
    }
    stop = 1;
    for (int i = 0; i < N; i++)
        pthread_join(th[i], NULL);
    for (int i = 0; i < NTALLY; i++)
        printf("%s: %ld EINTR, %ld early\n", tally[i].name, (long)tally[i].eintr,
               (long)tally[i].early);
    printf("busy: %ld wrong results\n", (long)wrong);
    return 0;
}
