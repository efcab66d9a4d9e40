/* live_rthandler.c - the program's own handler for SIGRTMIN+7, the tracer's default handshake
 * signal (live_tests.py own_rt_handler).
 *
 * usage: live_rthandler DIR
 * main installs a handler for SIGRTMIN+7 that counts its deliveries, starts two busy threads
 * calling traced functions, creates DIR/ready, then until DIR/stop: sends itself the signal
 * (raise(), sigqueue() to the process, pthread_kill() to a busy thread, in turn), each time
 * waiting until the handler saw it, calls traced functions and serves marker requests. The
 * handler must see exactly the signals the program sent. Prints "SIGRTMIN+7: every signal
 * sent was handled exactly once" (or both counts) and the busy threads' wrong results.
 */
#include "live_common.c"

#include <pthread.h>
#include <signal.h>

static atomic_int stop;
static atomic_long handled, wrong;
static volatile int vsink;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    handled++;
}

NOINLINE int rt_leaf(int x)
{
    vsink = x;
    return x ^ 3;
}
NOINLINE int rt_work(int x)
{
    int r = rt_leaf(x) + 1;
    KEEP(r);
    return r;
}
NOINLINE void marker(int n)
{
    vsink = n;
}

static void *busy(void *arg)
{
    (void)arg;
    for (int i = 0; !stop; i++) {
        for (int k = 0; k < 20; k++)
            if (rt_work(k) != (k ^ 3) + 1) wrong++;
        live_spin_us(100);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    live_dir = argv[1];
    int sig = SIGRTMIN + 7;
    struct sigaction sa = {.sa_sigaction = on_signal, .sa_flags = SA_SIGINFO | SA_RESTART};
    sigemptyset(&sa.sa_mask);
    if (sigaction(sig, &sa, NULL) < 0) return 1;
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, busy, NULL);
    live_touch("ready");
    long sent = 0;
    for (int i = 0; !live_exists("stop"); i++) {
        sent++;
        if (i % 3 == 0)
            raise(sig);
        else if (i % 3 == 1)
            sigqueue(getpid(), sig, (union sigval){.sival_int = i});
        else
            pthread_kill(th[i % 2], sig);
        for (int w = 0; handled < sent && w < 2000; w++) /* up to 2 s */
            live_nap_us(1000);
        for (int k = 0; k < 20; k++)
            if (rt_work(k) != (k ^ 3) + 1) wrong++;
        live_serve_marks(marker);
        live_nap_us(2000);
    }
    stop = 1;
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    live_nap_us(10000); /* a late delivery would still be counted */
    live_print_count("SIGRTMIN+7", sent, handled);
    printf("busy: %ld wrong results\n", (long)wrong);
    return 0;
}
