/* bstacks: programs that switch stacks (issue 28), run by tests/integration/stacks_tests.py.
 * usage: bstacks MODE [ARGS]. Each mode computes a deterministic answer and prints it, then one
 * line "count FUNC N" per traced function it ran, from its own (atomic) counters: the traced
 * run must print the same, and ftrace-report --summary must count each FUNC N times, none left
 * open (every traced call returns before the program ends).
 *   migrate       4 pthread workers share a mutex-protected run queue of 64 ucontext coroutines
 *                 (64 KiB heap stacks). A coroutine runs 4 rounds of m_step -> m_inner -> m_leaf
 *                 and yields (swapcontext to the scheduler context of the worker that resumed
 *                 it) inside m_leaf and again inside m_inner; it goes back on the queue and
 *                 whichever worker pops it next resumes it (never the one that ran it last:
 *                 each of its 9 resumes is on another thread than the one before).
 *   fctx N D      hand-written fcontext-style switch (bs_switch, toplevel asm: never
 *                 instrumented) on mmap'd stacks: N coroutines, each suspended inside f_body ->
 *                 f_deep x D -> f_yield, resumed round robin by f_resume, 3 rounds. Run as
 *                 "fctx 200 3" (many coroutines) and "fctx 2 300" (deep recursion).
 *   sjlj          2 coroutines, each entered once through bs_switch and from then on switched
 *                 with setjmp/longjmp only ("if (!setjmp(own)) longjmp(other, 1)"), 50 frames
 *                 of s_deep down, ping-pong 300 rounds each (s_leaf every round).
 *   many N D R    N ucontext coroutines (default 5400) each suspended D (3) frames of m_deep
 *                 deep, R (2) rounds, resumed round robin by m_resume.
 *   clonetls      a thread made by clone(CLONE_VM|CLONE_FS|CLONE_FILES|CLONE_SIGHAND|
 *                 CLONE_THREAD|CLONE_SYSVSEM) without CLONE_SETTLS: it shares its creator's TLS.
 *                 It runs only traced code, raw system calls and a ucontext coroutine of its
 *                 own on a heap stack (ct_child; on the coroutine ct_cwork -> ct_cmid ->
 *                 ct_cleaf) while the creator runs the same computation (ct_work ->
 *                 ct_mid -> ct_leaf); the creator waits for it on the CLONE_CHILD_CLEARTID
 *                 futex. The thread's calls are "maybe" ones: a tracer may step aside from it.
 *   clonemany     70 such threads one after another, each waited for (CLONE_CHILD_CLEARTID),
 *                 then main -> cm_work x100: counted exactly (the threads are "maybe" ones).
 *   btalt         backtrace() from a sigaltstack handler (its stack mmap'ed, above) that
 *                 interrupted a coroutine on a stack in .bss, 3 traced frames deep (bt_co ->
 *                 bt_f -> bt_g raises SIGUSR1): it prints how many frames it saw.
 *   clonevfork    20 rounds of a hand-rolled spawn: main -> vf_spawn clones with
 *                 CLONE_VM|CLONE_VFORK; the child runs vf_child -> vf_leaf on its own small
 *                 stack and exit_group()s (raw syscall); then main -> vf_parent. Besides the
 *                 counts it prints "path P N" lines: the root process's call paths, exactly
 *                 (the child's calls are not the parent's, the parent's tree does not nest
 *                 deeper each round), and "maybe FUNC N" for the child's functions: counted N
 *                 times (in a process of their own) or not at all.
 *   altco         QEMU's sigaltstack coroutines (util/coroutine-sigaltstack.c, rewritten): 8
 *                 coroutines, each made by raising SIGUSR2 with its stack as the alternate
 *                 signal stack; the handler ac_tramp (traced) sigsetjmp()s and returns, and the
 *                 creator siglongjmp()s back into its dead frame, from where it bootstraps the
 *                 coroutine (ac_body -> ac_step -> ac_leaf, yielding through ac_switch inside
 *                 ac_step). ac_tramp's locals are read after the jump: nothing may have
 *                 written below its frame since it returned. 20 rounds, round robin.
 *   sigtrap       handler returns under fire: main raises SIGUSR1 20 000 times (st_usr1 ->
 *                 st_work, traced), while a thread sends it SIGTRAP 300 times, each time
 *                 waiting until the program's SIGTRAP handler (st_trap, traced) has run. A
 *                 SIGTRAP landing on a handler's return, on the tracer's own stack, must still
 *                 reach the program's handler (a lost one hangs: the 30 s timeout). Every
 *                 other time the sender spins instead of sleeping, and sends the next one
 *                 while st_trap is still returning: it must be held, then delivered.
 *   copystk       copied stacks (libco's shared stacks): 3 coroutines run, one at a time, on
 *                 one shared stack; main copies a coroutine's used part out to a buffer of its
 *                 own when it yields and back in before resuming it, so that frames of
 *                 different coroutines (cs_body -> cs_step -> cs_yield, suspended in cs_yield)
 *                 lie at the same addresses. 30 rounds, round robin. A cs_leaf called from a
 *                 slot that a suspended coroutine's copy holds hooked runs untraced
 *                 ("atmost"). */
