/* brecur: recursion, with exact trees. usage: brecur MODE
 *   fib     main -> fib(10): fib(n) calls fib(n-1) and fib(n-2) for n >= 2 (both real calls:
 *           the results pass through an asm, so gcc can turn neither into a loop with an
 *           accumulator; the test checks the disassembly). 177 calls; the path with k fibs
 *           below main is taken as often as fib(10)'s call tree has nodes at depth k.
 *   mutual  main -> is_even(9): is_even(n) calls is_odd(n-1), is_odd(n) calls is_even(n-1), down
 *           to 0, each a plain call (not a tail call): a chain of 10 alternating frames.
 *   thread  a thread runs hanoi(5, ...): hanoi(n) calls hanoi(n-1) twice and move() once (for
 *           n >= 1; hanoi(0) returns at once); main runs fib(6) meanwhile, then joins.
 *           trees: main {main 1, main;fib ...(fib(6)'s tree)}; thread {hanoi_thread 1, ...}
 * Each mode prints its result; the exit status is 50 + mode number.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include "behave.h"

static volatile long sink;

NOINLINE long fib(int n)
{
    if (n < 2) return n;
    long a = fib(n - 1);
    KEEP(a);
    long b = fib(n - 2);
    KEEP(b);
    return a + b;
}

NOINLINE int is_odd(int n);
NOINLINE int is_even(int n)
{
    if (n == 0) return 1;
    int r = is_odd(n - 1);
    KEEP(r);
    return r;
}
NOINLINE int is_odd(int n)
{
    if (n == 0) return 0;
    int r = is_even(n - 1);
    KEEP(r);
    return r;
}

static int moves;
NOINLINE void move(int from, int to)
{
    moves++;
    sink += from * 3 + to;
}
NOINLINE void hanoi(int n, int from, int to, int via)
{
    if (n == 0) return;
    hanoi(n - 1, from, via, to);
    move(from, to);
    hanoi(n - 1, via, to, from);
    NOTAIL();
}
NOINLINE void *hanoi_thread(void *arg)
{
    hanoi((int)(long)arg, 1, 3, 2);
    return NULL;
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "fib")) {
        printf("fib(10) = %ld\n", fib(10));
        return 50;
    }
    if (!strcmp(mode, "mutual")) {
        printf("is_even(9) = %d\n", is_even(9));
        return 51;
    }
    if (!strcmp(mode, "thread")) {
        pthread_t t;
        pthread_create(&t, NULL, hanoi_thread, (void *)5L);
        long f = fib(6);
        pthread_join(t, NULL);
        printf("fib(6) = %ld, hanoi(5): %d moves\n", f, moves);
        return 52;
    }
    return 1;
}
