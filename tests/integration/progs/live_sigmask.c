/* live_sigmask.c - threads that block most signals and run traced code in signal handlers
 * that block every signal (live_tests.py sigmask_handlers).
 *
 * usage: live_sigmask DIR
 * Three workers (main and two threads) each own a signal (SIGUSR1, SIGUSR2, SIGRTMIN+1)
 * handled with sa_mask = every signal, and block every other signal (main with sigprocmask,
 * the threads with pthread_sigmask). A kicker thread (which blocks nothing) sends each worker
 * its signal with pthread_kill, in turn, waiting each time until it was handled. The handler
 * calls traced functions (h_work() -> h_leaf()); the workers call traced w_work() in between,
 * and main serves marker requests. Until DIR/stop; prints for each worker "worker N: every
 * signal sent was handled exactly once" (or both counts), handlers on a wrong thread, wrong
 * results.
 */
#include "live_common.c"

#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>

#define NW 3
static int sigs[NW];
static pid_t tids[NW];
static pthread_t threads[NW];
static atomic_long sent[NW], handled[NW], wrong_thread, wrong;
static atomic_int stop, started;
static volatile int vsink;

NOINLINE int h_leaf(int x)
{
    vsink = x;
    return x + 9;
}
NOINLINE int h_work(int x)
{
    int r = h_leaf(x) * 2;
    KEEP(r);
    return r;
}
NOINLINE int w_work(int x)
{
    vsink = x;
    return x - 4;
}
NOINLINE void marker(int n)
{
    vsink = n;
}

static void on_signal(int sig)
{
    for (int i = 0; i < NW; i++)
        if (sigs[i] == sig) {
            if ((pid_t)syscall(SYS_gettid) != tids[i]) wrong_thread++;
            if (h_work(i) != 2 * (i + 9)) wrong++;
            handled[i]++;
        }
}

/* blocks every signal but worker i's */
HELPER void block_others(int i, int use_sigprocmask)
{
    sigset_t set;
    sigfillset(&set);
    sigdelset(&set, sigs[i]);
    if (use_sigprocmask)
        sigprocmask(SIG_SETMASK, &set, NULL);
    else
        pthread_sigmask(SIG_SETMASK, &set, NULL);
    tids[i] = (pid_t)syscall(SYS_gettid);
    started++;
}

HELPER void work_round(int i)
{
    for (int k = 0; k < 20; k++)
        if (w_work(k + i) != k + i - 4) wrong++;
    live_spin_us(100);
}

static void *worker(void *arg)
{
    int i = (int)(long)arg;
    block_others(i, 0);
    while (!stop)
        work_round(i);
    return NULL;
}

static void *kicker(void *arg)
{
    (void)arg;
    while (started < NW)
        live_nap_us(1000);
    for (int r = 0; !stop; r++) {
        int i = r % NW;
        sent[i]++;
        pthread_kill(threads[i], sigs[i]);
        for (int w = 0; handled[i] < sent[i] && w < 2000; w++) /* up to 2 s */
            live_nap_us(1000);
        live_nap_us(500);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    live_dir = argv[1];
    sigs[0] = SIGUSR1, sigs[1] = SIGUSR2, sigs[2] = SIGRTMIN + 1;
    for (int i = 0; i < NW; i++) {
        struct sigaction sa = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
        sigfillset(&sa.sa_mask);
        sigaction(sigs[i], &sa, NULL);
    }
    threads[0] = pthread_self();
    for (long i = 1; i < NW; i++)
        pthread_create(&threads[i], NULL, worker, (void *)i);
    pthread_t k;
    pthread_create(&k, NULL, kicker, NULL);
    block_others(0, 1);
    while (started < NW)
        live_nap_us(1000);
    live_touch("ready");
    while (!live_exists("stop")) {
        work_round(0);
        live_serve_marks(marker);
    }
    stop = 1;
    pthread_join(k, NULL);
    for (int i = 1; i < NW; i++)
        pthread_join(threads[i], NULL);
    for (int i = 0; i < NW; i++) {
        char what[32];
        snprintf(what, sizeof what, "worker %d", i);
        live_print_count(what, sent[i], handled[i]);
    }
    printf("handlers on a wrong thread: %ld\n", (long)wrong_thread);
    printf("wrong results: %ld\n", (long)wrong);
    return 0;
}