#define _GNU_SOURCE
#include <execinfo.h>
#include <linux/futex.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include "behave.h"

/* a function's own call counter: HIT(f) at its start, SHOW(f) prints "count f N" */
#define CNT(f) static atomic_long n_##f
#define HIT(f) atomic_fetch_add_explicit(&n_##f, 1, memory_order_relaxed)
#define SHOW(f) printf("count %s %ld\n", #f, (long)atomic_load(&n_##f))
#define MAYBE(f) printf("maybe %s %ld\n", #f, (long)atomic_load(&n_##f)) /* N or 0 traced */

#include "bswitch.h"

CNT(main);

/* ---- migrate ---- */
#define MG_CO 64
#define MG_WORKERS 4
#define MG_ROUNDS 4
struct mco {
    ucontext_t uc, *back; /* back: the scheduler context of the worker running it */
    int id, done, last;   /* last: the worker that ran it last (1..), 0: none yet */
    long val;
};
static struct mco mg_co[MG_CO];
static struct mco *mg_queue[MG_CO];
static int mg_head, mg_len, mg_finished;
static pthread_mutex_t mg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t mg_cond = PTHREAD_COND_INITIALIZER;
CNT(m_worker);
CNT(m_body);
CNT(m_step);
CNT(m_inner);
CNT(m_leaf);

NOTRACE static void mg_yield(struct mco *c)
{
    swapcontext(&c->uc, c->back);
}
NOINLINE long m_leaf(struct mco *c, long r)
{
    HIT(m_leaf);
    long v = c->id * 100 + r;
    mg_yield(c);
    return v;
}
NOINLINE long m_inner(struct mco *c, long r)
{
    HIT(m_inner);
    long v = m_leaf(c, r) * 3;
    mg_yield(c);
    return v + 1;
}
NOINLINE long m_step(struct mco *c, long r)
{
    HIT(m_step);
    long v = m_inner(c, r);
    KEEP(v);
    return v + r;
}
NOINLINE void m_body(struct mco *c)
{
    HIT(m_body);
    for (int r = 0; r < MG_ROUNDS; r++)
        c->val += m_step(c, r);
}
NOTRACE static void mg_entry(int id)
{
    struct mco *c = &mg_co[id];
    m_body(c);
    c->done = 1;
    setcontext(c->back); /* never resumed */
}
NOINLINE void *m_worker(void *arg)
{
    HIT(m_worker);
    ucontext_t sched;
    int me = (int)(long)arg;
    pthread_mutex_lock(&mg_lock);
    for (;;) {
        /* the head, unless this worker ran it last: every resume moves it to another thread */
        while ((!mg_len || mg_queue[mg_head]->last == me) && mg_finished < MG_CO)
            pthread_cond_wait(&mg_cond, &mg_lock);
        if (mg_finished == MG_CO) break;
        struct mco *c = mg_queue[mg_head];
        mg_head = (mg_head + 1) % MG_CO;
        mg_len--;
        pthread_cond_broadcast(&mg_cond); /* a new head */
        pthread_mutex_unlock(&mg_lock);
        c->back = &sched;
        c->last = me;
        swapcontext(&sched, &c->uc);
        pthread_mutex_lock(&mg_lock);
        if (c->done)
            mg_finished++;
        else
            mg_queue[(mg_head + mg_len++) % MG_CO] = c;
        pthread_cond_broadcast(&mg_cond);
    }
    pthread_mutex_unlock(&mg_lock);
    return NULL;
}
NOTRACE static void run_migrate(void)
{
    for (int i = 0; i < MG_CO; i++) {
        struct mco *c = &mg_co[i];
        c->id = i;
        getcontext(&c->uc);
        c->uc.uc_stack.ss_sp = malloc(64 * 1024);
        c->uc.uc_stack.ss_size = 64 * 1024;
        makecontext(&c->uc, (void (*)(void))mg_entry, 1, i);
        mg_queue[mg_len++] = c;
    }
    pthread_t t[MG_WORKERS];
    for (int i = 0; i < MG_WORKERS; i++)
        pthread_create(&t[i], NULL, m_worker, (void *)(long)(i + 1));
    for (int i = 0; i < MG_WORKERS; i++)
        pthread_join(t[i], NULL);
    long sum = 0;
    for (int i = 0; i < MG_CO; i++)
        sum += mg_co[i].val;
    printf("migrate: %ld\n", sum);
    SHOW(m_worker);
    SHOW(m_body);
    SHOW(m_step);
    SHOW(m_inner);
    SHOW(m_leaf);
}

