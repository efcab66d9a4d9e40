/* bsignals: signal handlers that run traced code. usage: bsignals MODE
 *   usr1       a helper thread (kicker) sends SIGUSR1 to main 20 times, one at a time, while
 *              main is in m_usr1 -> loop() calling spin_fn(); each delivery runs
 *              handler -> handler_work once. A handler nests under whatever traced function was
 *              interrupted, so the check is: main's tree is main;m_usr1;loop(;spin_fn) plus
 *              exactly 20 handler -> handler_work subtrees somewhere below; kicker: {kicker}.
 *   alarm      the same from m_alarm with setitimer(ITIMER_REAL, 1 ms) and SIGALRM, no other
 *              thread; handler_work runs for the first 20 deliveries only (a late tick may add
 *              a handler frame without handler_work).
 *   altstack   SA_ONSTACK handler on_alt -> handler_work, raised 3 times from deep(): in main
 *              (alternate stack mmap'd, below the main stack), then in a thread whose alternate
 *              stack lies just above its own stack. trees:
 *                main   {main, main;m_altstack, main;m_altstack;run_alt, ...;run_alt;deep 3,
 *                        ...;deep;on_alt 3, ...;on_alt;handler_work 3, ...;run_alt;after 1}
 *                thread {alt_thread, alt_thread;run_alt, ... the same below run_alt}
 *   siglongjmp 3 times: main -> level1 -> level2 -> raise -> jump_handler -> handler_work, then
 *              siglongjmp back into main, which calls after_jump (depth 1). Nothing stays open.
 *   segv       2 times: main -> fault1 -> bad_access faults; segv_handler -> handler_work, then
 *              siglongjmp to main, which prints "recovered" and calls after_jump (depth 1).
 *   smallalt   a thread whose start routine is not traced sets a small sigaltstack
 *              (_SC_MINSIGSTKSZ + 1 KiB, a guard page below) and raises SIGUSR1; the handler's
 *              small_work -> handler_work x 5 is the thread's first traced call, so the
 *              tracer's set-up of the thread runs there, on that small stack.
 *              trees: main {main}; thread {small_work, small_work;handler_work 5}
 *   heldexit   HELD_CHILDREN fork children, one after the other; each runs child_run, calling
 *              spin_fn while SIGALRM comes every 20 us (setitimer); the first 5 deliveries
 *              run burst -> handler_work x 300 (602 records: more than a 4 KiB chunk holds,
 *              FTRACE_BUFSIZE=4), so the chunk switches inside the handler, often while a
 *              record of the interrupted hook is still being written (that chunk is held until
 *              it is). Then the child exits at once: its last chunks must all be written.
 *              trees: parent {main, main;m_heldexit}; each child: below main;m_heldexit (which
 *              it inherited) child_run -> spin_fn, and >= 5 burst frames (below child_run or
 *              spin_fn) with exactly 1500 handler_work below them.
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/time.h>
#include <sys/wait.h>
#include <unistd.h>
#include "behave.h"

static volatile long sink;
static volatile sig_atomic_t delivered, worked;
NOINLINE void handler_work(void)
{
    sink++;
    worked++;
}
NOINLINE long spin_fn(long x)
{
    sink += x;
    return x + 1;
}
NOINLINE long loop(void)
{
    long x = 0;
    while (delivered < 20)
        x = spin_fn(x);
    return x;
}

NOTRACE static void set_handler_flags(int sig, void (*fn)(int), int flags)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = fn;
    sa.sa_flags = flags;
    sigaction(sig, &sa, NULL);
}
#define set_handler(sig, fn) set_handler_flags(sig, fn, 0)

/* ---- usr1 / alarm ---- */
NOINLINE void handler(int sig)
{
    (void)sig;
    if (worked < 20) handler_work();
    delivered++;
}
static pthread_t main_thread;
NOINLINE void *kicker(void *arg)
{
    (void)arg;
    for (int i = 0; i < 20; i++) {
        pthread_kill(main_thread, SIGUSR1);
        while (delivered <= i) /* one at a time: no two deliveries merge */
            sched_yield();
    }
    return NULL;
}

