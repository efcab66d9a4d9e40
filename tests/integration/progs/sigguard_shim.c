/* sigguard_shim: a test-only preload built from preload/interpose/sigguard.c plus this file
 * (sigguard_tests.py). Its constructor guards SIGTRAP and SIGRTMIN+7 as libftrace.so will, and
 * installs one handler for both that counts deliveries and passes them on to the program's
 * action (ftr_sigguard_chain). With SIGGUARD_SHIM_LATE=1 in the environment it does nothing
 * until the program calls sigguard_shim_init() (to exercise the wrappers before the set-up).
 * The program reads the counts through sigguard_shim_count() (dlsym: absent when untraced).
 */
#define _GNU_SOURCE
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "sigguard.h"

#define EXPORT __attribute__((visibility("default")))

static atomic_int count_trap, count_rt;

void ftr_context_switch(uintptr_t here, uintptr_t to_sp) /* the tracer's, in libftrace.so */
{
    (void)here;
    (void)to_sp;
}

static void on_guarded(int sig, siginfo_t *si, void *uc)
{
    atomic_fetch_add(sig == SIGTRAP ? &count_trap : &count_rt, 1);
    ftr_sigguard_chain(sig, si, uc);
}

EXPORT int sigguard_shim_count(int sig)
{
    return atomic_load(sig == SIGTRAP ? &count_trap : &count_rt);
}

EXPORT void sigguard_shim_init(void)
{
    const int sigs[2] = {SIGTRAP, SIGRTMIN + 7};
    struct sigaction sa;
    ftr_sigguard_init(sigs, 2);
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_guarded;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER | SA_RESTART;
    sigemptyset(&sa.sa_mask);
    for (int i = 0; i < 2; i++)
        if (ftr_sigguard_install(sigs[i], &sa) != 0) abort();
}

__attribute__((constructor)) static void shim_ctor(void)
{
    const char *late = getenv("SIGGUARD_SHIM_LATE");
    if (!late || strcmp(late, "1") != 0) sigguard_shim_init();
}