/* ---- fctx ---- */
struct fco {
    void *sp, *back;
    int id, done;
    long val;
};
static int f_depth;
CNT(f_resume);
CNT(f_body);
CNT(f_deep);
CNT(f_yield);

NOINLINE void f_yield(struct fco *c)
{
    HIT(f_yield);
    bs_switch(&c->sp, c->back);
    NOTAIL();
}
NOINLINE long f_deep(struct fco *c, int d, int r)
{
    HIT(f_deep);
    if (d == 1) {
        f_yield(c);
        return c->id * 7 + r;
    }
    long v = f_deep(c, d - 1, r);
    KEEP(v);
    return v + 1;
}
NOINLINE void f_body(struct fco *c)
{
    HIT(f_body);
    for (int r = 0; r < 3; r++)
        c->val += f_deep(c, f_depth, r);
}
NOTRACE static void f_entry(void *arg)
{
    struct fco *c = arg;
    f_body(c);
    c->done = 1;
    bs_switch(&c->sp, c->back); /* never resumed */
}
NOINLINE void f_resume(struct fco *c)
{
    HIT(f_resume);
    bs_switch(&c->back, c->sp);
    NOTAIL();
}
NOTRACE static void run_fctx(int n, int depth)
{
    struct fco *co = calloc(n, sizeof *co);
    f_depth = depth;
    for (int i = 0; i < n; i++) {
        co[i].id = i;
        co[i].sp = bs_stack(256 * 1024, f_entry, &co[i]);
    }
    for (int any = 1; any;) {
        any = 0;
        for (int i = 0; i < n; i++)
            if (!co[i].done) {
                f_resume(&co[i]);
                any = 1;
            }
    }
    long sum = 0;
    for (int i = 0; i < n; i++)
        sum += co[i].val;
    printf("fctx %d %d: %ld\n", n, depth, sum);
    SHOW(f_resume);
    SHOW(f_body);
    SHOW(f_deep);
    SHOW(f_yield);
}

/* ---- sjlj ---- */
#define SJ_DEPTH 50
#define SJ_ROUNDS 300
struct sco {
    jmp_buf jb;
    void *sp;
    struct sco *other;
    int id, done;
    long val;
};
static struct sco sj_co[2];
static jmp_buf sj_main;
CNT(s_run);
CNT(s_deep);
CNT(s_bottom);
CNT(s_leaf);

NOINLINE void s_leaf(struct sco *c, int r)
{
    HIT(s_leaf);
    c->val += c->id * 1000 + r;
}
NOINLINE void s_bottom(struct sco *c)
{
    HIT(s_bottom);
    if (!setjmp(c->jb)) longjmp(sj_main, 1); /* parked: entered once, back to s_run */
    for (volatile int r = 0; r < SJ_ROUNDS; r++) {
        s_leaf(c, r);
        if (!setjmp(c->jb)) {
            if (c->other->done) longjmp(sj_main, 1);
            longjmp(c->other->jb, 1);
        }
    }
}
NOINLINE long s_deep(struct sco *c, int d)
{
    HIT(s_deep);
    if (d == 1) {
        s_bottom(c);
        return 1;
    }
    long v = s_deep(c, d - 1);
    KEEP(v);
    return v + 1;
}
NOTRACE static void s_entry(void *arg)
{
    struct sco *c = arg;
    c->val += s_deep(c, SJ_DEPTH);
    c->done = 1;
    longjmp(sj_main, 1);
}
NOINLINE void s_run(void)
{
    HIT(s_run);
    static void *dummy;
    for (volatile int i = 0; i < 2; i++)
        if (!setjmp(sj_main)) bs_switch(&dummy, sj_co[i].sp);
    for (volatile int i = 0; i < 2; i++)
        while (!sj_co[i].done)
            if (!setjmp(sj_main)) longjmp(sj_co[i].jb, 1);
}
NOTRACE static void run_sjlj(void)
{
    for (int i = 0; i < 2; i++) {
        sj_co[i].id = i;
        sj_co[i].other = &sj_co[1 - i];
        sj_co[i].sp = bs_stack(256 * 1024, s_entry, &sj_co[i]);
    }
    s_run();
    printf("sjlj: %ld %ld\n", sj_co[0].val, sj_co[1].val);
    SHOW(s_run);
    SHOW(s_deep);
    SHOW(s_bottom);
    SHOW(s_leaf);
}

