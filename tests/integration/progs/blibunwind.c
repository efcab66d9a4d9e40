/* blibunwind: the libunwind of the libunwind project (-lunwind, not libgcc's) walking through
 * traced frames. It calls no personality routine, so a hooked return address would end its
 * walk at ftr_tramp_return. Built with -rdynamic so that dladdr() names the frames.
 *   usage: blibunwind MODE
 *   step    main -> f1 -> f2 -> f3 -> show; show() walks with unw_init_local()/unw_step(),
 *           keeping each frame's ip, and prints the names up to main:
 *           "step: show f3 f2 f1 main". tree: {main 1, main;f1 1, main;f1;f2 1,
 *           main;f1;f2;f3 1, main;f1;f2;f3;show 1, main;f1;f2;f3;show;after 1}
 *   bt      the same with unw_backtrace(): "bt: show f3 f2 f1 main"; same tree
 *   signal  main -> f1 -> f2 -> f3 -> raise(SIGUSR1); the handler on_usr1 (traced) walks with
 *           unw_step() as a sampling profiler does; main prints the names, the C library's
 *           left out: "signal: on_usr1 f3 f2 f1 main". tree: {main 1, main;f1 1,
 *           main;f1;f2 1, main;f1;f2;f3 1, main;f1;f2;f3;on_usr1 1}
 *   twice   show() walks twice, then f3 returns normally: the walk must leave every frame's
 *           return as it was ("twice: show f3 f2 f1 main" twice); same tree as step.
 * Exit status 70 + mode number. */
#define _GNU_SOURCE
#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <libunwind.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include "behave.h"

static volatile long sink;
static void *frames[64];
static int nframes;
enum { M_STEP, M_BT, M_SIGNAL, M_TWICE };
static int mode;

NOINLINE void after(void)
{
    sink++;
}

/* Prints the function names of frames[0..nframes) up to main, skipping unnamed frames and
 * the C library's (signal trampoline, raise). */
NOTRACE static void print_names(const char *name)
{
    printf("%s:", name);
    for (int i = 0; i < nframes; i++) {
        Dl_info di;
        /* a return address names its call: look it up one byte back (not the first frame,
         * whose ip is where it is) */
        void *at = (char *)frames[i] - (i > 0 && mode != M_BT ? 1 : 0);
        if (!dladdr(at, &di) || (di.dli_fname && strstr(di.dli_fname, "libc.so"))) continue;
        printf(" %s", di.dli_sname ? di.dli_sname : "?");
        if (di.dli_sname && !strcmp(di.dli_sname, "main")) break;
    }
    printf("\n");
}

/* unw_step() from here: no allocation, nothing a signal handler may not do */
NOTRACE static void walk(void)
{
    unw_context_t uc;
    unw_cursor_t c;
    nframes = 0;
    if (unw_getcontext(&uc) < 0 || unw_init_local(&c, &uc) < 0) return;
    while (nframes < 64 && unw_step(&c) > 0) {
        unw_word_t ip;
        if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0) break;
        frames[nframes++] = (void *)ip;
    }
}

NOINLINE void show(void)
{
    if (mode == M_BT) {
        nframes = unw_backtrace(frames, 64);
        /* its own frame first, when it records one */
        Dl_info di;
        if (nframes > 0 && dladdr(frames[0], &di) && di.dli_sname && strcmp(di.dli_sname, "show")) {
            memmove(frames, frames + 1, (size_t)--nframes * sizeof *frames);
        }
    } else {
        walk();
        if (mode == M_TWICE) {
            print_names("twice");
            walk();
        }
    }
    after();
    NOTAIL();
}

NOINLINE void on_usr1(int sig)
{
    (void)sig;
    walk();
    NOTAIL();
}

NOINLINE void f3(void)
{
    if (mode == M_SIGNAL)
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
    static const char *const names[] = {"step", "bt", "signal", "twice"};
    const char *arg = argc > 1 ? argv[1] : "";
    for (mode = 0; mode < 4 && strcmp(arg, names[mode]); mode++)
        ;
    if (mode == 4) {
        fprintf(stderr, "usage: blibunwind step|bt|signal|twice\n");
        return 2;
    }
    if (mode == M_SIGNAL) signal(SIGUSR1, on_usr1);
    f1();
    print_names(names[mode]);
    return 70 + mode;
}
