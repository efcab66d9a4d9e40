/*
 * unwind.c - what the shadow stack needs around non-local exits and unwinders.
 *
 * The hooks resynchronise the shadow stack with the real stack by themselves (an entry whose
 * slot lies below the stack pointer is a dead frame, closed at the next hook), so nothing here is
 * needed for the tree to be right. This file exists for two other reasons:
 *
 *  - Time. longjmp() and siglongjmp() close the frames they skip at the moment they jump, not at
 *    the next traced call, which may come much later. The target stack pointer is read from the
 *    jmp_buf (glibc mangles it with the thread's pointer guard; see demangle()). At a C++ catch,
 *    __cxa_begin_catch() closes the frames the exception left.
 *  - Unwinders read return addresses, and a hooked one is ftr_tramp_return. Those that call
 *    personality routines (every C++ throw, phase 1 and 2, and the forced unwind of
 *    pthread_exit() and pthread_cancel(), whichever copy of the unwinder runs them) meet the
 *    pseudo-frame of tramp_x86_64.S, whose personality (ftr_unwind_personality below) puts the
 *    real address back in the slot just before the unwinder reads it. Those that do not
 *    (backtrace(), _Unwind_Backtrace(), and the libunwind project's, unwind_libunwind.c) are
 *    wrapped: the real addresses of the frames above the caller are put back for the walk,
 *    and hooked again after it, or the walk is corrected frame by frame.
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

#include "handlers.h"
#include "retaddr.h"
#include "sigguard.h"
#include "stacks.h"
#include "tracer.h"

#define EXPORT __attribute__((visibility("default")))

/* Not in the global scope after us, the caller is a library opened RTLD_LOCAL, whose own
 * dependencies define it (libstdc++, libgcc_s): looked up each time, as that library and
 * its definition go when it is closed. NULL: none loaded. */
static void *next_or_null(void **cache, const char *name)
{
    if (*cache) return *cache;
    void *p = dlsym(RTLD_NEXT, name);
    if (p) return *cache = p;
    return ftr_dynsym_anywhere(name);
}