/* ---- many ---- */
struct uco {
    ucontext_t uc;
    int done;
    long val;
};
static struct uco *mn_co;
static ucontext_t mn_main;
static int mn_depth, mn_rounds;
CNT(m_resume);
CNT(m_task);
CNT(m_deep);

NOINLINE long m_deep(struct uco *c, int d, int r)
{
    HIT(m_deep);
    if (d == 1) {
        swapcontext(&c->uc, &mn_main);
        return (c - mn_co) % 97 + r;
    }
    long v = m_deep(c, d - 1, r);
    KEEP(v);
    return v + 1;
}
NOINLINE void m_task(struct uco *c)
{
    HIT(m_task);
    for (int r = 0; r < mn_rounds; r++)
        c->val += m_deep(c, mn_depth, r);
}
NOTRACE static void mn_entry(int i)
{
    m_task(&mn_co[i]);
    mn_co[i].done = 1;
    setcontext(&mn_main); /* never resumed */
}
NOINLINE void m_resume(struct uco *c)
{
    HIT(m_resume);
    swapcontext(&mn_main, &c->uc);
    NOTAIL();
}
NOTRACE static void run_many(int n, int depth, int rounds)
{
    mn_co = calloc(n, sizeof *mn_co);
    mn_depth = depth;
    mn_rounds = rounds;
    for (int i = 0; i < n; i++) {
        getcontext(&mn_co[i].uc);
        mn_co[i].uc.uc_stack.ss_sp = malloc(32 * 1024);
        mn_co[i].uc.uc_stack.ss_size = 32 * 1024;
        makecontext(&mn_co[i].uc, (void (*)(void))mn_entry, 1, i);
    }
    for (int any = 1; any;) {
        any = 0;
        for (int i = 0; i < n; i++)
            if (!mn_co[i].done) {
                m_resume(&mn_co[i]);
                any = 1;
            }
    }
    long sum = 0;
    for (int i = 0; i < n; i++)
        sum += mn_co[i].val;
    printf("many %d %d %d: %ld\n", n, depth, rounds, sum);
    SHOW(m_resume);
    SHOW(m_task);
    SHOW(m_deep);
}

/* ---- clonetls ---- */
#define CT_N scaled(200000)
static volatile int ct_started;
static int ct_alive = 1; /* the CLONE_CHILD_CLEARTID futex: 0 once the thread is gone */
static long ct_res[2];
CNT(ct_child);
CNT(ct_work);
CNT(ct_mid);
CNT(ct_leaf);
CNT(ct_cwork);
CNT(ct_cmid);
CNT(ct_cleaf);

/* The creator's chain, and the same computation as the thread's own chain: a tracer may step
 * aside from a thread that shares its creator's TLS, so its calls are "maybe" ones. */
#define CT_CHAIN(work, mid, leaf)                                                                  \
    NOINLINE long leaf(long x)                                                                     \
    {                                                                                              \
        HIT(leaf);                                                                                 \
        return x * 3 + 1;                                                                          \
    }                                                                                              \
    NOINLINE long mid(long x)                                                                      \
    {                                                                                              \
        HIT(mid);                                                                                  \
        long v = leaf(x);                                                                          \
        KEEP(v);                                                                                   \
        return v ^ x;                                                                              \
    }                                                                                              \
    NOINLINE long work(long seed)                                                                  \
    {                                                                                              \
        HIT(work);                                                                                 \
        long s = seed;                                                                             \
        for (long i = 0; i < CT_N; i++)                                                            \
            s += mid(s + i) & 0xff;                                                                \
        return s;                                                                                  \
    }
