/* bstartup: threads present during the tracer's start-up (see libbstartup.c). usage: MODE
 *   sigblock  a thread blocks every signal while the preload starts: the program must run to
 *             completion with unchanged stdout and exit status; the handshake times out and the
 *             tracer says so in one line on stderr and runs the program untraced.
 *             main -> work -> leaf x 10 (not checked: the run is untraced)
 *   blocked   a thread blocked in read() on a pipe and one in nanosleep() during start-up: the
 *             program must see no EINTR. trees: main {main, main;work, main;work;leaf 10};
 *             reader {rd_done}; sleeper {sl_done} (their start routines began before patching).
 * Both print errno as main() finds it: 0 (traced as untraced).
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>
#include "behave.h"

extern volatile int sb_stop, sb_ticks;
extern int bs_pipe[2];
extern volatile int rd_eintr, rd_n, sl_eintr, sl_rc, bs_main_runs;
extern char rd_buf[16];
extern pthread_t bs_threads[2];
extern int bs_nthreads;

static volatile long sink;
NOINLINE long leaf(long x) { sink += x; return x + 1; }
NOINLINE long work(void)
{
    long s = 0;
    for (int i = 0; i < 10; i++)
        s += leaf(i);
    return s;
}

int main(int argc, char **argv)
{
    /* C: errno is 0 at the program's start, whatever a preload's constructor did (compared
     * with the untraced run's) */
    printf("errno at main: %d\n", errno);
    const char *mode = argc > 1 ? argv[1] : "";
    long s = work();
    KEEP(s);
    if (!strcmp(mode, "sigblock")) {
        sb_stop = 1;
        pthread_join(bs_threads[0], NULL);
        printf("sigblock: work %ld, ticked %s\n", s, sb_ticks > 0 ? "yes" : "no");
        return 34;
    }
    if (!strcmp(mode, "blocked")) {
        bs_main_runs = 1;
        if (write(bs_pipe[1], "hello", 5) != 5)
            return 1;
        for (int i = 0; i < bs_nthreads; i++)
            pthread_join(bs_threads[i], NULL);
        printf("blocked: work %ld, read %d '%s' eintr %d, nanosleep rc %d eintr %d\n", s, rd_n,
               rd_buf, rd_eintr, sl_rc, sl_eintr);
        return 35;
    }
    return 2;
}
