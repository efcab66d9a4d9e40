/* ends: the ways a process ends. usage: ends MODE
 *   return  main -> work -> leaf x 3; main returns 0
 *   exit    main -> work -> deep -> exit(5)        (main, work, deep stay open)
 *   _exit   main -> work -> deep -> _exit(6)       (the same, without atexit handlers)
 *   segv    main -> work -> deep -> *NULL = 1      (killed by SIGSEGV)
 *   abort   main -> work -> deep -> abort()        (killed by SIGABRT)
 *   thread  a thread loops calling spin() (main waits until it has, 1000 times) while main ->
 *           work -> leaf x 3 returns
 *   fpe     main -> work -> deep -> integer division by zero   (killed by SIGFPE)
 *   texit   a thread: exiter -> exit(7) while main sleeps in main -> work -> deep -> waiter
 *           (main, work, deep, waiter stay open; exiter too)
 * Every mode first prints a line and calls work() -> leaf() three times. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include "progs.h"

static volatile int sink;
NOINLINE int leaf(int x)
{
    return x + 1;
}
static volatile int zero;
NOINLINE void waiter(void)
{
    for (;;)
        pause();
}
NOINLINE void *exiter(void *arg)
{
    (void)arg;
    usleep(20000);
    fflush(stdout);
    exit(7);
}
NOINLINE void deep(const char *mode)
{
    fflush(stdout);
    if (!strcmp(mode, "exit")) exit(5);
    if (!strcmp(mode, "_exit")) _exit(6);
    if (!strcmp(mode, "segv")) *(volatile int *)0 = 1;
    if (!strcmp(mode, "abort")) abort();
    if (!strcmp(mode, "fpe")) sink = sink / zero; /* (1 / x is compiled without a division) */
    if (!strcmp(mode, "texit")) {
        pthread_t t;
        pthread_create(&t, NULL, exiter, NULL);
        waiter();
    }
}
NOINLINE int work(const char *mode)
{
    int s = 0;
    for (int i = 0; i < 3; i++)
        s += leaf(i);
    deep(mode);
    sink = s;
    return s;
}
NOINLINE int spin(int x)
{
    return x ^ 1;
}
static volatile long spins;
NOINLINE void *spinner(void *arg)
{
    (void)arg;
    for (int x = 0;; x = spin(x)) {
        sink = x;
        spins++;
    }
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "return";
    printf("ends %s\n", mode);
    if (!strcmp(mode, "thread")) {
        pthread_t t;
        pthread_create(&t, NULL, spinner, NULL);
        /* until it has spun a while (a loaded machine may not run it for a long time) */
        for (int i = 0; i < 10000 && spins < 1000; i++)
            usleep(1000);
    }
    work(mode);
    return 0;
}