CT_CHAIN(ct_work, ct_mid, ct_leaf)
CT_CHAIN(ct_cwork, ct_cmid, ct_cleaf)

/* The thread runs its work on a coroutine of its own (a heap stack the creator made: the
 * thread must not call malloc on its creator's TLS), as a runtime's scheduler would. */
static ucontext_t ct_home, ct_co;
static void *ct_co_stack;
static void ct_co_body(void)
{
    ct_res[1] = ct_cwork(2);
}
NOINLINE int ct_child(void *arg)
{
    HIT(ct_child);
    (void)arg;
    ct_started = 1;
    getcontext(&ct_co);
    ct_co.uc_stack.ss_sp = ct_co_stack;
    ct_co.uc_stack.ss_size = 64 * 1024;
    ct_co.uc_link = &ct_home;
    makecontext(&ct_co, ct_co_body, 0);
    swapcontext(&ct_home, &ct_co);
    return 0; /* glibc's clone() makes the exit system call */
}
NOTRACE static void run_clonetls(void)
{
    size_t size = 256 * 1024;
    char *stk =
        mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    int flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |
                CLONE_CHILD_CLEARTID;
    ct_co_stack = malloc(64 * 1024);
    if (clone(ct_child, stk + size, flags, NULL, NULL, NULL, &ct_alive) < 0) {
        perror("clone");
        exit(2);
    }
    while (!ct_started)
        ;
    ct_res[0] = ct_work(1);
    int v;
    while ((v = __atomic_load_n(&ct_alive, __ATOMIC_ACQUIRE)) != 0)
        syscall(SYS_futex, &ct_alive, FUTEX_WAIT, v, NULL, NULL, 0);
    printf("clonetls: %ld %ld\n", ct_res[0], ct_res[1]);
    SHOW(ct_work);
    SHOW(ct_mid);
    SHOW(ct_leaf);
    MAYBE(ct_child);
    MAYBE(ct_cwork);
    MAYBE(ct_cmid);
    MAYBE(ct_cleaf);
}

/* ---- clonemany: 70 clone() children sharing the creator's TLS, one after another ---- */
CNT(cm_child);
CNT(cm_work);
static int cm_alive;
NOINLINE long cm_work(long x)
{
    HIT(cm_work);
    return x * 5 + 1;
}
NOINLINE int cm_child(void *arg)
{
    HIT(cm_child);
    (void)arg;
    return 0;
}
NOTRACE static void run_clonemany(void)
{
    size_t size = 64 * 1024;
    char *stk =
        mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    int flags = CLONE_VM | CLONE_FS | CLONE_FILES | CLONE_SIGHAND | CLONE_THREAD | CLONE_SYSVSEM |
                CLONE_CHILD_CLEARTID | CLONE_CHILD_SETTID;
    for (int i = 0; i < 70; i++) {
        cm_alive = 1;
        if (clone(cm_child, stk + size, flags, NULL, NULL, NULL, &cm_alive) < 0) {
            perror("clone");
            exit(2);
        }
        int v;
        while ((v = __atomic_load_n(&cm_alive, __ATOMIC_ACQUIRE)) != 0)
            syscall(SYS_futex, &cm_alive, FUTEX_WAIT, v, NULL, NULL, 0);
    }
    long s = 0;
    for (int i = 0; i < 100; i++)
        s += cm_work(i);
    printf("clonemany: %ld\n", s);
    SHOW(cm_work);
    MAYBE(cm_child);
}

/* ---- btalt ---- */
static ucontext_t bt_home, bt_co_ctx;
static char bt_stack[64 * 1024] __attribute__((aligned(16))); /* below the alternate stack */
static int bt_depth;
CNT(bt_handler);
CNT(bt_co);
CNT(bt_f);
CNT(bt_g);
NOINLINE void bt_handler(int sig)
{
    HIT(bt_handler);
    void *frames[64];
    (void)sig;
    bt_depth = backtrace(frames, 64);
}
NOINLINE void bt_g(void)
{
    HIT(bt_g);
    raise(SIGUSR1);
}
NOINLINE void bt_f(void)
{
    HIT(bt_f);
    bt_g();
}
NOINLINE void bt_co(void)
{
    HIT(bt_co);
    bt_f();
}
NOTRACE static void run_btalt(void)
{
    stack_t ss = {.ss_size = 64 * 1024, .ss_flags = 0};
    ss.ss_sp = mmap(NULL, ss.ss_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = bt_handler;
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR1, &sa, NULL);
    getcontext(&bt_co_ctx);
    bt_co_ctx.uc_stack.ss_sp = bt_stack;
    bt_co_ctx.uc_stack.ss_size = sizeof bt_stack;
    bt_co_ctx.uc_link = &bt_home;
    makecontext(&bt_co_ctx, bt_co, 0);
    swapcontext(&bt_home, &bt_co_ctx);
    printf("btalt: backtrace() from the handler saw %d frames\n", bt_depth);
    SHOW(bt_handler);
    SHOW(bt_co);
    SHOW(bt_f);
    SHOW(bt_g);
}

