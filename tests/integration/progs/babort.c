/* babort: how a process ends: abort(), exit() and return with atexit handlers and destructors
 * that run traced code. usage: babort MODE
 *   abort       main -> a1 -> a2 -> leaf, then a2 calls abort(): killed by SIGABRT (stdout
 *               flushed before). tree {main 1, main;a1 1, main;a1;a2 1, main;a1;a2;leaf 1};
 *               open [main a1 a2].
 *   abort-handler  the same with a SIGABRT handler on_abrt -> handler_work (traced, returns;
 *               abort() then kills with the default action). tree: the above plus
 *               main;a1;a2;on_abrt 1, main;a1;a2;on_abrt;handler_work 1; open [main a1 a2].
 *   abort-thread   main -> joiner waits in pthread_join for thread aborter -> a1 -> a2 -> leaf
 *               -> abort(). trees: main {main 1, main;joiner 1}, open [main joiner];
 *               thread {aborter 1, aborter;a1 1, aborter;a1;a2 1, aborter;a1;a2;leaf 1},
 *               open [aborter a1 a2].
 *   exit        main -> e1 -> e2 -> exit(5) with an atexit handler at_exit_fn -> leaf and a
 *               destructor dtor_fn -> leaf: both run inside exit(), below e2.
 *               tree {main 1, main;e1 1, main;e1;e2 1, main;e1;e2;at_exit_fn 1,
 *               main;e1;e2;at_exit_fn;leaf 1, main;e1;e2;dtor_fn 1, main;e1;e2;dtor_fn;leaf 1};
 *               open [main e1 e2].
 *   return      main -> e1 -> e2 (returns), then main returns 6: the handlers run after main
 *               returned, at depth 0. tree {main 1, main;e1 1, main;e1;e2 1, at_exit_fn 1,
 *               at_exit_fn;leaf 1, dtor_fn 1, dtor_fn;leaf 1}; nothing open.
 *   quick       main -> e1 -> e2 -> quick_exit(7): at_quick_exit's quick_fn -> leaf runs, the
 *               atexit handler and the destructor do not. tree {main 1, main;e1 1, main;e1;e2 1,
 *               main;e1;e2;quick_fn 1, main;e1;e2;quick_fn;leaf 1}; open [main e1 e2].
 */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "behave.h"

static volatile long sink;

NOINLINE void leaf(void)
{
    sink++;
}
NOINLINE void handler_work(void)
{
    sink++;
}
NOINLINE void on_abrt(int sig)
{
    (void)sig;
    handler_work();
    NOTAIL();
}
NOINLINE void a2(void)
{
    leaf();
    printf("abort: about to abort\n");
    fflush(stdout);
    abort();
}
NOINLINE void a1(void)
{
    a2();
    NOTAIL();
}
NOINLINE void *aborter(void *arg)
{
    (void)arg;
    a1();
    return NULL;
}
NOINLINE void joiner(void)
{
    pthread_t t;
    pthread_create(&t, NULL, aborter, NULL);
    pthread_join(t, NULL);
    NOTAIL();
}

NOINLINE void at_exit_fn(void)
{
    leaf();
    printf("at_exit_fn\n");
}
NOINLINE void quick_fn(void)
{
    leaf();
    printf("quick_fn\n");
    fflush(stdout); /* quick_exit() does not flush stdio */
}
/* a destructor: runs at exit (from main's return too), after the atexit handlers */
__attribute__((destructor)) NOINLINE void dtor_fn(void)
{
    leaf();
    printf("dtor_fn\n");
}
NOINLINE void e2(int how)
{
    printf("e2\n");
    if (how == 'x') exit(5);
    if (how == 'q') quick_exit(7);
}
NOINLINE void e1(int how)
{
    e2(how);
    NOTAIL();
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "abort")) {
        a1();
    } else if (!strcmp(mode, "abort-handler")) {
        signal(SIGABRT, on_abrt);
        a1();
    } else if (!strcmp(mode, "abort-thread")) {
        joiner();
    } else if (!strcmp(mode, "exit") || !strcmp(mode, "return")) {
        atexit(at_exit_fn);
        e1(mode[0] == 'e' ? 'x' : 'r');
        return 6;
    } else if (!strcmp(mode, "quick")) {
        atexit(at_exit_fn); /* not run by quick_exit() */
        at_quick_exit(quick_fn);
        e1('q');
    }
    return 1;
}
