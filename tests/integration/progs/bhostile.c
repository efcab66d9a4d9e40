/* bhostile: programs that broke the tracer's own machinery (issue: a guest that never breaks
 * its host). usage: bhostile MODE
 *   firsthook  two workers that only malloc()/free() (glibc's arena lock) get SIGUSR1 again and
 *              again; the handler on_usr1 -> tick is each worker's first traced call, so the
 *              tracer sets the thread up while the interrupted code may hold the allocator's
 *              lock. One worker comes from pthread_create() in main, the other from
 *              libbhostile.so's constructor, which runs before the tracer's own (that one is
 *              set up at its first hook, inside the handler). Trees: main {main,
 *              main;run_firsthook}; each worker {on_usr1 n, on_usr1;tick n}, n > 0.
 *   coro300    300 coroutines (makecontext, heap stacks), each suspended twice inside
 *              co_body -> co_work (which swaps back to main), resumed by main's resume(i), and
 *              finished in a third round. Calls: main 1, run_coro 1, resume 900, co_body 300,
 *              co_work 600; nothing open at the end.
 *   altjmp     10000 times: main -> trigger raises SIGUSR2, whose SA_ONSTACK handler
 *              on_alt -> alt_work siglongjmp()s back into main; then main -> final. Tree: main,
 *              main;trigger, ...;trigger;on_alt, ...;on_alt;alt_work 10000 each, main;final 1.
 *   jmpfill    as jmpprof, 300 times, with a SIGALRM handler that first makes 300 traced calls
 *              (fill3: enough to fill a 4 KiB chunk, which goes to the writer while the hook
 *              the signal interrupted is still marked as running) and sleeps 300 us (the writer
 *              writes the chunk and zeroes it for reuse) before it jumps: the hook's ENTRY or
 *              EXIT, written, must still count as written (no UNWIND missing or doubled).
 *   sigswitch  main resumes a ucontext coroutine 20000 times (sw_ping -> swapcontext; the
 *              coroutine's co_pong swaps back), while a SIGALRM every 50 us runs on_tick ->
 *              tick_work, often in the middle of a switch (whose shadow entries are being
 *              moved): the tree is well formed, sw_ping 20000, co_pong 20000, sw_body 1, and
 *              at most one on_tick (tick_work) per signal.
 *   jmpprof    a SIGPROF every 200 us (with "alarm": a SIGALRM) whose handler on_prof siglongjmp()s
 * out of job -> mid -> leaf (a timeout), 200 times: the signal lands anywhere, in the tracer's
 * hooks too. The tree is well formed (the report finds every exit's call) and made of
 * main;job(;mid(;leaf)) with on_prof below any of them. fillchunk  job2 -> leaf2 in a loop (calls
 * shorter than the case's threshold: taken back at their exits) while a SIGALRM every ms runs
 * on_fill -> slow2 x 130 (1.5 us each: kept), enough records to fill a small chunk inside a
 * take-back, 400 times. The tree is well formed: main;job2(;leaf2)(;on_fill(;slow2)). migrate    a
 * coroutine suspended inside step() on one thread is resumed on the next one (a fiber scheduler's
 * workers), 4 threads in turn: nothing breaks. migback    a coroutine suspended inside mb_f1 on the
 * main thread is resumed on a new thread (mb_f1 returns there, mb_f2 suspends), then back on the
 * main thread: each return lands where the program's own would (stdout: f1 done, f2 done, body
 * done), the tree says mb_f1 1, mb_f2 1, mb_body 1. keydtor    a thread's pthread key destructor
 * (the program's) calls traced code after the start routine: thread tree {kthread 1, kdtor 1,
 * kdtor;kwork 1}; main {main 1}. exit3 an atexit handler registered before main calls exit(3) after
 * main returned 0: the trace says the process exited with status 3.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/time.h>
#include <time.h>
#include <ucontext.h>
#include "behave.h"

static volatile long sink;

/* handler h on SIGALRM (flags: its sa_flags), sent every us microseconds (0: stopped); inlined:
 * not a traced call of its own */
static inline __attribute__((always_inline)) void alarm_every(void (*h)(int), int flags, long us)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = h;
    sa.sa_flags = flags;
    if (us) sigaction(SIGALRM, &sa, NULL);
    struct itimerval it = {{0, us}, {0, us}};
    setitimer(ITIMER_REAL, &it, NULL);
}