/* ---- clonevfork ---- */
#define VF_ROUNDS 20
static long vf_out;
static char *vf_stack;
CNT(vf_spawn);
CNT(vf_parent);
CNT(vf_child);
CNT(vf_leaf);

__attribute__((noreturn)) static inline void raw_exit_group(long code)
{
    __asm__ volatile("syscall" ::"a"(SYS_exit_group), "D"(code) : "rcx", "r11", "memory");
    __builtin_unreachable();
}
NOINLINE long vf_leaf(long i)
{
    HIT(vf_leaf);
    return i * i;
}
NOINLINE long vf_child(long i)
{
    HIT(vf_child);
    long v = vf_leaf(i);
    KEEP(v);
    return v + 1;
}
NOTRACE static int vf_entry(void *arg)
{
    vf_out = vf_child((long)arg);
    raw_exit_group(0);
}
NOINLINE long vf_spawn(long i)
{
    HIT(vf_spawn);
    int st;
    pid_t pid = clone(vf_entry, vf_stack + 64 * 1024, CLONE_VM | CLONE_VFORK | SIGCHLD, (void *)i);
    if (pid < 0 || waitpid(pid, &st, 0) != pid || st != 0) {
        perror("clone/waitpid");
        exit(2);
    }
    return vf_out;
}
NOINLINE long vf_parent(long v)
{
    HIT(vf_parent);
    return v * 2;
}
NOTRACE static void run_clonevfork(void)
{
    vf_stack = mmap(NULL, 64 * 1024, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    long sum = 0;
    for (long i = 0; i < VF_ROUNDS; i++)
        sum += vf_parent(vf_spawn(i));
    printf("clonevfork: %ld\n", sum);
    SHOW(vf_spawn);
    SHOW(vf_parent);
    printf("maybe vf_child %ld\nmaybe vf_leaf %ld\n", (long)n_vf_child, (long)n_vf_leaf);
    printf("path main 1\npath main;vf_spawn %d\npath main;vf_parent %d\n", VF_ROUNDS, VF_ROUNDS);
}

/* ---- altco ---- */
#define AC_N 8
#define AC_ROUNDS 20
#define AC_STACK (64 * 1024)
struct ac_co {
    sigjmp_buf env;
    long id, sum;
};
static struct ac_co ac_cos[AC_N];
static sigjmp_buf ac_caller, ac_creator, ac_reenter;
static struct ac_co *volatile ac_handoff;
static volatile sig_atomic_t ac_called;
CNT(ac_tramp);
CNT(ac_switch);
CNT(ac_body);
CNT(ac_step);
CNT(ac_leaf);

/* saves this place in from and goes to to; returns (1) when switched back */
NOINLINE int ac_switch(sigjmp_buf from, sigjmp_buf to)
{
    HIT(ac_switch);
    int r = sigsetjmp(from, 0);
    if (!r) siglongjmp(to, 1);
    return r;
}
NOINLINE long ac_leaf(long x)
{
    HIT(ac_leaf);
    return x * 7 + 1;
}
NOINLINE long ac_step(struct ac_co *c, long r)
{
    HIT(ac_step);
    long v = ac_leaf(c->id * 100 + r);
    ac_switch(c->env, ac_caller); /* yields inside a traced call */
    return v + ac_leaf(r);
}
NOINLINE void ac_body(struct ac_co *c)
{
    HIT(ac_body);
    for (long r = 0; r < AC_ROUNDS; r++)
        c->sum += ac_step(c, r);
}
/* The coroutine's first frame: back to the creator, then (first resume) its body; at its end,
 * back to the scheduler for good (its stack is never resumed). */
NOTRACE __attribute__((noreturn)) static void ac_bootstrap(struct ac_co *volatile c)
{
    if (!sigsetjmp(c->env, 0)) siglongjmp(ac_creator, 1);
    ac_body(c);
    siglongjmp(ac_caller, 2);
}
/* The SIGUSR2 handler, on the coroutine's stack: its place taken, it returns; the creator jumps
 * back into it (as QEMU does), and self is read from its frame then. */
NOINLINE void ac_tramp(int sig)
{
    HIT(ac_tramp);
    struct ac_co *volatile self = ac_handoff;
    (void)sig;
    ac_called = 1;
    if (!sigsetjmp(ac_reenter, 0)) return;
    ac_bootstrap(self);
}
NOTRACE static void ac_create(struct ac_co *c, char *stack)
{
    sigset_t block, old, wait;
    sigemptyset(&block);
    sigaddset(&block, SIGUSR2);
    pthread_sigmask(SIG_BLOCK, &block, &old);
    struct sigaction sa, osa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = ac_tramp;
    sigfillset(&sa.sa_mask);
    sa.sa_flags = SA_ONSTACK;
    sigaction(SIGUSR2, &sa, &osa);
    stack_t ss = {.ss_sp = stack, .ss_size = AC_STACK, .ss_flags = 0}, oss;
    sigaltstack(&ss, &oss);
    ac_handoff = c;
    ac_called = 0;
    pthread_kill(pthread_self(), SIGUSR2);
    sigfillset(&wait);
    sigdelset(&wait, SIGUSR2);
    while (!ac_called)
        sigsuspend(&wait);
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, NULL);
    if (!(oss.ss_flags & SS_DISABLE)) sigaltstack(&oss, NULL);
    sigaction(SIGUSR2, &osa, NULL);
    pthread_sigmask(SIG_SETMASK, &old, NULL);
    if (!sigsetjmp(ac_creator, 0)) siglongjmp(ac_reenter, 1); /* into the handler's frame */
}
NOTRACE static void run_altco(void)
{
    int done[AC_N] = {0}, left = AC_N;
    for (int i = 0; i < AC_N; i++) {
        ac_cos[i].id = i;
        char *st = mmap(NULL, AC_STACK, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
        if (st == MAP_FAILED) {
            perror("mmap");
            exit(2);
        }
        ac_create(&ac_cos[i], st);
    }
    while (left)
        for (int i = 0; i < AC_N; i++)
            if (!done[i] && ac_switch(ac_caller, ac_cos[i].env) == 2) {
                done[i] = 1;
                left--;
            }
    long sum = 0;
    for (int i = 0; i < AC_N; i++)
        sum = sum * 31 + ac_cos[i].sum;
    printf("altco: %ld\n", sum);
    SHOW(ac_tramp);
    SHOW(ac_switch);
    SHOW(ac_body);
    SHOW(ac_step);
    SHOW(ac_leaf);
}

/* ---- sigtrap ---- */
#define ST_RAISES scaled(20000)
#define ST_TRAPS 300
static atomic_int st_acks;
static pthread_t st_main;
CNT(st_usr1);
CNT(st_work);
CNT(st_trap);
NOINLINE void st_work(int sig)
{
    HIT(st_work);
    KEEP(sig);
}
NOINLINE void st_usr1(int sig)
{
    HIT(st_usr1);
    st_work(sig);
}
NOINLINE void st_trap(int sig)
{
    HIT(st_trap);
    (void)sig;
    atomic_fetch_add(&st_acks, 1);
}
NOTRACE static void *st_sender(void *arg)
{
    (void)arg;
    for (int i = 0; i < ST_TRAPS; i++) {
        pthread_kill(st_main, SIGTRAP);
        while (atomic_load(&st_acks) <= i) {
            struct timespec ts = {0, 20000};
            if (i & 1)
                sched_yield();
            else
                nanosleep(&ts, NULL);
        }
    }
    return NULL;
}
NOTRACE static void run_sigtrap(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = st_usr1;
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = st_trap;
    sigaction(SIGTRAP, &sa, NULL);
    st_main = pthread_self();
    pthread_t th;
    pthread_create(&th, NULL, st_sender, NULL);
    for (int i = 0; i < ST_RAISES; i++)
        raise(SIGUSR1);
    pthread_join(th, NULL);
    printf("sigtrap: %d acks\n", atomic_load(&st_acks));
    SHOW(st_usr1);
    SHOW(st_work);
    SHOW(st_trap);
}

/* ---- copystk ---- */
#define CS_N 3
#define CS_ROUNDS 30
#define CS_STACK (64 * 1024)
static char *cs_shared; /* the shared stack: [cs_shared, cs_shared + CS_STACK) */
static void *cs_sp[CS_N], *cs_main_sp;
static char *cs_saved[CS_N];
static size_t cs_saved_n[CS_N];
static int cs_cur;
static long cs_sum[CS_N];
CNT(cs_body);
CNT(cs_step);
CNT(cs_yield);
CNT(cs_leaf);
NOINLINE long cs_leaf(long x)
{
    HIT(cs_leaf);
    return x * 5 + 3;
}
NOINLINE void cs_yield(void)
{
    HIT(cs_yield);
    bs_switch(&cs_sp[cs_cur], cs_main_sp);
}
NOINLINE long cs_step(long id, long r)
{
    HIT(cs_step);
    long v = cs_leaf(id * 1000 + r); /* different values in each coroutine's frame */
    cs_yield();
    return v + cs_leaf(r);
}
NOINLINE void cs_body(long id)
{
    HIT(cs_body);
    for (long r = 0; r < CS_ROUNDS; r++)
        cs_sum[id] += cs_step(id, r);
}
NOTRACE static void cs_entry(void *arg)
{
    cs_body((long)arg);
    bs_switch(&cs_sp[(long)arg], cs_main_sp); /* done: never resumed */
}
NOTRACE static void run_copystk(void)
{
    cs_shared = mmap(NULL, CS_STACK, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    char *top = cs_shared + CS_STACK;
    for (long i = 0; i < CS_N; i++) { /* each starts as bs_stack() would start it */
        void *init[8] = {0, 0, (void *)cs_entry, (void *)i, 0, 0, (void *)bs_trampoline, 0};
        cs_saved_n[i] = sizeof init;
        cs_saved[i] = malloc(CS_STACK);
        memcpy(cs_saved[i], init, sizeof init);
        cs_sp[i] = top - sizeof init;
    }
    for (int r = 0; r <= CS_ROUNDS; r++)
        for (int i = 0; i < CS_N; i++) {
            cs_cur = i;
            memcpy(cs_sp[i], cs_saved[i], cs_saved_n[i]); /* in */
            bs_switch(&cs_main_sp, cs_sp[i]);
            cs_saved_n[i] = (size_t)(top - (char *)cs_sp[i]); /* out */
            memcpy(cs_saved[i], cs_sp[i], cs_saved_n[i]);
        }
    long sum = 0;
    for (int i = 0; i < CS_N; i++)
        sum = sum * 31 + cs_sum[i];
    printf("copystk: %ld\n", sum);
    SHOW(cs_body);
    SHOW(cs_step);
    SHOW(cs_yield);
    /* a call from a slot that a suspended coroutine's copy holds hooked runs untraced */
    printf("atmost cs_leaf %ld\n", (long)atomic_load(&n_cs_leaf));
}

int main(int argc, char **argv)
{
    HIT(main);
    const char *mode = argc > 1 ? argv[1] : "";
    int a = argc > 2 ? atoi(argv[2]) : 0, b = argc > 3 ? atoi(argv[3]) : 0;
    if (!strcmp(mode, "migrate")) {
        run_migrate();
    } else if (!strcmp(mode, "fctx") && a > 0 && b > 0) {
        run_fctx(a, b);
    } else if (!strcmp(mode, "sjlj")) {
        run_sjlj();
    } else if (!strcmp(mode, "many")) {
        run_many(a > 0 ? a : 5400, b > 0 ? b : 3, argc > 4 ? atoi(argv[4]) : 2);
    } else if (!strcmp(mode, "clonetls")) {
        run_clonetls();
    } else if (!strcmp(mode, "clonevfork")) {
        run_clonevfork();
    } else if (!strcmp(mode, "clonemany")) {
        run_clonemany();
    } else if (!strcmp(mode, "btalt")) {
        run_btalt();
    } else if (!strcmp(mode, "altco")) {
        run_altco();
    } else if (!strcmp(mode, "sigtrap")) {
        run_sigtrap();
    } else if (!strcmp(mode, "copystk")) {
        run_copystk();
    } else {
        fprintf(stderr, "usage: bstacks migrate|fctx N D|sjlj|many [N D "
                        "R]|clonetls|clonemany|clonevfork|btalt|altco|sigtrap|copystk\n");
        return 2;
    }
    SHOW(main);
    return 0;
}
