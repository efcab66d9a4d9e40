/* live_sigblock.c - a library loaded while a thread blocks every signal must still be traced
 * (live_tests.py sigblock_dlopen).
 *
 * usage: live_sigblock DIR LIB
 * A worker blocks every signal (pthread_sigmask SIG_BLOCK, full set; built with
 * -DLIVE_RAW_BLOCK: a raw rt_sigprocmask system call, so SIGTRAP too) and loops until told to
 * stop, calling the traced w_outer() -> w_leaf() and checking the results, with a 1 ms nap now
 * and then (not with -DLIVE_RAW_BLOCK: it never sleeps). Once it is running, main dlopens LIB
 * (liblive_dl.so, instrumented), calls its dl_outer() 5 times, then the executable's
 * after_dlopen(). Prints the library's results and "worker: N wrong results".
 */
#include "live_common.c"

#include <dlfcn.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>

static atomic_int stop;
static atomic_long rounds, wrong;
static volatile int vsink;

NOINLINE int w_leaf(int x)
{
    vsink = x;
    return x + 1;
}
NOINLINE int w_outer(int x)
{
    int r = w_leaf(x) * 2;
    KEEP(r);
    return r;
}
NOINLINE void after_dlopen(void)
{
    vsink = 1;
}

static void *worker(void *arg)
{
    (void)arg;
    sigset_t all;
    sigfillset(&all);
#ifdef LIVE_RAW_BLOCK /* really: not through the C library, SIGTRAP included */
    syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, NULL, 8);
#else
    pthread_sigmask(SIG_BLOCK, &all, NULL);
#endif
    for (int i = 0; !stop; i++) {
        for (int k = 0; k < 10; k++)
            if (w_outer(i + k) != 2 * (i + k + 1)) wrong++;
        live_spin_us(50);
#ifndef LIVE_RAW_BLOCK /* (asleep in a system call, it would run no code for a moment) */
        if (i % 100 == 99) live_nap_us(1000);
#endif
        rounds++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) return 2;
    live_dir = argv[1];
    pthread_t th;
    pthread_create(&th, NULL, worker, NULL);
    while (rounds < 200)
        live_nap_us(1000);
    void *h = dlopen(argv[2], RTLD_NOW);
    int (*outer)(int) = h ? (int (*)(int))dlsym(h, "dl_outer") : NULL;
    if (!outer) {
        printf("dlopen: %s\n", dlerror());
        return 1;
    }
    for (int i = 0; i < 5; i++)
        printf("dl_outer(%d) = %d\n", i, outer(i));
    after_dlopen();
    stop = 1;
    pthread_join(th, NULL);
    printf("worker: %ld wrong results\n", (long)wrong);
    return 0;
}