/* ---- firsthook ---- */
void lib_worker_start(void); /* libbhostile.so: its constructor started the thread */
pthread_t lib_worker_thread(void);
void lib_worker_stop(void);
void lib_allocate_until(volatile int *stop);
static volatile int stop_main_worker;
static volatile long ticks;

NOINLINE void tick(void)
{
    ticks++;
}
NOINLINE void on_usr1(int sig)
{
    (void)sig;
    tick();
}
NOTRACE static void *main_worker(void *arg)
{
    (void)arg;
    lib_allocate_until(&stop_main_worker);
    return NULL;
}
NOINLINE void run_firsthook(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_usr1;
    sa.sa_flags = SA_RESTART;
    sigaction(SIGUSR1, &sa, NULL);
    pthread_t w;
    pthread_create(&w, NULL, main_worker, NULL);
    struct timespec d = {0, 100 * 1000};
    nanosleep(&d, NULL);
    for (long i = 0; i < scaled(4000); i++) {
        pthread_kill(i & 1 ? w : lib_worker_thread(), SIGUSR1);
        nanosleep(&d, NULL);
    }
    stop_main_worker = 1;
    pthread_join(w, NULL);
    lib_worker_stop();
}

/* ---- coro300 ---- */
#define NCO 300
static ucontext_t main_uc, co_uc[NCO];
NOINLINE void co_work(int i)
{
    swapcontext(&co_uc[i], &main_uc);
    NOTAIL();
}
NOINLINE void co_body(int i)
{
    co_work(i);
    co_work(i);
    sink += i;
}
NOINLINE void resume(int i)
{
    swapcontext(&main_uc, &co_uc[i]);
    NOTAIL();
}
NOINLINE void run_coro(void)
{
    size_t size = 64 * 1024;
    for (int i = 0; i < NCO; i++) {
        getcontext(&co_uc[i]);
        co_uc[i].uc_stack.ss_sp = malloc(size);
        co_uc[i].uc_stack.ss_size = size;
        co_uc[i].uc_link = &main_uc;
        makecontext(&co_uc[i], (void (*)(void))co_body, 1, i);
    }
    for (int round = 0; round < 3; round++)
        for (int i = 0; i < NCO; i++)
            resume(i);
}

/* ---- altjmp ---- */
static sigjmp_buf jb;
NOINLINE void alt_work(void)
{
    sink++;
}
NOINLINE void on_alt(int sig)
{
    (void)sig;
    alt_work();
    siglongjmp(jb, 1);
}
NOINLINE void trigger(void)
{
    raise(SIGUSR2);
    NOTAIL();
}
NOINLINE void final(void)
{
    sink++;
}

/* ---- jmpprof ---- */
static sigjmp_buf prof_jb;
static volatile sig_atomic_t armed;
NOINLINE long leaf(long x)
{
    return x * 7 + 3;
}
NOINLINE long mid(long x)
{
    long s = 0;
    for (int i = 0; i < 10; i++)
        s += leaf(x + i);
    return s;
}
NOINLINE void on_prof(int sig)
{
    (void)sig;
    if (armed) {
        armed = 0;
        siglongjmp(prof_jb, 1);
    }
}
NOINLINE void job(void)
{
    for (long i = 0;; i++)
        sink += mid(i);
}
/* ---- jmpfill ---- */
NOINLINE void fill3(long x)
{
    sink += x;
}
NOINLINE void on_jmpfill(int sig)
{
    (void)sig;
    if (!armed) return;
    for (int i = 0; i < 300; i++) /* 600 records: the interrupted hook's chunk goes ... */
        fill3(i);
    struct timespec ts = {0, 300000}; /* ... and the writer writes it and zeroes it */
    nanosleep(&ts, NULL);
    armed = 0;
    siglongjmp(prof_jb, 1);
}
/* ---- fillchunk ---- */
static volatile sig_atomic_t fills;
NOINLINE void leaf2(long x)
{
    sink += x;
}
static unsigned long long now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1000000000ull + ts.tv_nsec;
}
NOINLINE void slow2(void)
{
    for (unsigned long long end = now_ns() + 1500; now_ns() < end;)
        sink++;
}
NOINLINE void on_fill(int sig)
{
    (void)sig;
    for (int i = 0; i < 130; i++)
        slow2();
    fills++;
}
NOINLINE void job2(int n)
{
    for (long i = 0; fills < n; i++)
        leaf2(i);
}
/* ---- migrate ---- */
static ucontext_t fiber_uc, worker_uc[2];
static __thread int who;
NOINLINE void suspend(void)
{
    swapcontext(&fiber_uc, &worker_uc[who]);
    NOTAIL();
}
NOINLINE long step(long x)
{
    sink += x;
    suspend();
    return x + 1;
}
NOINLINE void fiber(void)
{
    long x = 0;
    for (int i = 0; i < 4; i++)
        x = step(x);
    sink += x;
    swapcontext(&fiber_uc, &worker_uc[who]); /* done: back to the last worker for good */
}
NOINLINE void *worker(void *arg)
{
    who = (int)(long)arg;
    swapcontext(&worker_uc[who], &fiber_uc);
    return NULL;
}
static void run_migrate(void)
{
    getcontext(&fiber_uc);
    fiber_uc.uc_stack.ss_size = 64 * 1024;
    fiber_uc.uc_stack.ss_sp = malloc(64 * 1024);
    makecontext(&fiber_uc, fiber, 0);
    for (int r = 0; r < 5; r++) {
        pthread_t t;
        pthread_create(&t, NULL, worker, (void *)(long)(r & 1));
        pthread_join(t, NULL);
    }
}

