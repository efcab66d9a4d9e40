/* blibcall.c - library calls (libcall_tests.py): calls through the PLT (or, built with -fno-plt,
 * through the GOT) from traced functions, a libc function calling back into a traced one
 * (qsort), a function whose address is taken (it must stay the same pointer), calls in a
 * thread, a dlopen()ed traced library that calls libc, longjmp and exit (calls that never
 * return).
 *   blibcall [PLUGIN.so]     the tree libcall_tests.py expects; exit status 3
 *   blibcall loop STOPFILE   run() every 2 ms until STOPFILE exists (ftrace-ctl libcall)
 */
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "progs.h"

static char msg[] = "hello, world\n";
static volatile int ncmp;

NOINLINE void run(void)
{
    char *p = malloc(64);
    size_t n = strlen(msg);
    memcpy(p, msg, n + 1);
    if (write(1, p, n) != (ssize_t)n) _exit(9);
    free(p);
}

NOINLINE int cmp(const void *a, const void *b)
{
    ncmp++;
    return *(const int *)a - *(const int *)b;
}

NOINLINE void sorter(void)
{
    int v[4] = {3, 1, 2, 0};
    qsort(v, 4, sizeof v[0], cmp);
    char line[64];
    snprintf(line, sizeof line, "sorted %d%d%d%d cmp %d\n", v[0], v[1], v[2], v[3], ncmp);
    fputs(line, stdout);
}

/* abs's address is taken: a -fno-plt build must leave its GOT slot alone */
static int (*volatile absp)(int) = abs;
NOINLINE void pointers(void)
{
    printf("abs %s %d\n", absp == abs ? "same" : "DIFFERENT", absp(-7));
}

static jmp_buf env;
NOINLINE void jumper(void)
{
    longjmp(env, 1);
}

NOINLINE void *worker(void *arg)
{
    (void)arg;
    return (void *)(long)(getpid() > 0);
}

NOINLINE void threads(void)
{
    pthread_t th;
    void *r;
    pthread_create(&th, NULL, worker, NULL);
    pthread_join(th, &r);
}

NOINLINE void plugin(const char *path)
{
    void *h = dlopen(path, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        fputs("no plugin\n", stdout);
        return;
    }
    size_t (*fn)(const char *) = (size_t(*)(const char *))dlsym(h, "plug_len");
    printf("plug %zu\n", fn ? fn("abc") : 0);
    dlclose(h);
}

int main(int argc, char **argv)
{
    if (argc == 3 && !strcmp(argv[1], "loop")) {
        for (int i = 0; i < 15000 && access(argv[2], F_OK) != 0; i++) {
            run();
            struct timespec d = {0, 2000000};
            nanosleep(&d, NULL);
        }
        return 0;
    }
    run();
    sorter();
    pointers();
    if (!setjmp(env)) jumper();
    threads();
    if (argc > 1) plugin(argv[1]);
    fflush(stdout);
    exit(3);
}
