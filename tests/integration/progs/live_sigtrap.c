/* live_sigtrap.c - the program's own SIGTRAP handler and breakpoints (live_tests.py
 * own_sigtrap).
 *
 * usage: live_sigtrap DIR
 * main installs a SIGTRAP handler that counts deliveries by origin (an int3 instruction:
 * SI_KERNEL; raise(): SI_TKILL), starts two busy threads calling traced functions, creates
 * DIR/ready, then until DIR/stop executes int3 and raise(SIGTRAP) once each round, calls traced
 * functions (t_work() -> t_leaf(), some of them executing int3 themselves) and serves marker
 * requests. Prints "int3: ..." and "raise: ..." (every signal sent handled exactly once, or both
 * counts), "other SIGTRAPs: N" and the wrong results.
 */
#include "live_common.c"

#include <pthread.h>
#include <signal.h>

static atomic_int stop;
static atomic_long by_int3, by_raise, by_other, wrong;
static volatile int vsink;

static void on_trap(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)uc;
    if (si->si_code == SI_KERNEL)
        by_int3++;
    else if (si->si_code == SI_TKILL || si->si_code == SI_USER)
        by_raise++;
    else
        by_other++;
}

NOINLINE int t_leaf(int x)
{
    vsink = x;
    return x * 5;
}
NOINLINE int t_work(int x)
{
    int r = t_leaf(x) + 2;
    KEEP(r);
    return r;
}
/* a traced function with a breakpoint of its own, right after its entry */
NOINLINE int t_trapping(int x)
{
    __asm__ volatile("int3" ::: "memory");
    return t_leaf(x);
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
            if (t_work(k) != 5 * k + 2) wrong++;
        live_spin_us(100);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    live_dir = argv[1];
    struct sigaction sa = {.sa_sigaction = on_trap, .sa_flags = SA_SIGINFO | SA_RESTART};
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTRAP, &sa, NULL) < 0) return 1;
    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, busy, NULL);
    live_touch("ready");
    long int3s = 0, raises = 0;
    while (!live_exists("stop")) {
        __asm__ volatile("int3" ::: "memory");
        int3s++;
        raise(SIGTRAP);
        raises++;
        if (t_trapping(int3s) != 5 * (int)int3s) wrong++;
        int3s++;
        for (int k = 0; k < 20; k++)
            if (t_work(k) != 5 * k + 2) wrong++;
        live_serve_marks(marker);
        live_nap_us(2000);
    }
    stop = 1;
    for (int i = 0; i < 2; i++)
        pthread_join(th[i], NULL);
    live_print_count("int3", int3s, by_int3);
    live_print_count("raise", raises, by_raise);
    printf("other SIGTRAPs: %ld\n", (long)by_other);
    printf("wrong results: %ld\n", (long)wrong);
    return 0;
}
