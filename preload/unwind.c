/*
 * unwind.c - the few wrappers the shadow stack needs around non-local exits.
 *
 * The hooks resynchronise the shadow stack with the real stack by themselves (an entry whose
 * slot lies below the stack pointer is a dead frame, closed at the next hook), so nothing here is
 * needed for the tree to be right. The wrappers exist for two other reasons:
 *
 *  - Time. longjmp() and siglongjmp() close the frames they skip at the moment they jump, not at
 *    the next traced call, which may come much later. The target stack pointer is read from the
 *    jmp_buf (glibc mangles it with the thread's pointer guard; see demangle()).
 *  - Unwinders read return addresses. An unwinder that met ftr_tramp_return instead of a real
 *    return address would find no unwind info for it and abort the program. Before C++ throws
 *    and rethrows and before pthread_exit()'s forced unwind, the real return addresses are put
 *    back in their stack slots; __cxa_begin_catch() then closes the frames the exception left
 *    (at the catch) and hooks the survivors again.
 *
 * Each wrapper forwards to the next definition (RTLD_NEXT), looked up on first use.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tracer.h"

#define EXPORT __attribute__((visibility("default")))

static void *next(void **cache, const char *name)
{
    if (!*cache && !(*cache = dlsym(RTLD_NEXT, name))) {
        ftr_msg("fatal: %s not found after libftrace.so", name);
        abort();
    }
    return *cache;
}
#define NEXT(var, name) ((__typeof__(var))next((void **)&(var), name))

/* glibc stores rsp in a jmp_buf as rol(rsp ^ pointer_guard, 0x11); the guard lives at
 * %fs:0x30 (tcbhead_t.pointer_guard on x86_64, a fixed ABI offset). */
static uintptr_t demangle(long v)
{
    uintptr_t guard, x = (uintptr_t)v;
    __asm__("mov %%fs:0x30, %0" : "=r"(guard));
    x = (x >> 0x11) | (x << (64 - 0x11));
    return x ^ guard;
}

/* Closes the frames a jump to env will skip, if its target stack pointer makes sense: above
 * the current one (a jump can only go up the stack it is on). */
static void close_for_jump(const long *jb)
{
    uintptr_t target = demangle(jb[6]), here = (uintptr_t)__builtin_frame_address(0);
    if (target > here) ftr_close_frames_below(target, 0);
}

typedef void (*longjmp_fn)(void *, int) __attribute__((noreturn));
static longjmp_fn real_longjmp, real__longjmp, real_siglongjmp, real_longjmp_chk;

EXPORT __attribute__((noreturn)) void longjmp(jmp_buf env, int val)
{
    close_for_jump((const long *)env);
    NEXT(real_longjmp, "longjmp")(env, val);
}
EXPORT __attribute__((noreturn)) void _longjmp(jmp_buf env, int val)
{
    close_for_jump((const long *)env);
    NEXT(real__longjmp, "_longjmp")(env, val);
}
EXPORT __attribute__((noreturn)) void siglongjmp(sigjmp_buf env, int val)
{
    close_for_jump((const long *)env);
    NEXT(real_siglongjmp, "siglongjmp")(env, val);
}
/* _FORTIFY_SOURCE turns longjmp into __longjmp_chk */
EXPORT __attribute__((noreturn)) void __longjmp_chk(sigjmp_buf env, int val)
{
    close_for_jump((const long *)env);
    NEXT(real_longjmp_chk, "__longjmp_chk")(env, val);
}

/* Puts the real return address back in every hooked slot of this thread (the lowest entry of a
 * tail-call group holds it). */
static void unhook_all(void)
{
    struct ftr_tls *t = &ftr_tls;
    if (!t->shadow_base) return;
    for (struct ftr_shadow *e = t->shadow_base; e < t->top; e++) {
        uintptr_t *slot = (uintptr_t *)e->slot;
        if (e->ret != (uintptr_t)ftr_tramp_return && *slot == (uintptr_t)ftr_tramp_return)
            *slot = e->ret;
    }
}

/* Hooks again the slots of the entries still alive. */
static void rehook_all(void)
{
    struct ftr_tls *t = &ftr_tls;
    if (!t->shadow_base) return;
    for (struct ftr_shadow *e = t->shadow_base; e < t->top; e++) {
        uintptr_t *slot = (uintptr_t *)e->slot;
        if (e->ret != (uintptr_t)ftr_tramp_return && *slot == e->ret)
            *slot = (uintptr_t)ftr_tramp_return;
    }
}

/* ---- C++ exceptions (libgcc_s / libstdc++) ---- */
struct _Unwind_Exception;
typedef int (*raise_fn)(struct _Unwind_Exception *);
static raise_fn real_raise, real_rethrow;
typedef void *(*begin_catch_fn)(void *);
static begin_catch_fn real_begin_catch;

EXPORT int _Unwind_RaiseException(struct _Unwind_Exception *e)
{
    unhook_all();
    int rc = NEXT(real_raise, "_Unwind_RaiseException")(e);
    rehook_all(); /* no handler: it returns, and std::terminate follows */
    return rc;
}

EXPORT int _Unwind_Resume_or_Rethrow(struct _Unwind_Exception *e)
{
    unhook_all();
    int rc = NEXT(real_rethrow, "_Unwind_Resume_or_Rethrow")(e);
    rehook_all();
    return rc;
}

/* Called from the landing pad of the catching function: every frame below the caller's stack
 * pointer was unwound by the exception. */
EXPORT void *__cxa_begin_catch(void *exc)
{
    uintptr_t caller_sp = (uintptr_t)__builtin_frame_address(0) + 16;
    ftr_close_frames_below(caller_sp, 0);
    rehook_all();
    return NEXT(real_begin_catch, "__cxa_begin_catch")(exc);
}

/* ---- threads ---- */
typedef void (*pthread_exit_fn)(void *) __attribute__((noreturn));
static pthread_exit_fn real_pthread_exit;

/* pthread_exit() unwinds the thread's stack with the forced unwinder, which must see the real
 * return addresses. The frames are not closed here: cancellation cleanup handlers still run in
 * them (glibc jumps back into the frame that pushed the handler), and calls they make nest
 * there; what is still open when the thread ends is closed by the thread's destructor. */
int ftr_main_pthread_exited;

EXPORT __attribute__((noreturn)) void pthread_exit(void *retval)
{
    if (syscall(SYS_gettid) == getpid()) ftr_main_pthread_exited = 1; /* glibc counts it out */
    unhook_all();
    NEXT(real_pthread_exit, "pthread_exit")(retval);
}