/* ---- sigswitch ---- */
static ucontext_t sw_main_uc, sw_co_uc;
static volatile sig_atomic_t sw_ticks, sw_co_calls;
static volatile long sw_pongs;
NOINLINE void tick_work(void)
{
    sink++;
}
NOINLINE void on_tick(int sig)
{
    (void)sig;
    sw_ticks++;
    tick_work();
}
NOINLINE void co_pong(void)
{
    sw_pongs++;
    swapcontext(&sw_co_uc, &sw_main_uc); /* back to main, inside traced frames */
    NOTAIL();
}
NOINLINE void sw_body(void)
{
    for (;;) {
        sw_co_calls++;
        co_pong();
    }
}
NOINLINE void sw_ping(void)
{
    swapcontext(&sw_main_uc, &sw_co_uc);
    NOTAIL();
}
static void run_sigswitch(long rounds)
{
    getcontext(&sw_co_uc);
    sw_co_uc.uc_stack.ss_size = 64 * 1024;
    sw_co_uc.uc_stack.ss_sp = malloc(64 * 1024);
    sw_co_uc.uc_link = NULL;
    makecontext(&sw_co_uc, sw_body, 0);
    alarm_every(on_tick, SA_RESTART, 50);
    for (long i = 0; i < rounds; i++)
        sw_ping();
    alarm_every(on_tick, SA_RESTART, 0);
    printf("sigswitch: %ld pongs, %d body calls\n", (long)sw_pongs, (int)sw_co_calls);
}
/* ---- migback ---- */
static ucontext_t mb_co, *mb_back;
NOINLINE void mb_yield(void)
{
    swapcontext(&mb_co, mb_back);
    NOTAIL();
}
NOINLINE void mb_f1(void)
{
    mb_yield();
    printf("f1 done\n");
}
NOINLINE void mb_f2(void)
{
    mb_yield();
    printf("f2 done\n");
}
NOINLINE void mb_body(void)
{
    mb_f1();
    mb_f2();
    printf("body done\n");
    mb_yield();
}
NOINLINE void mb_resume(void)
{
    ucontext_t here;
    mb_back = &here;
    swapcontext(&here, &mb_co);
    NOTAIL();
}
NOINLINE void *mb_thread(void *a)
{
    mb_resume();
    return a;
}
static void run_migback(void)
{
    getcontext(&mb_co);
    mb_co.uc_stack.ss_size = 64 * 1024;
    mb_co.uc_stack.ss_sp = malloc(64 * 1024);
    makecontext(&mb_co, mb_body, 0);
    mb_resume(); /* body -> f1 -> yield, on the main thread */
    pthread_t t;
    pthread_create(&t, NULL, mb_thread, NULL); /* f1 returns there; f2 -> yield */
    pthread_join(t, NULL);
    mb_resume(); /* back on the main thread: f2 returns, body yields for good */
}

