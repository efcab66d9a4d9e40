/* sanitized: a program built with -fsanitize=address (or thread, leak) for options_tests.py.
 * main -> build -> fill, main -> total (on a second thread too) -> add x N, main -> spawn -> a
 * child shell (it must not inherit the sanitizer runtime); exits with status 5.
 * usage: sanitized [N] [overflow|leak|uaf]
 *   overflow: a heap-buffer-overflow read in peek() (ASan reports it, exit status 1)
 *   uaf: a heap-use-after-free read in peek()
 *   leak: a block no longer referenced at exit (LeakSanitizer reports it) */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "progs.h"

static volatile int sink;
static void *kept;

NOINLINE void fill(int *a, int n)
{
    for (int i = 0; i < n; i++)
        a[i] = i * i;
}

NOINLINE int *build(int n)
{
    int *a = malloc(sizeof *a * (size_t)n);
    if (a) fill(a, n);
    return a;
}

NOINLINE int add(int s, int x)
{
    return s + x;
}

NOINLINE int total(const int *a, int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s = add(s, a[i]);
    return s;
}

struct job {
    int *a;
    int n, sum;
};

NOINLINE void *worker(void *p)
{
    struct job *j = p;
    j->sum = total(j->a, j->n);
    return NULL;
}

NOINLINE int peek(int *a, int n)
{
    return a[n];
}

/* A shell, as system() runs it: 7, or 9 when it was given a sanitizer runtime to preload (an
 * untraced run gives it none; a preloaded runtime would change what it does, bash's leaks
 * becoming LeakSanitizer's reports and exit status). */
NOINLINE int spawn(void)
{
    static const char cmd[] =
        "case \"$LD_PRELOAD\" in *libasan*|*libtsan*|*clang_rt*) exit 9;; esac; exit 7";
    return system(cmd) >> 8;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 4;
    const char *mode = argc > 2 ? argv[2] : "";
    int *a = build(n);
    if (!a) return 2;
    struct job j = {a, n, 0};
    pthread_t t;
    if (pthread_create(&t, NULL, worker, &j) != 0) return 2;
    pthread_join(t, NULL);
    int s = total(a, n);
    printf("sanitized %d %d %d\n", s, j.sum, spawn());
    fflush(stdout);
    if (!strcmp(mode, "overflow")) sink = peek(a, n);
    if (!strcmp(mode, "uaf")) {
        free(a);
        sink = peek(a, 0);
    }
    if (!strcmp(mode, "leak")) {
        kept = build(n);
        kept = NULL;
    }
    if (strcmp(mode, "uaf")) free(a);
    fprintf(stderr, "sanitized: done\n");
    return 5;
}
