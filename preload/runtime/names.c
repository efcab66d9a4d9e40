/*
 * names.c - threads' names, kept as the program gives them, never asked of the kernel on a
 * hook's path.
 *
 * The trace names each thread (THREAD chunks, writer.c) as it was named last. Asking the
 * kernel (prctl(PR_GET_NAME)) at every chunk switch and at a thread's end was a system call
 * that a sandbox's seccomp allowlist may forbid, in code the program did not call: a program
 * that allowed itself its own system calls only was killed with SIGSYS at its first full
 * chunk. So the names are followed instead:
 *  - a thread starts with its creator's name (the kernel copies it at clone()): the
 *    pthread_create() wrapper gives the new record the creator's;
 *  - the main thread's is read once, in the constructor;
 *  - a rename goes through prctl(PR_SET_NAME) or pthread_setname_np() (which renames the
 *    calling thread with an internal prctl(), and another thread by writing its
 *    /proc/self/task/TID/comm): both are wrapped.
 * A name written to a comm file by the program itself is not seen; a thread set up at its
 * first hook that neither pthread_create() nor the constructor saw (made before us, or by a
 * raw clone) asks the kernel then, once.
 *
 * A name is written while the writer may read it: it is stored 8 bytes at a time, so a reader
 * sees each half whole, the old or the new one (a rename is rare; a mixed name would show once).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdarg.h>
#include <sys/prctl.h>

#include "tracer.h"

#define EXPORT __attribute__((visibility("default")))

/* Ours are raw system calls: prctl() is our own wrapper below. */
static void kernel_name(char name[16])
{
    syscall(SYS_prctl, PR_GET_NAME, name, 0, 0, 0);
}
static uint32_t my_tid(void)
{
    return (uint32_t)syscall(SYS_gettid);
}

static char start_name[16]; /* the main thread's, until it has a record */

static void store_name(char *dst, const char *src)
{
    uint64_t w[2] = {0, 0};
    char *c = (char *)w;
    for (int i = 0; i < 15 && src[i]; i++) /* a name is 15 bytes at most, then a NUL */
        c[i] = src[i];
    __atomic_store_n((uint64_t *)dst, w[0], __ATOMIC_RELAXED);
    __atomic_store_n((uint64_t *)dst + 1, w[1], __ATOMIC_RELAXED);
}

void ftr_names_init(void)
{
    kernel_name(start_name);
}

void ftr_name_for_new_thread(char name[16])
{
    struct ftr_thread *me = ftr_tls.thr;
    if (me)
        store_name(name, me->name);
    else if (my_tid() == ftr_g.pid)
        store_name(name, start_name);
    else
        kernel_name(name); /* an untraced creator: it runs the program's code anyway */
}

void ftr_name_at_setup(struct ftr_thread *r)
{
    if (r->name[0]) return; /* its creator's, given by pthread_create() */
    if (r->tid == ftr_g.pid)
        store_name(r->name, start_name);
    else
        kernel_name(r->name);
}

/* The thread th (this one when self) was renamed. */
static void renamed(pthread_t th, int self, const char *name)
{
    struct ftr_thread *r = self ? ftr_tls.thr : ftr_thread_of(th);
    if (r) {
        store_name(r->name, name);
        ftr_thread_name_publish(r);
    } else if (self && my_tid() == ftr_g.pid)
        store_name(start_name, name); /* the main thread before its first hook */
}

typedef int (*setname_fn)(pthread_t, const char *);
static setname_fn real_setname;

/* glibc's prctl() is the system call, with four arguments read whatever the option: so is
 * this one (no lookup of the next definition: prctl() may be called from a signal handler). */
EXPORT int prctl(int option, ...)
{
    va_list ap;
    va_start(ap, option);
    unsigned long a2 = va_arg(ap, unsigned long), a3 = va_arg(ap, unsigned long);
    unsigned long a4 = va_arg(ap, unsigned long), a5 = va_arg(ap, unsigned long);
    va_end(ap);
    int rc = (int)syscall(SYS_prctl, option, a2, a3, a4, a5);
    if (rc == 0 && option == PR_SET_NAME && a2) renamed(pthread_self(), 1, (const char *)a2);
    return rc;
}

EXPORT int pthread_setname_np(pthread_t th, const char *name)
{
    if (!real_setname) real_setname = (setname_fn)dlsym(RTLD_NEXT, "pthread_setname_np");
    if (!real_setname) return ENOSYS;
    int rc = real_setname(th, name);
    if (rc == 0) renamed(th, pthread_equal(th, pthread_self()), name);
    return rc;
}
