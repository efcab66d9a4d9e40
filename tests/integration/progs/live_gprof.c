/* live_gprof.c - built with plain gcc -pg: gcrt1 arms ITIMER_PROF, whose SIGPROF goes to a
 * thread that runs; ftrace-run must not make it cut a sleeping thread's sleep short
 * (live_tests.py gprof_sleep).
 *
 * usage: live_gprof DIR [MS]
 * A worker burns CPU calling the traced g_work() -> g_leaf() until main is done; main sleeps
 * 3/4 of MS milliseconds (default 2000) in one nanosleep, then 1/4 in one usleep. Prints how
 * each sleep ended ("slept", "EINTR", "early") and the worker's wrong results.
 */
#include "live_common.c"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

static atomic_int stop;
static atomic_long wrong;
static volatile int vsink;

NOINLINE int g_leaf(int x)
{
    vsink = x;
    return x - 1;
}
NOINLINE int g_work(int x)
{
    int r = g_leaf(x) + g_leaf(x + 1);
    KEEP(r);
    return r;
}

static void *burner(void *arg)
{
    (void)arg;
    for (int i = 0; !stop; i++) {
        for (int k = 0; k < 20; k++)
            if (g_work(k) != 2 * k - 1) wrong++;
        live_spin_us(200);
    }
    return NULL;
}

HELPER const char *ended(int rc, int e, uint64_t t0, uint64_t want_ns)
{
    if (rc < 0) return e == EINTR ? "EINTR" : strerror(e);
    return live_early(t0, want_ns) ? "early" : "slept";
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    live_dir = argv[1];
    long ms = argc > 2 ? atol(argv[2]) : 2000;
    if (ms < 4 || ms > 60000) return 2;
    uint64_t nano_ns = (uint64_t)ms * 750000, u_ns = (uint64_t)ms * 250000;
    pthread_t th;
    pthread_create(&th, NULL, burner, NULL);
    live_touch("ready");
    struct timespec d = {nano_ns / 1000000000, nano_ns % 1000000000};
    uint64_t t0 = live_now_ns();
    int rc = nanosleep(&d, NULL);
    printf("nanosleep %g s: %s\n", nano_ns / 1e9, ended(rc, errno, t0, nano_ns));
    t0 = live_now_ns();
    rc = usleep(u_ns / 1000);
    printf("usleep %g s: %s\n", u_ns / 1e9, ended(rc, errno, t0, u_ns));
    stop = 1;
    pthread_join(th, NULL);
    printf("worker: %ld wrong results\n", (long)wrong);
    return 0;
}