NOINLINE int m_usr1(void)
{
    set_handler_flags(SIGUSR1, handler, SA_RESTART);
    main_thread = pthread_self();
    pthread_t t;
    pthread_create(&t, NULL, kicker, NULL);
    long x = loop();
    KEEP(x);
    pthread_join(t, NULL);
    printf("usr1: %d deliveries, %d handled\n", (int)delivered, (int)worked);
    return 41;
}

NOINLINE int m_alarm(void)
{
    set_handler_flags(SIGALRM, handler, SA_RESTART);
    struct itimerval it = {{0, 1000}, {0, 1000}};
    setitimer(ITIMER_REAL, &it, NULL);
    long x = loop();
    KEEP(x);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    printf("alarm: %s deliveries, %d handled\n", delivered >= 20 ? ">=20" : "<20", (int)worked);
    return 42;
}

/* ---- altstack ---- */
static __thread char *alt_lo, *alt_hi;
static volatile int on_alt_stack;
NOINLINE void on_alt(int sig)
{
    (void)sig;
    char here;
    if (&here >= alt_lo && &here < alt_hi) on_alt_stack++;
    handler_work();
    NOTAIL();
}
NOINLINE void deep(void)
{
    raise(SIGUSR1);
    NOTAIL();
}
NOINLINE void after(void)
{
    sink++;
}
NOINLINE void run_alt(char *stack, size_t size)
{
    stack_t ss = {.ss_sp = stack, .ss_size = size, .ss_flags = 0};
    sigaltstack(&ss, NULL);
    alt_lo = stack;
    alt_hi = stack + size;
    for (int i = 0; i < 3; i++)
        deep();
    after();
    ss.ss_flags = SS_DISABLE;
    sigaltstack(&ss, NULL);
}
#define ALT_SIZE (256 * 1024)
#define THREAD_STACK (1024 * 1024)
NOINLINE void *alt_thread(void *arg)
{
    run_alt((char *)arg, ALT_SIZE);
    NOTAIL();
    return NULL;
}

