/* bunwind: backtrace() through traced frames (built with -rdynamic so that backtrace_symbols()
 * names them). usage: bunwind MODE
 *   bt      main -> f1 -> f2 -> f3 -> show; show() calls backtrace() and prints the names of
 *           the frames up to main: "bt: show f3 f2 f1 main". tree: {main 1, main;f1 1,
 *           main;f1;f2 1, main;f1;f2;f3 1, main;f1;f2;f3;show 1, main;f1;f2;f3;show;after 1}
 *   signal  main -> f1 -> f2 -> f3 -> raise(SIGUSR1); the handler on_usr1 (traced) calls
 *           backtrace() (no allocation) into a static array; main then prints the names of
 *           those frames, the C library's left out: "signal: on_usr1 f3 f2 f1 main".
 *           tree: {main 1, main;f1 1, main;f1;f2 1, main;f1;f2;f3 1, main;f1;f2;f3;on_usr1 1}
 * Exit status 64 + mode number. */
#define _GNU_SOURCE
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "behave.h"

static volatile long sink;
static void *frames[64];
static int nframes;

NOINLINE void after(void)
{
    sink++;
}

/* Prints the function names of frames[0..nframes) up to main, skipping unnamed frames and
 * the C library's (signal trampoline, raise). */
NOTRACE static void print_names(const char *mode)
{
    char **sym = backtrace_symbols(frames, nframes);
    printf("%s:", mode);
    for (int i = 0; sym && i < nframes; i++) {
        if (strstr(sym[i], "libc.so")) continue; /* raise, the signal return */
        char *open = strchr(sym[i], '('), *plus = open ? strpbrk(open, "+)") : NULL;
        if (!open || !plus || plus == open + 1) {
            printf(" ?");
            continue;
        }
        *plus = 0;
        printf(" %s", open + 1);
        if (!strcmp(open + 1, "main")) break;
    }
    printf("\n");
    free(sym);
}

NOINLINE void show(void)
{
    nframes = backtrace(frames, 64);
    after();
    NOTAIL();
}

NOINLINE void on_usr1(int sig)
{
    (void)sig;
    nframes = backtrace(frames, 64);
    NOTAIL();
}

static int use_signal;
NOINLINE void f3(void)
{
    if (use_signal)
        raise(SIGUSR1);
    else
        show();
    NOTAIL();
}
NOINLINE void f2(void)
{
    f3();
    NOTAIL();
}
NOINLINE void f1(void)
{
    f2();
    NOTAIL();
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (!strcmp(mode, "signal")) {
        use_signal = 1;
        signal(SIGUSR1, on_usr1);
    } else if (strcmp(mode, "bt")) {
        fprintf(stderr, "usage: bunwind bt|signal\n");
        return 2;
    }
    f1();
    print_names(mode);
    return 64 + use_signal;
}
