/* libbstartup: threads that exist before libftrace.so's constructor runs (this library is a
 * DT_NEEDED dependency of bstartup, so its constructor runs first). The constructor reads the
 * program's MODE (glibc passes argc/argv to ELF constructors):
 *   sigblock  a thread that blocks every signal and ticks (sb_tick) until bstartup says stop:
 *             the start-up handshake cannot park it.
 *   blocked   a thread blocked in read() on a pipe, and one in a 400 ms nanosleep(), while the
 *             preload starts; each records whether its call failed with EINTR, then calls one
 *             traced function (rd_done / sl_done) after it returns, once main runs (a
 *             constructor slower than 400 ms, on a loaded host, must not leave sl_done called
 *             before its site is patched).
 * Both block SIGPROF: an untraced -pg run has glibc's profiling timer, which must not be what
 * interrupts them. */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#include "behave.h"

volatile int sb_stop, sb_ticks;
int bs_pipe[2];
volatile int rd_eintr = -1, rd_n = -1, sl_eintr = -1, sl_rc = -1;
volatile int bs_main_runs; /* set by bstartup's main */
char rd_buf[16];
static volatile int rd_ready, sl_ready;
pthread_t bs_threads[2];
int bs_nthreads;

NOINLINE void sb_tick(void) { sb_ticks++; }
NOINLINE void rd_done(int n) { rd_n = n; }
NOINLINE void sl_done(int rc) { sl_rc = rc; }

static void *sigblock_thread(void *arg)
{
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    struct timespec ms = {0, 1000000};
    while (!sb_stop) {
        sb_tick();
        nanosleep(&ms, NULL); /* every signal is blocked: never interrupted */
    }
    return NULL;
}

static void block_sigprof(void)
{
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGPROF);
    pthread_sigmask(SIG_BLOCK, &s, NULL);
}

static void *reader_thread(void *arg)
{
    (void)arg;
    block_sigprof();
    rd_ready = 1;
    ssize_t n = read(bs_pipe[0], rd_buf, sizeof rd_buf - 1);
    rd_eintr = n < 0 && errno == EINTR;
    rd_done((int)n);
    return NULL;
}

static void *sleeper_thread(void *arg)
{
    (void)arg;
    block_sigprof();
    struct timespec ts = {0, 400 * 1000000};
    sl_ready = 1;
    int rc = nanosleep(&ts, NULL);
    sl_eintr = rc < 0 && errno == EINTR;
    struct timespec ms = {0, 1000000};
    while (!bs_main_runs) /* every constructor, the tracer's too, has run */
        nanosleep(&ms, NULL);
    sl_done(rc);
    return NULL;
}

__attribute__((constructor)) static void start(int argc, char **argv, char **envp)
{
    (void)envp;
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "sigblock")) {
        pthread_create(&bs_threads[bs_nthreads++], NULL, sigblock_thread, NULL);
        while (sb_ticks < 3)
            ;
    } else if (!strcmp(mode, "blocked")) {
        if (pipe(bs_pipe) < 0)
            return;
        pthread_create(&bs_threads[bs_nthreads++], NULL, reader_thread, NULL);
        pthread_create(&bs_threads[bs_nthreads++], NULL, sleeper_thread, NULL);
        while (!rd_ready || !sl_ready)
            ;
        struct timespec settle = {0, 30 * 1000000}; /* let both enter their system call */
        nanosleep(&settle, NULL);
    }
}