NOINLINE int m_altstack(void)
{
    set_handler_flags(SIGUSR1, on_alt, SA_ONSTACK);
    /* main thread: an alternate stack in the heap/mmap area, below the main stack */
    char *mainalt =
        mmap(NULL, ALT_SIZE, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    run_alt(mainalt, ALT_SIZE);
    /* a thread whose alternate stack lies just above its own stack */
    char *region = mmap(NULL, THREAD_STACK + ALT_SIZE, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setstack(&at, region, THREAD_STACK);
    pthread_t t;
    pthread_create(&t, &at, alt_thread, region + THREAD_STACK);
    pthread_join(t, NULL);
    printf("altstack: %d handled, %d on the alternate stack\n", (int)worked, on_alt_stack);
    return 43;
}

/* ---- siglongjmp out of handlers ---- */
static sigjmp_buf env;
NOINLINE void jump_handler(int sig)
{
    (void)sig;
    handler_work();
    siglongjmp(env, 1);
}
NOINLINE void level2(void)
{
    raise(SIGUSR1);
    NOTAIL();
}
NOINLINE void level1(void)
{
    level2();
    NOTAIL();
}
NOINLINE void after_jump(void)
{
    sink++;
}

static int *volatile bad_ptr; /* NULL, and the compiler cannot know it */
NOINLINE void segv_handler(int sig)
{
    (void)sig;
    handler_work();
    siglongjmp(env, 1);
}
NOINLINE void bad_access(void)
{
    *bad_ptr = 1;
    NOTAIL();
}
NOINLINE void fault1(void)
{
    bad_access();
    NOTAIL();
}

NOINLINE long small_work(void)
{
    for (int i = 0; i < 5; i++)
        handler_work();
    return (long)worked;
}
static volatile long small_got;
NOTRACE static void small_handler(int sig)
{
    (void)sig;
    small_got = small_work();
}
NOTRACE static void *small_thread(void *arg)
{
    (void)arg;
    size_t sz = (size_t)sysconf(_SC_MINSIGSTKSZ) + 1024;
    size_t page = (size_t)sysconf(_SC_PAGESIZE), len = (sz + page - 1) / page * page + page;
    /* a guard page right below the stack: an overflow faults instead of corrupting memory */
    char *area = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (area == MAP_FAILED || mprotect(area, page, PROT_NONE) < 0) return NULL;
    stack_t ss = {.ss_sp = area + page, .ss_size = sz};
    if (sigaltstack(&ss, NULL) < 0) {
        perror("sigaltstack");
        return NULL;
    }
    set_handler_flags(SIGUSR1, small_handler, SA_ONSTACK);
    raise(SIGUSR1);
    return NULL;
}

/* ---- heldexit ---- */
#define HELD_CHILDREN scaled(40)
#define HELD_BURSTS 5
static volatile sig_atomic_t bursts;
NOINLINE void burst(int sig)
{
    (void)sig;
    if (bursts >= HELD_BURSTS) return; /* a tick after the last: no work */
    for (int i = 0; i < 300; i++)
        handler_work();
    bursts++;
}
NOINLINE long child_run(void)
{
    long x = 0;
    struct itimerval it = {{0, 20}, {0, 20}};
    setitimer(ITIMER_REAL, &it, NULL);
    while (bursts < HELD_BURSTS)
        x = spin_fn(x);
    struct itimerval off = {{0, 0}, {0, 0}};
    setitimer(ITIMER_REAL, &off, NULL);
    return x;
}
NOINLINE int m_heldexit(void)
{
    set_handler_flags(SIGALRM, burst, SA_RESTART);
    int ok = 0;
    for (int i = 0; i < HELD_CHILDREN; i++) {
        pid_t p = fork();
        if (p == 0) {
            long x = child_run();
            KEEP(x);
            exit(bursts == HELD_BURSTS ? 0 : 1);
        }
        int st;
        if (p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0) ok++;
    }
    printf("heldexit: %d of %d children ran %d bursts\n", ok, (int)HELD_CHILDREN, HELD_BURSTS);
    return 47;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    int rc = 2;
    if (!strcmp(mode, "usr1")) {
        rc = m_usr1();
    } else if (!strcmp(mode, "alarm")) {
        rc = m_alarm();
    } else if (!strcmp(mode, "altstack")) {
        rc = m_altstack();
    } else if (!strcmp(mode, "siglongjmp")) {
        /* the sigsetjmp is in main itself: after the jump, after_jump is at depth 1 */
        set_handler(SIGUSR1, jump_handler);
        static volatile int jumps, i;
        for (i = 0; i < 3; i++) {
            if (sigsetjmp(env, 1) == 0) {
                level1();
                printf("not reached\n");
            } else {
                jumps++;
                after_jump();
            }
        }
        printf("siglongjmp: %d jumps, %d handled\n", jumps, (int)worked);
        rc = 44;
    } else if (!strcmp(mode, "segv")) {
        set_handler(SIGSEGV, segv_handler);
        static volatile int i;
        for (i = 0; i < 2; i++) {
            if (sigsetjmp(env, 1) == 0) {
                fault1();
                printf("not reached\n");
            } else {
                printf("recovered\n");
                after_jump();
            }
        }
        printf("segv: %d handled\n", (int)worked);
        rc = 45;
    } else if (!strcmp(mode, "smallalt")) {
        pthread_t t;
        pthread_create(&t, NULL, small_thread, NULL);
        pthread_join(t, NULL);
        printf("smallalt: handler got %ld\n", (long)small_got);
        rc = 46;
    } else if (!strcmp(mode, "heldexit")) {
        rc = m_heldexit();
    } else {
        fprintf(stderr, "usage: bsignals usr1|alarm|altstack|siglongjmp|segv|smallalt|heldexit\n");
    }
    KEEP(rc);
    return rc;
}
