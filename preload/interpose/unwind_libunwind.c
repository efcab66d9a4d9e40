/*
 * unwind_libunwind.c - the libunwind project's unwinder (libunwind.so.8, -lunwind) walking
 * through traced frames.
 *
 * That unwinder calls no personality routine while it steps, so the pseudo-frame's trick
 * (unwind.c) does not reach it: at a hooked return it finds ftr_tramp_return, whose one-byte FDE
 * leads nowhere, and the walk ends there. And it walks through ftr_tramp_through's frame (exact
 * CFI) and shows it, which the program must not see. Sampling profilers (gperftools), crash
 * handlers and logging libraries (glog) call it, often from a signal handler. So:
 *
 *  - unw_step() (_ULx86_64_step, and _Ux86_64_step of the generic interface) is wrapped: after
 *    the real step, a frame of ours (an address in libftrace.so's text: ftr_tramp_through, a
 *    wrapper of ours the program called) is stepped over, and a frame whose return address is
 *    ftr_tramp_return is given its real one from the shadow stack with unw_set_reg(), which
 *    libunwind also stores into the slot it read it from: the slot is hooked again at once (the
 *    walking thread is inside unw_step(), not returning through it). Nothing is allocated, no
 *    lock is taken: safe in a signal handler as the real step is.
 *  - unw_backtrace() walks by a fast path of its own (tdep_trace) that calls no exported
 *    function: it is wrapped like glibc's backtrace() (unwind.c): the slots above are given
 *    their real addresses for the walk, our frames are left out of what it returns.
 *
 * The real functions are looked up where no signal handler can be inside the dynamic linker's
 * lock: the constructor (a program linked with -lunwind has it loaded by then) and after each
 * dlopen() (dlwrap.c). A libunwind opened RTLD_LOCAL is not wrapped: the program's calls then
 * reach it directly, not through these, and its walks end at a hooked return.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "tracer.h"

#define EXPORT __attribute__((visibility("default")))

/* libunwind-x86_64.h: UNW_REG_IP is UNW_X86_64_RIP, UNW_REG_SP UNW_X86_64_RSP */
enum { LU_REG_SP = 7, LU_REG_IP = 16 };
typedef unsigned long lu_word;
typedef int (*step_fn)(void *cursor);
typedef int (*get_reg_fn)(void *cursor, int reg, lu_word *val);
typedef int (*set_reg_fn)(void *cursor, int reg, lu_word val);
typedef int (*lu_backtrace_fn)(void **buffer, int size);

struct lu_api {
    const char *step_name, *get_name, *set_name;
    step_fn step;
    get_reg_fn get;
    set_reg_fn set;
};
static struct lu_api local_api = {"_ULx86_64_step", "_ULx86_64_get_reg", "_ULx86_64_set_reg"};
static struct lu_api generic_api = {"_Ux86_64_step", "_Ux86_64_get_reg", "_Ux86_64_set_reg"};
static lu_backtrace_fn real_lu_backtrace;

static void resolve_api(struct lu_api *a)
{
    if (a->step) return;
    get_reg_fn get = (get_reg_fn)ftr_next_sym(a->get_name);
    set_reg_fn set = (set_reg_fn)ftr_next_sym(a->set_name);
    step_fn step = (step_fn)ftr_next_sym(a->step_name);
    if (!get || !set || !step) return;
    a->get = get;
    a->set = set;
    __atomic_store_n(&a->step, step, __ATOMIC_RELEASE); /* the wrapper's sign to use all three */
}

void ftr_libunwind_resolve(void)
{
    resolve_api(&local_api);
    resolve_api(&generic_api);
    if (!real_lu_backtrace)
        __atomic_store_n(&real_lu_backtrace, (lu_backtrace_fn)ftr_next_sym("unw_backtrace"),
                         __ATOMIC_RELEASE);
}

/* The real step, then the frame it reached corrected: ours stepped over (a bounded number),
 * a hooked return given its real address. @return as unw_step(). */
static int step_through(struct lu_api *a, void *cursor)
{
    step_fn step = __atomic_load_n(&a->step, __ATOMIC_ACQUIRE);
    if (!step) { /* loaded in a way no dlopen() of ours saw: look it up now */
        resolve_api(a);
        if (!(step = __atomic_load_n(&a->step, __ATOMIC_ACQUIRE))) return -1; /* UNW_EUNSPEC */
    }
    int r = step(cursor);
    for (int skipped = 0; r > 0; skipped++) {
        lu_word ip, sp;
        if (a->get(cursor, LU_REG_IP, &ip) < 0) break;
        if (ftr_hooked_word((uintptr_t)ip)) {
            if (a->get(cursor, LU_REG_SP, &sp) < 0 || sp < 8) break;
            /* the frame just left read its return address at its CFA - 8, which is this
             * frame's sp - 8: the hooked slot */
            uintptr_t *slot = (uintptr_t *)(uintptr_t)(sp - 8);
            uintptr_t real = ftr_walk_real_return((uintptr_t)slot);
            if (!real) return 0; /* its return under way: end the walk there */
            uintptr_t was = *slot;
            a->set(cursor, LU_REG_IP, (lu_word)real);
            *slot = was;
            break;
        }
        if (!ftr_walk_ours((uintptr_t)ip) || skipped >= 8) break;
        r = step(cursor);
    }
    return r;
}

EXPORT int _ULx86_64_step(void *cursor)
{
    return step_through(&local_api, cursor);
}

EXPORT int _Ux86_64_step(void *cursor)
{
    return step_through(&generic_api, cursor);
}

EXPORT int unw_backtrace(void **buffer, int size)
{
    lu_backtrace_fn real = __atomic_load_n(&real_lu_backtrace, __ATOMIC_ACQUIRE);
    return real ? ftr_walk_buffered(real, buffer, size) : 0;
}
