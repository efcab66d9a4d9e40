/* bgreen: signal handlers that switch stacks, or leave in ways no wrapper sees (issue 28), run
 * by tests/integration/stacks_tests.py. usage: bgreen MODE [N]. Each mode prints a deterministic
 * answer, then its counts: "count FUNC N" (exact, nothing open, nothing said on stderr), or
 * "aside FUNC N" (exact; or, where a handler switched stacks while a tracer hook it interrupted
 * was running, ftrace-run steps aside, says so in one line, and at most N were traced with
 * those open at the end counted).
 *   pre [N]   preemptive green threads: N threads (default 4) on mmap'd stacks and main,
 *             switched by bs_switch (no wrapper sees it) inside the traced SIGALRM handler
 *             g_tick every 50 us, wherever the signal lands (inside the tracer's hooks too).
 *             Each thread runs g_work -> g_mid -> g_leaf x2, 1500 times, then switches to main
 *             for good. More threads than the tracer's list of running handlers holds (32):
 *             each suspended thread keeps one handler running.
 *   leak      20 traced SIGUSR1 handlers that each switch to a fresh stack for good (never
 *             return), then "pre" with 4 threads.
 *   ctx       preemptive green threads switched by rewriting the context in the signal frame
 *             of the traced SA_SIGINFO handler g_ctxtick: it returns in order, and
 *             rt_sigreturn lands in another thread. 4 threads.
 *   altjmp    legit, nothing to step aside from: a traced SIGALRM handler (h_alrm, every 50 us,
 *             1000 times) calls h_work and then h_probe, which touches a PROT_NONE page; the
 *             SIGSEGV handler h_segv runs on a sigaltstack that lies in main's frame (above
 *             everything later) and siglongjmps back into h_probe. Exact counts.
 *   nested    legit: the traced SIGALRM handler h_alrm (1000 times) calls h_inner, which
 *             raises SIGUSR1; its traced handler h_usr1 calls h_work and leaves by
 *             __builtin_longjmp (no wrapper sees it) back into h_inner. Exact counts.
 * In altjmp and nested the handler blocks SIGALRM in the context it returns to after its
 * 1000th run (uc_sigmask), so exactly 1000 run; main meanwhile calls m_spin (traced, not
 * counted) in a loop, so that the ticks land in the tracer's hooks too. */
#define _GNU_SOURCE
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <ucontext.h>
#include <unistd.h>
#include "behave.h"
#include "bswitch.h"

#define CNT(f) static atomic_long n_##f
#define HIT(f) atomic_fetch_add_explicit(&n_##f, 1, memory_order_relaxed)
#define SHOW(f) printf("count %s %ld\n", #f, (long)atomic_load(&n_##f))
#define ASIDE(f) printf("aside %s %ld\n", #f, (long)atomic_load(&n_##f))

#define GMAX 64
#define ITERS 1500
static int n_threads = 4;
static void *g_sp[GMAX + 1]; /* [n_threads]: main */
static volatile int g_cur, g_left, g_finished[GMAX + 1];
static long g_sum[GMAX];
CNT(g_work);
CNT(g_mid);
CNT(g_leaf);
NOINLINE long g_leaf(long x)
{
    HIT(g_leaf);
    volatile long v = x;
    for (int k = 0; k < 50; k++) /* room for the timer to land in the program's own code */
        v = v * 3 + k;
    return v;
}
NOINLINE long g_mid(long x)
{
    HIT(g_mid);
    return g_leaf(x) + g_leaf(x + 1);
}
NOINLINE long g_work(long id, long i)
{
    HIT(g_work);
    return g_mid(id * 100000 + i) & 0xffff;
}
/* round robin over the threads not finished, main included; -1: none other */
NOTRACE static int g_next(void)
{
    int from = g_cur, to = from;
    do
        to = (to + 1) % (n_threads + 1);
    while (g_finished[to] && to != from);
    return to == from ? -1 : to;
}

NOTRACE static void timer(long us)
{
    struct itimerval it = {{0, us}, {0, us}};
    setitimer(ITIMER_REAL, &it, NULL);
}

NOTRACE static void on_signal(int sig, void (*fn)(int, siginfo_t *, void *), int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = fn;
    sa.sa_flags = SA_SIGINFO | flags;
    sigaction(sig, &sa, NULL);
}

NOTRACE static void print_sum(const char *what)
{
    long sum = 0;
    for (int i = 0; i < n_threads; i++)
        sum = sum * 31 + g_sum[i];
    printf("%s: %ld\n", what, sum);
    ASIDE(g_work);
    ASIDE(g_mid);
    ASIDE(g_leaf);
}