/* ---- keydtor ---- */
static pthread_key_t key;
NOINLINE void kwork(void)
{
    sink++;
}
NOINLINE void kdtor(void *p)
{
    (void)p;
    kwork();
}
NOINLINE void *kthread(void *a)
{
    pthread_setspecific(key, (void *)1);
    return a;
}

/* ---- exit3 ---- */
NOTRACE static void exit3(void)
{
    exit(3);
}
/* glibc gives constructors the program's arguments */
NOTRACE __attribute__((constructor)) static void early(int argc, char **argv, char **envp)
{
    (void)envp;
    if (argc > 1 && !strcmp(argv[1], "exit3")) atexit(exit3);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "firsthook")) {
        run_firsthook();
        printf("firsthook: %s\n", ticks > 0 ? "ticked" : "no ticks");
    } else if (!strcmp(mode, "coro300")) {
        run_coro();
        printf("coro300: %ld\n", (long)sink);
    } else if (!strcmp(mode, "altjmp")) {
        stack_t ss = {.ss_sp = malloc(64 * 1024), .ss_size = 64 * 1024};
        sigaltstack(&ss, NULL);
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_alt;
        sa.sa_flags = SA_ONSTACK;
        sigaction(SIGUSR2, &sa, NULL);
        static volatile int n;
        sigsetjmp(jb, 1);
        if (n < scaled(10000)) {
            n++;
            trigger();
        }
        final();
        printf("altjmp: %ld\n", (long)sink);
    } else if (!strcmp(mode, "jmpprof")) {
        /* "jmpprof alarm": SIGALRM from ITIMER_REAL, which keeps to 200 us (ITIMER_PROF fires
         * at the kernel's tick, 4 ms: 0.8 s and 16 million events for the 200 jumps) */
        int alarm = argc > 2 && !strcmp(argv[2], "alarm");
        struct sigaction sa;
        memset(&sa, 0, sizeof sa);
        sa.sa_handler = on_prof;
        sigaction(alarm ? SIGALRM : SIGPROF, &sa, NULL);
        struct itimerval it = {{0, 200}, {0, 200}}, off = {{0, 0}, {0, 0}};
        setitimer(alarm ? ITIMER_REAL : ITIMER_PROF, &it, NULL);
        int n = 0;
        for (long k = 0; k < scaled(200); k++) {
            if (!sigsetjmp(prof_jb, 1)) {
                armed = 1;
                job();
            } else {
                n++;
            }
        }
        setitimer(alarm ? ITIMER_REAL : ITIMER_PROF, &off, NULL);
        printf("jmpprof: %d jumps\n", n);
    } else if (!strcmp(mode, "jmpfill")) {
        alarm_every(on_jmpfill, 0, 200);
        int n = 0;
        for (long k = 0; k < scaled(300); k++) {
            if (!sigsetjmp(prof_jb, 1)) {
                armed = 1;
                job();
            } else {
                n++;
            }
        }
        alarm_every(on_jmpfill, 0, 0);
        printf("jmpfill: %d jumps\n", n);
    } else if (!strcmp(mode, "sigswitch")) {
        run_sigswitch(argc > 2 ? atol(argv[2]) : scaled(20000));
    } else if (!strcmp(mode, "fillchunk")) {
        alarm_every(on_fill, SA_RESTART, 1000);
        job2(scaled(400));
        alarm_every(on_fill, SA_RESTART, 0);
        printf("fillchunk: done\n");
    } else if (!strcmp(mode, "migrate")) {
        run_migrate();
        printf("migrate: %ld\n", (long)sink);
    } else if (!strcmp(mode, "migback")) {
        run_migback();
    } else if (!strcmp(mode, "keydtor")) {
        pthread_key_create(&key, kdtor);
        pthread_t t;
        pthread_create(&t, NULL, kthread, NULL);
        pthread_join(t, NULL);
        printf("keydtor: %ld\n", (long)sink);
    } else if (!strcmp(mode, "exit3")) {
        printf("exit3\n"); /* the constructor armed exit(3) when run as bhostile exit3 */
    } else {
        fprintf(
            stderr,
            "usage: bhostile "
            "firsthook|coro300|altjmp|jmpprof|jmpfill|sigswitch|fillchunk|migrate|keydtor|exit3\n");
        return 2;
    }
    return 0;
}
