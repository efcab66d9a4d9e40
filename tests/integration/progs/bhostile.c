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
 */
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <ucontext.h>
#include "behave.h"

static volatile long sink;

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
    for (int i = 0; i < 4000; i++) {
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
        if (n < 10000) {
            n++;
            trigger();
        }
        final();
        printf("altjmp: %ld\n", (long)sink);
    } else {
        fprintf(stderr, "usage: bhostile firsthook|coro300|altjmp\n");
        return 2;
    }
    return 0;
}