/* ---- pre, leak ---- */
NOINLINE void g_tick(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    int from = g_cur, to = g_next();
    if (to < 0) return;
    g_cur = to;
    bs_switch(&g_sp[from], g_sp[to]);
}
NOTRACE static void g_thread(void *arg)
{
    long id = (long)arg;
    sigset_t alrm;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    sigprocmask(SIG_UNBLOCK, &alrm, NULL); /* it starts inside g_tick */
    for (long i = 0; i < ITERS; i++)
        g_sum[id] += g_work(id, i);
    sigprocmask(SIG_BLOCK, &alrm, NULL);
    g_finished[id] = 1;
    g_left--;
    g_cur = n_threads;
    bs_switch(&g_sp[id], g_sp[n_threads]); /* main, suspended in g_tick: never back */
    abort();
}
NOTRACE static void run_pre(const char *what)
{
    g_cur = g_left = n_threads;
    for (long i = 0; i < n_threads; i++)
        g_sp[i] = bs_stack(256 * 1024, g_thread, (void *)i);
    on_signal(SIGALRM, g_tick, SA_RESTART);
    timer(50);
    while (g_left)
        pause();
    timer(0);
    print_sum(what);
}

#define LEAKS 20
static void *leak_dead;
static volatile int leaked;
CNT(g_leak);
NOTRACE static void leak_go_on(void *arg);
NOINLINE void g_leak(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    HIT(g_leak);
    bs_switch(&leak_dead, bs_stack(64 * 1024, leak_go_on, NULL)); /* never back */
}
NOTRACE static void leak_go_on(void *arg)
{
    (void)arg;
    sigset_t usr1;
    sigemptyset(&usr1);
    sigaddset(&usr1, SIGUSR1);
    sigprocmask(SIG_UNBLOCK, &usr1, NULL); /* it starts inside g_leak */
    if (++leaked < LEAKS) raise(SIGUSR1);
    run_pre("leak");
    ASIDE(g_leak); /* (main never returns: the process exits from here) */
    fflush(stdout);
    _exit(0);
}