static void *next(void **cache, const char *name)
{
    void *p = next_or_null(cache, name);
    if (!p) { /* a caller that links to it cannot be without it: never reached */
        ftr_msg("fatal: %s not found after libftrace.so", name);
        abort();
    }
    return p;
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
 * the current one (a jump can only go up the stack it is on). own: the wrapper's return
 * address slot, which a library call's hook may hold: the call never returns, whatever stack
 * the jump goes to (a coroutine switched with longjmp), and its book entry counts it returned,
 * or the slot would refuse every later hook on a stack not the thread's own (retaddr.h). */
static void close_for_jump(const long *jb, uintptr_t own)
{
    ftr_ret_release(own);
    uintptr_t target = demangle(jb[6]), here = (uintptr_t)__builtin_frame_address(0);
    ftr_sigguard_jump(target, ((const int *)jb)[16]); /* __mask_was_saved, after __jmpbuf */
    if (target > here)
        ftr_close_frames_below(target, 0);
    else if (ftr_tls.sig_n) /* to another stack, lower: off a sigaltstack in main's frame */
        ftr_handlers_jump(&ftr_tls, target);
}
/* a wrapper's own return address slot (unwind.c keeps frame pointers) */
#define OWN_SLOT() ((uintptr_t)__builtin_frame_address(0) + sizeof(uintptr_t))

typedef void (*longjmp_fn)(void *, int) __attribute__((noreturn));
static longjmp_fn real_longjmp, real__longjmp, real_siglongjmp, real_longjmp_chk;

EXPORT __attribute__((noreturn)) void longjmp(jmp_buf env, int val)
{
    close_for_jump((const long *)env, OWN_SLOT());
    NEXT(real_longjmp, "longjmp")(env, val);
}
EXPORT __attribute__((noreturn)) void _longjmp(jmp_buf env, int val)
{
    close_for_jump((const long *)env, OWN_SLOT());
    NEXT(real__longjmp, "_longjmp")(env, val);
}
EXPORT __attribute__((noreturn)) void siglongjmp(sigjmp_buf env, int val)
{
    close_for_jump((const long *)env, OWN_SLOT());
    NEXT(real_siglongjmp, "siglongjmp")(env, val);
}
/* _FORTIFY_SOURCE turns longjmp into __longjmp_chk */
EXPORT __attribute__((noreturn)) void __longjmp_chk(sigjmp_buf env, int val)
{
    close_for_jump((const long *)env, OWN_SLOT());
    NEXT(real_longjmp_chk, "__longjmp_chk")(env, val);
}

/* ---- real return addresses, for unwinders ---- */

/* The real return address of the frame hooked at slot, from the book (retaddr.h), whichever
 * thread hooked it (a coroutine resumed here). @return 0 when there is none. */
static uintptr_t real_return(const struct ftr_tls *t, uintptr_t slot)
{
    (void)t;
    return ftr_ret_get(slot);
}

uintptr_t ftr_walk_real_return(uintptr_t slot)
{
    const struct ftr_tls *t = &ftr_tls;
    return t->shadow_base ? real_return(t, slot) : 0;
}

/* A shadow entry's slot may lie on a stack the program has freed since (a dropped coroutine's):
 * a slot on the stack we run on, above us, is read directly; any other is peeked at. */
struct on_stack {
    uintptr_t lo, hi;
};
static struct on_stack stack_here(const struct ftr_tls *t)
{
    uintptr_t here = (uintptr_t)__builtin_frame_address(0), lo, hi;
    if (!ftr_stack_bounds_of(t, here, &lo, &hi)) return (struct on_stack){0, 0};
    return (struct on_stack){here, hi};
}
static int slot_word(const struct on_stack *h, uintptr_t slot, uintptr_t *v)
{
    if (slot - h->lo < h->hi - h->lo && !(slot & 7)) {
        *v = *(const uintptr_t *)slot;
        return 1;
    }
    return ftr_peek(slot, v);
}

/* Puts the real return address (the book's) back in the hooked slots of this thread above
 * `above` (0: every slot), marking those entries when mark (they are hooked again by
 * rehook_marked()). Entries being filled or emptied (slot 0) are skipped: a signal handler may
 * run this in the middle of a hook. */
static void unhook_all(uintptr_t above, int mark)
{
    struct ftr_tls *t = &ftr_tls;
    if (!t->shadow_base) return;
    struct on_stack h = stack_here(t);
    /* "above" holds on the stack of `above` only. A walk from a sigaltstack handler goes on
     * into the stack the signal interrupted, wherever that lies; one from the thread's own
     * stack never leaves it (a coroutine's frames are on another, not under its resumer). */
    uint32_t cls = above ? ftr_stack_class(t, above) : 0;
    for (struct ftr_shadow *e = t->shadow_base; e < t->top; e++) {
        uintptr_t w, ret;
        if (!e->slot) continue;
        if (above) {
            uint32_t ec = ftr_stack_class(t, e->slot);
            if (ec == cls ? e->slot <= above : cls == FTR_STACK_OWN) continue;
        }
        if (!slot_word(&h, e->slot, &w) || !ftr_hooked_word(w) || !(ret = ftr_ret_get(e->slot)))
            continue;
        *(uintptr_t *)e->slot = ret;
        if (mark) e->flags |= FTR_SH_UNHOOKED;
    }
}

/* Gives entry e's slot our trampoline again if it holds the address the book has for it (a
 * called-through frame's slot was never ours). */
static void rehook(const struct on_stack *h, const struct ftr_shadow *e)
{
    uintptr_t w;
    if (!e->slot || (e->flags & FTR_SH_THROUGH) || !slot_word(h, e->slot, &w) || ftr_hooked_word(w))
        return;
    if (w == ftr_ret_get(e->slot)) *(uintptr_t *)e->slot = ftr_tramp_for(w);
}

static void rehook_marked(void)
{
    struct ftr_tls *t = &ftr_tls;
    if (!t->shadow_base) return;
    struct on_stack h = stack_here(t);
    for (struct ftr_shadow *e = t->shadow_base; e < t->top; e++) {
        if (!e->slot || !(e->flags & FTR_SH_UNHOOKED)) continue;
        e->flags &= ~FTR_SH_UNHOOKED;
        rehook(&h, e);
    }
}

/* Hooks again the slots of the live entries that hold their real address (after a catch). */
static void rehook_all(void)
{
    struct ftr_tls *t = &ftr_tls;
    if (!t->shadow_base) return;
    struct on_stack h = stack_here(t);
    for (struct ftr_shadow *e = t->shadow_base; e < t->top; e++)
        rehook(&h, e);
}

/* The head of libgcc's struct _Unwind_Context on x86-64 (unwind-dw2.c):
 * DWARF_FRAME_REGISTERS + 1 = 18 register slots, then cfa, then ra. When the
 * personality of the pseudo-frame runs, ra is ftr_tramp_return and cfa is the CFA of the frame
 * below: the hooked slot + 8. Both are checked before cfa is used: another unwinder (LLVM's
 * libunwind) has another layout, and gets the fallback instead. */
struct libgcc_context_head {
    uintptr_t reg[18];
    uintptr_t cfa, ra;
};

/* The personality routine of the pseudo-frame (tramp_x86_64.S): the unwinder is about to read
 * the return address of the frame whose slot holds ftr_tramp_return. Called with libgcc's
 * context by libgcc_s and by a copy linked into the program (-static-libgcc), whose accessors
 * are not ours to call: the context is only read, as described above. */
FTR_HIDDEN int ftr_unwind_personality(int version, int actions, uint64_t exc_class, void *exc,
                                      void *context)
{
    (void)version, (void)actions, (void)exc_class, (void)exc;
    struct ftr_tls *t = &ftr_tls;
    const struct libgcc_context_head *c = context;
    enum { URC_CONTINUE_UNWIND = 8 };
    if (!t->shadow_base) return URC_CONTINUE_UNWIND;
    if (c && ftr_hooked_word(c->ra) && c->cfa > 8 && !(c->cfa & 7)) {
        uintptr_t *slot = (uintptr_t *)(c->cfa - 8);
        /* The unwinder reads *slot next. No address for it (the frame's return is under way:
         * ftr_hook_exit popped the entry, ftr_tramp_return has not stored the address yet):
         * 0 ends the walk there rather than looping on the pseudo-frame. The return itself
         * stores the real address into the slot again, and jumps through it. */
        if (ftr_hooked_word(*slot)) *slot = real_return(t, (uintptr_t)slot);
        return URC_CONTINUE_UNWIND;
    }
    unhook_all(0, 0); /* another unwinder's context: every slot */
    return URC_CONTINUE_UNWIND;
}

/* ---- unwinders that call no personality ---- */
/* While a wrapper runs its walk, a signal handler's backtrace() on the same thread leaves the
 * slots alone (the walk it interrupted has them unhooked; it would hook them again under it). */
static __thread int walking __attribute__((tls_model("initial-exec")));

void ftr_walk_begin(uintptr_t here)
{
    if (walking++) return;
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    unhook_all(here, 1);
}

void ftr_walk_end(void)
{
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    if (walking == 1) rehook_marked();
    __atomic_signal_fence(__ATOMIC_SEQ_CST);
    walking--;
}

typedef int (*backtrace_fn)(void **, int);
static backtrace_fn real_backtrace;

/* libftrace.so from its ELF header to the end of its text (link-time symbols: no look-up) */
extern const char __ehdr_start[] FTR_HIDDEN;
extern const char __etext[] FTR_HIDDEN;

/* A return address into libftrace.so: ftr_tramp_through (the caller side of a called-through
 * function) or a wrapper of ours the program called. The program would not see that frame
 * untraced; a walk goes on to the real caller from there. */
int ftr_walk_ours(uintptr_t ip)
{
    return ip >= (uintptr_t)__ehdr_start && ip < (uintptr_t)__etext;
}

/* Called-through frames above here: each adds one frame of ours to a walk. */
int ftr_walk_through_above(uintptr_t here)
{
    const struct ftr_tls *t = &ftr_tls;
    int n = 0;
    for (const struct ftr_shadow *e = t->shadow_base; e && e < t->top; e++)
        n += e->slot > here && (e->flags & FTR_SH_THROUGH);
    return n;
}

/* walk(buf, n) records return addresses from its caller up (glibc's backtrace(), libunwind's
 * unw_backtrace()): it would start with our own frames and pass those of ftr_tramp_through,
 * which the program must not see, so it is made into a buffer that much longer (on the stack,
 * or mmap'ed when large: no allocation, as the caller may be a crash handler) and the rest
 * copied out. */
int ftr_walk_buffered(int (*walk)(void **, int), void **array, int size)
{
    if (size <= 0) return walk(array, size);
    /* our frames: this one and the wrapper's, each called-through one, and when a signal
     * handler interrupted a hook of ours, that hook's; a walk that fills the buffer and still
     * leaves the caller short is made again with room for as many more */
    enum { ON_STACK = 160, OURS = 2, SPARE = 16 };
    uintptr_t here = (uintptr_t)__builtin_frame_address(0);
    int want = size + OURS + SPARE + ftr_walk_through_above(here), n = 0;
    for (int round = 0; round < 2; round++, want += want) {
        void *small[ON_STACK], **buf = small;
        size_t bytes = 0;
        if (want > ON_STACK) {
            bytes = (size_t)want * sizeof(void *);
            buf = ftr_mmap_zero(bytes);
            if (!buf) return n ? n : walk(array, size); /* no memory: what the walk finds */
        }
        ftr_walk_begin(here);
        int got = walk(buf, want);
        ftr_walk_end();
        n = 0;
        for (int i = 0; i < got && n < size; i++)
            if (!ftr_walk_ours((uintptr_t)buf[i])) array[n++] = buf[i];
        if (bytes) ftr_munmap(buf, bytes);
        if (n == size || got < want) break;
    }
    return n;
}

EXPORT int backtrace(void **array, int size)
{
    return ftr_walk_buffered(NEXT(real_backtrace, "backtrace"), array, size);
}

/* _Unwind_Backtrace() (libgcc_s, when the program calls it itself) */
struct _Unwind_Context;
typedef int (*trace_fn)(struct _Unwind_Context *, void *);
typedef int (*unwind_backtrace_fn)(trace_fn, void *);
typedef uintptr_t (*get_fn)(struct _Unwind_Context *);
static unwind_backtrace_fn real_unwind_backtrace;
static get_fn real_get_ip, real_get_cfa;

struct trace_arg {
    trace_fn fn;
    void *arg;
    get_fn get_ip, get_cfa; /* of the unwinder that runs the walk */
    int skip;               /* our own frame comes first */
    uintptr_t last_cfa;     /* the pseudo-frame again at the same CFA: no progress, stop */
};

static int trace_one(struct _Unwind_Context *ctx, void *p)
{
    struct trace_arg *a = p;
    if (a->skip) {
        a->skip = 0;
        return 0;
    }
    uintptr_t ip = a->get_ip ? a->get_ip(ctx) : 0;
    if (ftr_hooked_word(ip) && a->get_cfa) {
        uintptr_t cfa = a->get_cfa(ctx);
        if (cfa == a->last_cfa) return 5; /* _URC_END_OF_STACK */
        a->last_cfa = cfa;
    } else if (ftr_walk_ours(ip)) {
        return 0; /* ftr_tramp_through's, or a wrapper of ours: walk on */
    }
    return a->fn(ctx, a->arg);
}

EXPORT int _Unwind_Backtrace(trace_fn fn, void *arg)
{
    unwind_backtrace_fn real = NEXT(real_unwind_backtrace, "_Unwind_Backtrace");
    struct trace_arg a = {fn,
                          arg,
                          (get_fn)next_or_null((void **)&real_get_ip, "_Unwind_GetIP"),
                          (get_fn)next_or_null((void **)&real_get_cfa, "_Unwind_GetCFA"),
                          1,
                          0};
    ftr_walk_begin((uintptr_t)__builtin_frame_address(0));
    int rc = real(trace_one, &a);
    ftr_walk_end();
    return rc;
}

/* ---- C++ exceptions (libstdc++, libc++abi) ---- */
typedef void *(*begin_catch_fn)(void *);
static begin_catch_fn real_begin_catch;
struct cxa_eh_globals {
    void *caught;
    unsigned int uncaught;
};
typedef struct cxa_eh_globals *(*get_globals_fn)(void);
static get_globals_fn real_get_globals;

/* Called from the landing pad of the catching function: every frame below the caller's stack
 * pointer was unwound by the exception, but this call's own when it is a traced library call
 * (its return address hooked: the entry hook closed the dead frames at that slot already).
 * The survivors' slots are hooked again where a walk left them unhooked (an unwinder that was
 * not libgcc's) - but not while another exception is still unwinding (this catch is in a
 * destructor it runs): its walk goes on above. */
EXPORT void *__cxa_begin_catch(void *exc)
{
    uintptr_t own = OWN_SLOT();
    ftr_close_frames_below(ftr_hooked_word(*(uintptr_t *)own) ? own : own + sizeof(uintptr_t), 0);
    begin_catch_fn real = NEXT(real_begin_catch, "__cxa_begin_catch");
    get_globals_fn get_globals =
        (get_globals_fn)next_or_null((void **)&real_get_globals, "__cxa_get_globals");
    struct cxa_eh_globals *g = get_globals ? get_globals() : NULL;
    if (g && g->uncaught <= 1) rehook_all();
    return real(exc);
}

/* ---- threads ---- */
typedef void (*pthread_exit_fn)(void *) __attribute__((noreturn));
static pthread_exit_fn real_pthread_exit;

/* pthread_exit() unwinds the thread's stack with the forced unwinder (which the pseudo-frame
 * leads through the hooked slots). The frames are not closed here: cancellation cleanup
 * handlers still run in them (glibc jumps back into the frame that pushed the handler), and
 * calls they make nest there; what is still open when the thread ends is closed by the
 * thread's destructor. */
int ftr_main_pthread_exited;

EXPORT __attribute__((noreturn)) void pthread_exit(void *retval)
{
    if ((uint32_t)syscall(SYS_gettid) == ftr_getpid()) {
        ftr_main_pthread_exited = 1; /* glibc counts it out */
        ftr_orphan_watch();
    }
    unhook_all(0, 0);
    NEXT(real_pthread_exit, "pthread_exit")(retval);
}
