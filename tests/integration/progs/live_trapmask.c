/* live_trapmask.c - a program started with SIGTRAP blocked, by a parent that blocked it before
 * starting it (live_tests.py trap_mask): it must see its mask as it set it, and a SIGTRAP it
 * blocks must wait, pending, until it unblocks it.
 *
 * usage: live_trapmask DIR
 * main, before anything: is SIGTRAP blocked (it must be); raise(SIGTRAP) with the default
 * action (blocked: pending, nothing happens); then with a handler: unblocking delivers it
 * once; kill() (process-directed), then sigsuspend() with SIGTRAP open; raise() then
 * sigwaitinfo(); a fork child starts with nothing pending. Each step prints what it saw. Then
 * two workers, made while SIGTRAP is blocked (they inherit it), loop until DIR/stop: each checks
 * it has SIGTRAP blocked, calls traced functions, raises SIGTRAP (pending, not handled), and
 * unblocks it (handled exactly once, by its own thread), then blocks it again; main serves
 * marker requests. Prints "workers: every signal sent was handled exactly once" (or both
 * counts) and "wrong results: N" (a step that saw what it must not); DIR/counts says how
 * many times on_trap() and t_work() ran.
 */
#include "live_common.c"

#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>

static atomic_int stop;
static atomic_long handled, wrong, sent_by_workers, handled_by_workers, works;
static __thread long mine; /* handled on this thread */
static volatile int vsink;

NOINLINE int t_leaf(int x)
{
    vsink = x;
    return x * 3;
}
NOINLINE int t_work(int x)
{
    works++;
    int r = t_leaf(x) + 1;
    KEEP(r);
    return r;
}
NOINLINE void h_work(void)
{
    vsink = 7;
}
NOINLINE void marker(int n)
{
    vsink = n;
}

static void on_trap(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)uc;
    if (si->si_code != SI_TKILL && si->si_code != SI_USER) wrong++;
    handled++;
    mine++;
    h_work();
}

static sigset_t trap_set;
static int trap_blocked(void)
{
    sigset_t s;
    pthread_sigmask(SIG_BLOCK, NULL, &s);
    return sigismember(&s, SIGTRAP);
}
static int trap_pending(void)
{
    sigset_t s;
    sigpending(&s);
    return sigismember(&s, SIGTRAP);
}

static void *worker(void *arg)
{
    (void)arg;
    for (int i = 0; !stop; i++) {
        if (!trap_blocked()) wrong++;
        for (int k = 0; k < 20; k++)
            if (t_work(k) != 3 * k + 1) wrong++;
        long before = mine;
        raise(SIGTRAP);
        sent_by_workers++;
        if (mine != before || !trap_pending()) wrong++;
        for (int k = 0; k < 20; k++)
            if (t_work(k) != 3 * k + 1) wrong++;
        pthread_sigmask(SIG_UNBLOCK, &trap_set, NULL);
        if (mine != before + 1) wrong++;
        handled_by_workers += mine - before;
        pthread_sigmask(SIG_BLOCK, &trap_set, NULL);
        live_spin_us(50);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    live_dir = argv[1];
    setvbuf(stdout, NULL, _IOLBF, 0);
    sigemptyset(&trap_set);
    sigaddset(&trap_set, SIGTRAP);
    printf("start: SIGTRAP blocked %d\n", trap_blocked());
    raise(SIGTRAP); /* blocked, default action: pending, nothing else */
    printf("raise: survived, pending %d\n", trap_pending());
    struct sigaction sa = {.sa_sigaction = on_trap, .sa_flags = SA_SIGINFO | SA_RESTART};
    sigemptyset(&sa.sa_mask);
    if (sigaction(SIGTRAP, &sa, NULL) < 0) return 1;
    printf("handler: handled %ld, pending %d\n", (long)handled, trap_pending());
    sigprocmask(SIG_UNBLOCK, &trap_set, NULL);
    printf("unblock: handled %ld, pending %d, blocked %d\n", (long)handled, trap_pending(),
           trap_blocked());
    sigprocmask(SIG_BLOCK, &trap_set, NULL);
    kill(getpid(), SIGTRAP);
    printf("kill: handled %ld, pending %d\n", (long)handled, trap_pending());
    sigset_t open;
    sigprocmask(SIG_BLOCK, NULL, &open);
    sigdelset(&open, SIGTRAP);
    int r = sigsuspend(&open);
    printf("sigsuspend: %d (EINTR %d), handled %ld, pending %d, blocked %d\n", r, errno == EINTR,
           (long)handled, trap_pending(), trap_blocked());
    raise(SIGTRAP);
    siginfo_t si;
    r = sigwaitinfo(&trap_set, &si);
    printf("sigwaitinfo: %d (from here %d), handled %ld, pending %d\n", r, si.si_pid == getpid(),
           (long)handled, trap_pending());
    raise(SIGTRAP);
    fflush(stdout);
    pid_t child = fork();
    if (child == 0) {
        printf("fork child: blocked %d, pending %d\n", trap_blocked(), trap_pending());
        fflush(stdout);
        _exit(0);
    }
    waitpid(child, NULL, 0);
    printf("fork parent: pending %d\n", trap_pending());
    sigprocmask(SIG_UNBLOCK, &trap_set, NULL);
    sigprocmask(SIG_BLOCK, &trap_set, NULL);
    printf("steps: handled %ld\n", (long)handled);

    pthread_t th[2];
    for (int i = 0; i < 2; i++)
        pthread_create(&th[i], NULL, worker, NULL);
    live_touch("ready");
    for (int k = 0; !live_exists("stop"); k = (k + 1) % 20) {
        if (t_work(k) != 3 * k + 1) wrong++;
        if (k == 19) {
            live_serve_marks(marker);
            live_nap_us(2000);
        }
    }
    stop = 1;
    pthread_join(th[0], NULL);
    pthread_join(th[1], NULL);
    live_print_count("workers", sent_by_workers, handled_by_workers);
    char p[4096];
    snprintf(p, sizeof p, "%s/counts", live_dir);
    FILE *f = fopen(p, "w");
    if (f) {
        fprintf(f, "on_trap %ld\nt_work %ld\n", (long)handled, (long)works);
        fclose(f);
    }
    printf("wrong results: %ld\n", (long)wrong);
    return 0;
}