/* ---- ctx ---- */
struct ctx_thread {
    gregset_t g;
    struct _libc_fpstate fp;
    int started;
};
static struct ctx_thread ctx_th[GMAX + 1];
NOINLINE void g_ctxtick(int sig, siginfo_t *si, void *ucv)
{
    (void)sig, (void)si;
    ucontext_t *uc = ucv;
    int from = g_cur, to = g_next();
    if (to < 0) return;
    struct ctx_thread *f = &ctx_th[from], *t = &ctx_th[to];
    memcpy(f->g, uc->uc_mcontext.gregs, sizeof f->g);
    memcpy(&f->fp, uc->uc_mcontext.fpregs, sizeof f->fp);
    if (!t->started) { /* its first run: this context's flags and FPU state, its own rip, rsp */
        long rip = t->g[REG_RIP], rsp = t->g[REG_RSP], rdi = t->g[REG_RDI];
        memcpy(t->g, uc->uc_mcontext.gregs, sizeof t->g);
        memcpy(&t->fp, uc->uc_mcontext.fpregs, sizeof t->fp);
        t->g[REG_RIP] = rip, t->g[REG_RSP] = rsp, t->g[REG_RDI] = rdi, t->g[REG_RBP] = 0;
        t->started = 1;
    }
    memcpy(uc->uc_mcontext.gregs, t->g, sizeof t->g);
    memcpy(uc->uc_mcontext.fpregs, &t->fp, sizeof t->fp);
    g_cur = to;
}
NOTRACE static void ctx_thread(long id)
{
    for (long i = 0; i < ITERS; i++)
        g_sum[id] += g_work(id, i);
    sigset_t alrm;
    sigemptyset(&alrm);
    sigaddset(&alrm, SIGALRM);
    sigprocmask(SIG_BLOCK, &alrm, NULL);
    g_finished[id] = 1;
    g_left--;
    sigprocmask(SIG_UNBLOCK, &alrm, NULL);
    for (;;) /* until the next tick takes it off for good */
        __asm__ volatile("pause");
}
NOTRACE static void run_ctx(void)
{
    g_cur = g_left = n_threads;
    for (long i = 0; i < n_threads; i++) {
        char *p =
            mmap(NULL, 256 * 1024, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        ctx_th[i].g[REG_RIP] = (long)ctx_thread;
        ctx_th[i].g[REG_RSP] = (long)(p + 256 * 1024 - 8);
        ctx_th[i].g[REG_RDI] = i;
    }
    ctx_th[n_threads].started = 1;
    on_signal(SIGALRM, g_ctxtick, SA_RESTART);
    timer(50);
    while (g_left)
        pause();
    timer(0);
    print_sum("ctx");
}

/* ---- altjmp, nested ---- */
#define TICKS 1000
static volatile int ticks;
static char *guard;
static sigjmp_buf *probe_jb;
static void *inner_jb[5];
CNT(h_alrm);
CNT(h_work);
CNT(h_segv);
CNT(h_probe);
CNT(h_inner);
CNT(h_usr1);
NOINLINE long h_work(long i)
{
    HIT(h_work);
    volatile long v = i;
    for (int k = 0; k < 30; k++)
        v = v * 3 + k;
    return v;
}
NOINLINE void h_segv(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    HIT(h_segv);
    siglongjmp(*probe_jb, 1);
}
NOINLINE int h_probe(char *p)
{
    HIT(h_probe);
    sigjmp_buf jb, *old = probe_jb;
    probe_jb = &jb;
    int ok = 1;
    if (!sigsetjmp(jb, 1))
        *(volatile char *)p = 1;
    else
        ok = 0;
    probe_jb = old;
    return ok;
}
NOINLINE void h_usr1(int sig, siginfo_t *si, void *uc)
{
    (void)sig, (void)si, (void)uc;
    HIT(h_usr1);
    h_work(3);
    __builtin_longjmp(inner_jb, 1);
}
NOINLINE void h_inner(void)
{
    HIT(h_inner);
    if (__builtin_setjmp(inner_jb)) return;
    raise(SIGUSR1);
    __asm__ volatile("" ::: "memory"); /* not a tail call: this frame is the jump's target */
}
static int nested_mode;
NOINLINE void h_alrm(int sig, siginfo_t *si, void *ucv)
{
    (void)sig, (void)si;
    HIT(h_alrm);
    if (++ticks == TICKS) /* no more: blocked where it returns */
        sigaddset(&((ucontext_t *)ucv)->uc_sigmask, SIGALRM);
    h_work(ticks);
    if (nested_mode) {
        h_inner();
        sigset_t usr1; /* h_usr1 was left by a jump: still blocked */
        sigemptyset(&usr1);
        sigaddset(&usr1, SIGUSR1);
        sigprocmask(SIG_UNBLOCK, &usr1, NULL);
    } else {
        h_probe(guard); /* a tail call (-O2): h_probe returns for the handler */
    }
}
NOINLINE long m_spin(long i) /* traced, not counted (as many as the ticks take) */
{
    volatile long v = i;
    return v + 1;
}
NOTRACE static void run_handlers(int nested)
{
    char alt[65536]; /* in main's frame: above the frames of everything later */
    nested_mode = nested;
    if (!nested) {
        stack_t ss = {.ss_sp = alt, .ss_size = sizeof alt};
        sigaltstack(&ss, NULL);
        guard = mmap(NULL, 4096, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        on_signal(SIGSEGV, h_segv, SA_ONSTACK | SA_NODEFER);
    } else {
        on_signal(SIGUSR1, h_usr1, 0);
    }
    on_signal(SIGALRM, h_alrm, SA_RESTART);
    timer(50);
    long s = 0;
    while (ticks < TICKS) /* traced calls: the ticks land in the tracer's hooks too */
        s += m_spin(s & 0xff);
    timer(0);
    if (!nested) {
        stack_t off = {.ss_flags = SS_DISABLE};
        sigaltstack(&off, NULL);
    }
    KEEP(s);
    printf("%s: %d ticks\n", nested ? "nested" : "altjmp", ticks);
    SHOW(h_alrm);
    SHOW(h_work);
    if (nested) {
        SHOW(h_inner);
        SHOW(h_usr1);
    } else {
        SHOW(h_probe);
        SHOW(h_segv);
    }
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (argc > 2) n_threads = atoi(argv[2]);
    if (n_threads < 1 || n_threads > GMAX) n_threads = 4;
    if (!strcmp(mode, "pre")) {
        run_pre("pre");
    } else if (!strcmp(mode, "leak")) {
        on_signal(SIGUSR1, g_leak, 0);
        raise(SIGUSR1); /* never back */
        return 1;
    } else if (!strcmp(mode, "ctx")) {
        run_ctx();
    } else if (!strcmp(mode, "altjmp")) {
        run_handlers(0);
        printf("count main 1\n");
        return 0;
    } else if (!strcmp(mode, "nested")) {
        run_handlers(1);
        printf("count main 1\n");
        return 0;
    } else {
        fprintf(stderr, "usage: bgreen pre [N]|leak|ctx|altjmp|nested\n");
        return 2;
    }
    printf("aside main 1\n");
    return 0;
}
