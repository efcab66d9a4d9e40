/*
 * tracer.h - internal interfaces of libftrace.so. Shall only be used by modules within preload/.
 *
 * The modules are in three folders over the global state (state.h, state.c):
 *
 * hot/, what runs at every traced call
 *   tramp_x86_64.S  entry/return trampolines, the exported __fentry__/mcount, ftr_call_saving()
 *   hooks.c         the hot path: entry and exit hooks (general registers only, no libc)
 *   retaddr.c       the book of real return addresses, kept by stack slot (retaddr.h)
 *   stacks.c        which stack an address is on: the thread's own, a sigaltstack, a
 *                   makecontext() coroutine stack (ucontext_x86_64.S wraps makecontext)
 *   park.c          the shadow entries of suspended coroutines, kept with their stack (park.h)
 *   switch.c, handlers.c, capture.c: coroutine switches, the signal handlers running, values
 * interpose/, the C library's, pthread's and the loader's functions wrapped
 *   thread_start.c  pthread_create() wrapped: a thread is set up before its start routine;
 *                   clone() wrapped: a child sharing its creator's TLS is set aside
 *   dlwrap.c        dlopen()/dlclose(): patch or forget modules under the registry lock
 *   dlsearch.c      dlopen()'s caller's library search path, redone on its behalf
 *   unwind.c        longjmp & co close frames; backtrace() and personalities see real returns
 *   unwind_libunwind.c  the libunwind project's unw_step() and unw_backtrace(), corrected
 *   unwind_fde.c    libgcc's FDE lookup answers for stubs (unwind_fde_x86_64.S)
 *   sigguard.c, sigview.c, signotify.c, fdguard.c, process.c: signals, descriptors, processes
 * runtime/, start, settings, control, modules, the region, writer and recorder
 *   init.c          constructor/destructor, configuration, clocks, process end
 *   threads.c       per-thread state, the chunk pool, hand-off of full chunks to the reader
 *                   (lock-free: a first hook may come in a handler that interrupted malloc)
 *   names.c         threads' names, followed through the renaming calls (prctl, setname)
 *   region.c        the memory chunks live in: a memfd of the process, shared (region.h,
 *                   chunk.h); drain.c reads it (drain.h)
 *   recorder.c      the recorder process, which writes the session's file (recorder.h);
 *                   recorder_client.c, the process's side
 *   writer.c        the writer thread, where there is no recorder, and the writer's interface
 *   ctlsig.c        signals sent to the control server's thread alone
 *   modules.c       the module registry: sites, stubs, patching (alone / live / parked + live)
 *   libcalls.c      library calls: a traced module's GOT slots given stubs (libcalls.h);
 *                   libc_protos.c, what --auto-args records for the common libc functions
 *   dynsym.c        a symbol of a loaded object, looked up without the loader's lock
 *   alloc.c         the tracer's own heap: malloc & co., hidden, on memory it maps (alloc.h)
 *   libc_own.c      qsort, setenv, asprintf done with that heap (glibc's use the program's)
 *   libelf_error.c  the error state of the libelf linked in statically
 *   settings.c, values.c, control.c, through.c, nosites.c, output.c, summary.c: the rest
 */
#ifndef FTR_TRACER_H
#define FTR_TRACER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "chunk.h"
#include "ftr_format.h"

#include "state.h"

/* hooks.c: calls not traced because a signal handler ran them during a coroutine switch (also
 * counted in the threads' overruns) */
extern _Atomic uint64_t ftr_switch_missed FTR_HIDDEN;
/* through.c: ftr_site_body[index] = where. @return 0 when it cannot be written */
int ftr_site_body_set(uint32_t index, uintptr_t where) FTR_HIDDEN;

/* through.c: which sites of a scanned module are called through (sets ftr_site.through;
 * @return how many), and the body table entry of one before its stub is used (@return 0 when
 * it cannot have one: then it keeps the return hook) */
struct ftr_module;
struct ftr_site;
size_t ftr_through_decide(struct ftr_module *m) FTR_HIDDEN;
int ftr_through_publish(const struct ftr_site *s) FTR_HIDDEN;
/* through.c: the module's file, opened as elf, is the build the scan read */
struct Elf;
int ftr_module_same_build(struct Elf *elf, const struct ftr_module *m) FTR_HIDDEN;

/* tramp_x86_64.S */
void ftr_tramp_fentry(void) FTR_HIDDEN;       /* reached from stubs of sites before the prologue */
void ftr_tramp_mcount(void) FTR_HIDDEN;       /* reached from stubs of sites after the prologue */
void ftr_tramp_fentry_chain(void) FTR_HIDDEN; /* ... of sites after a push %r10 at the start */
void ftr_tramp_return(void) FTR_HIDDEN;       /* hooked return addresses point here */
void ftr_tramp_hooked(void) FTR_HIDDEN;       /* the pseudo-frame: the byte before it */
void ftr_tramp_sigret(void) FTR_HIDDEN;       /* a signal handler's: it returns to the restorer */
void ftr_tramp_sighooked(void) FTR_HIDDEN;    /* its pseudo-frame: the byte before it */
void ftr_tramp_through(void) FTR_HIDDEN;      /* reached from stubs of call-through sites ... */
void ftr_tramp_through_end(void) FTR_HIDDEN;  /* ... and ends here (unwind.c) */
void ftr_tramp_libcall(void) FTR_HIDDEN;      /* reached from the stubs of library calls */
/* Is w, read from a return-address slot, one of our return trampolines (a hooked return)? */
static inline int ftr_hooked_word(uintptr_t w)
{
    return w == (uintptr_t)ftr_tramp_return || w == (uintptr_t)ftr_tramp_sigret;
}
/* The trampoline a hooked slot whose real return address is ret holds. */
static inline uintptr_t ftr_tramp_for(uintptr_t ret)
{
    return ret == ftr_hot.sig_restorer ? (uintptr_t)ftr_tramp_sigret : (uintptr_t)ftr_tramp_return;
}
/* Calls fn(arg) with every vector/x87 register saved (xsave): lets general-register-only code
 * call into libc. */
void ftr_call_saving(void (*fn)(void *), void *arg) FTR_HIDDEN;
extern uint32_t ftr_xsave_size FTR_HIDDEN;     /* set by ftr_xsave_init() */
extern uint8_t ftr_have_xsavec FTR_HIDDEN;     /* XSAVEC: only components in use, compacted */
extern uint64_t ftr_slow_area_size FTR_HIDDEN; /* the xsave image + the slow-path stack */
/* this thread's slow-path area (NULL until its first slow path) and its nesting count */
extern __thread void *ftr_slow_area __attribute__((tls_model("initial-exec"))) FTR_HIDDEN;
extern __thread uint32_t ftr_slow_busy __attribute__((tls_model("initial-exec"))) FTR_HIDDEN;
/* a SIGTRAP sent while the thread was on its slow-path area, raised again after it */
extern __thread uint32_t ftr_slow_deferred_trap __attribute__((tls_model("initial-exec")))
FTR_HIDDEN;
void ftr_slow_area_free(void) FTR_HIDDEN;    /* at the thread's end */
void ftr_slow_nothing(void *arg) FTR_HIDDEN; /* for ftr_call_saving(): maps the area, no more */
void ftr_xsave_init(void) FTR_HIDDEN;

/* hooks.c (called from the trampolines) */
/* regs: the registers the entry trampoline saved (values.h, FTR_REG_*); rv: the return value
 * the exit trampoline saved (rax at rv[0], rdx at rv[-1]) */
void ftr_hook_entry(uint32_t site, uintptr_t *slot, const uintptr_t *regs) FTR_HIDDEN;
uintptr_t ftr_hook_exit(uintptr_t sp, const uintptr_t *rv) FTR_HIDDEN;
uintptr_t ftr_hook_sigexit(uintptr_t sp, const uintptr_t *rv) FTR_HIDDEN; /* a handler's */
/* Call-through: where the body starts and whether to call it (1) or jump to it (0) */
struct ftr_through {
    uintptr_t body, call;
};
struct ftr_through ftr_hook_through_entry(uint32_t site, uintptr_t *slot,
                                          const uintptr_t *regs) FTR_HIDDEN;
void ftr_hook_through_exit(uintptr_t *slot, const uintptr_t *rv) FTR_HIDDEN;
/* A library call's entry (slot: its return address): @return the function to go on to */
uintptr_t ftr_hook_libcall(uint32_t site, uintptr_t *slot, const uintptr_t *regs) FTR_HIDDEN;
/* For the unwind wrappers (unwind.c): close, as unwound now, this thread's frames whose hooked
 * slot lies below sp on the same stack (or at it, when inclusive); or every frame. */
void ftr_close_frames_below(uintptr_t sp, int inclusive) FTR_HIDDEN;
void ftr_close_all_frames(void) FTR_HIDDEN;
/* For walks of this thread's stack (unwind.c, unwind_libunwind.c): the real return address of
 * the frame hooked at slot (0: none); a return address into libftrace.so (ftr_tramp_through, a
 * wrapper of ours: a frame the program must not see); how many called-through frames lie
 * above here; around a walk that reads return addresses from the stack, every hooked slot
 * above here given its real address (a walk nested in a signal handler's leaves them to the
 * outer one); and a backtrace()-like walk into array without our frames, as untraced. */
uintptr_t ftr_walk_real_return(uintptr_t slot) FTR_HIDDEN;
int ftr_walk_ours(uintptr_t ip) FTR_HIDDEN;
int ftr_walk_through_above(uintptr_t here) FTR_HIDDEN;
void ftr_walk_begin(uintptr_t here) FTR_HIDDEN;
void ftr_walk_end(void) FTR_HIDDEN;
int ftr_walk_buffered(int (*walk)(void **, int), void **array, int size) FTR_HIDDEN;
/* unwind_libunwind.c: looks the libunwind project's functions up, where no signal can be inside
 * the dynamic linker's lock (the constructor, after a dlopen()) */
void ftr_libunwind_resolve(void) FTR_HIDDEN;
/* unwind_fde.c: generated code [lo, lo+len) (page-aligned) gets unwind information for libgcc,
 * or loses it; the next _Unwind_Find_FDE() is looked up (the constructor, after a dlopen()) */
void ftr_unwind_code_add(const void *lo, size_t len) FTR_HIDDEN;
void ftr_unwind_code_remove(const void *lo) FTR_HIDDEN;
void ftr_unwind_fde_resolve(void) FTR_HIDDEN;
/* dynsym.c: the address of a symbol that object m defines, read from its dynamic symbol table
 * without a lock (NULL: not defined there, or an IFUNC) */
struct link_map;
void *ftr_dynsym(const struct link_map *m, const char *name) FTR_HIDDEN;
/* the version index (.gnu.version) of that definition: -1 the object has no versions, -2 no
 * definition */
int ftr_dynsym_version(const struct link_map *m, const char *name) FTR_HIDDEN;
/* the first definition of name in the loaded objects but ours, in load order (takes the
 * loader's lock: dl_iterate_phdr) */
void *ftr_dynsym_anywhere(const char *name) FTR_HIDDEN;
/* dlsym(RTLD_NEXT, name) only where some object defines name (an IFUNC counts as none): a
 * dlsym() that fails leaves an error string that the next dl call frees through the program's
 * free(), which a preloaded wrapper that calls dlsym() from free() cannot survive */
void *ftr_next_sym(const char *name) FTR_HIDDEN;
/* In a fork child: the frames inherited from the parent are entered again, now, in the
 * child's own stream, so that its tree nests and closes. */
void ftr_reopen_frames(void) FTR_HIDDEN;
void ftr_record_special(unsigned subtype, uint32_t arg) FTR_HIDDEN; /* FTR_SP_* event, now */
/* The trace clock: the TSC, or where it cannot be trusted (init.c), CLOCK_MONOTONIC through a
 * raw system call (no vDSO: no libc, no vector registers on the hot path). */
/* The kernel's pids, never through libc's getpid()/getppid(): a program that defines its own
 * comes first in the symbol search, and the tracer would run it (sigguard.c and patcher/stw.c
 * do the same with syscall() directly). */
static inline uint32_t ftr_getpid(void)
{
    return (uint32_t)syscall(SYS_getpid);
}
/* This is the process tracing started in (ftr_g.pid), not a vfork child running on its memory.
 * A getpid() that a sandbox's seccomp filter fails (-1) answers yes: a process that forbids
 * itself getpid() was taken for another one, and its trace was never ended (ends.c sandbox-*);
 * a vfork child of such a process has the filter too, and execs or _exits at once. */
/* vfork_x86_64.S: vfork children running now (they share our memory) */
extern atomic_int ftr_vforks FTR_HIDDEN;
/* This process, not a vfork child on its memory: asked of the kernel only while a vfork child
 * may run (a sandbox may forbid, or kill for, getpid(); failed, -1, it counts as ours) */
static inline int ftr_own_process(void)
{
    if (!atomic_load_explicit(&ftr_vforks, memory_order_acquire)) return 1;
    long pid = syscall(SYS_getpid);
    return pid < 0 || (uint32_t)pid == ftr_g.pid;
}
static inline uint32_t ftr_getppid(void)
{
    return (uint32_t)syscall(SYS_getppid);
}
static inline uint64_t ftr_mono_ns(void)
{
    struct {
        long sec, nsec;
    } ts = {0, 0};
    long rc;
    __asm__ volatile("syscall"
                     : "=a"(rc)
                     : "a"(228 /* clock_gettime */), "D"(1 /* CLOCK_MONOTONIC */), "S"(&ts)
                     : "rcx", "r11", "memory");
    (void)rc;
    return (uint64_t)ts.sec * 1000000000u + (uint64_t)ts.nsec;
}
static inline uint64_t ftr_rdtsc(void)
{
    if (__builtin_expect(ftr_hot.clock_mono, 0)) return ftr_mono_ns();
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
}

/* A thread's record (threads.c): mapped once with its shadow stack, never
 * unlinked from the list of records, reused by a later thread once the writer is done. */
struct ftr_thread {
    struct ftr_thread *next; /* list of every record */
    atomic_int state;        /* free, claimed, live, ended, reapable (threads.c) */
    atomic_int reading;      /* the writer is reading tls: the thread's end waits */
    uint32_t tid;
    int ended;                    /* the thread ended; the writer frees it after the last flush */
    int safe_start;               /* set up by the start wrapper (pthread_create), not at a hook */
    struct ftr_tls *tls;          /* that thread's TLS block (its address is valid process-wide) */
    struct ftr_chunk *cur;        /* chunk being filled (atomic: the writer reads it) */
    struct ftr_chunk *spare;      /* the next one, ready: a full chunk is replaced without a lock */
    struct ftr_chunk *held;       /* full, but a record interrupted by a signal is still to be
                                     written into it: handed to the writer at the next chance; a
                                     chain (held_next), newest first: the next switch may come in
                                     another handler before that chance */
    uint64_t next_seq;            /* seq0 of this thread's next chunk */
    struct ftr_shadow *shadow;    /* in the record's mapping */
    uintptr_t stack_lo, stack_hi; /* from the start wrapper, if it knew them (else 0) */
    size_t stack_size;            /* the start wrapper's size hint (0: the default) */
    void *(*start_fn)(void *);    /* the program's start routine and argument */
    void *start_arg;
    pthread_t pth; /* the thread's pthread_t: set by its creator, and at its setup */
    char name[16]; /* as it was named last (names.c) */
    int32_t slot;  /* its slot in the region (region.h), -1: none */
    /* the thread's lists that its TLS points to (kept out of the initial-exec TLS block, which
     * a library loaded into a running process must fit in: docs/design.md, "Attaching") */
    struct ftr_sig_frame sig[FTR_SIG_NEST];
    uint32_t chain[FTR_CHAIN_MAX];
};

/* First hook in a thread (reserved: NULL), or the start wrapper before the start routine
 * (reserved: the record it took in the creating thread). Any context: mmap only, no lock. */
void ftr_thread_init_slow(void *reserved) FTR_HIDDEN;
struct ftr_thread *ftr_thread_reserve(void) FTR_HIDDEN; /* NULL: not tracing (yet) */
/* thread_start.c: pthread_create() for our own threads (never traced, nothing recorded; every
 * signal blocked in them from their first instruction; detached or joinable) */
int ftr_create_own_thread(pthread_t *th, int detached, void *(*fn)(void *), void *arg) FTR_HIDDEN;
/* thread_start.c: threads made so far through pthread_create() and clone(CLONE_VM) */
unsigned ftr_threads_made(void) FTR_HIDDEN;
void ftr_thread_unreserve(struct ftr_thread *r) FTR_HIDDEN;
/* the record of a live (or reserved) thread, or NULL */
struct ftr_thread *ftr_thread_of(pthread_t th) FTR_HIDDEN;
/* names.c: threads' names, followed without asking the kernel on a hook's path */
void ftr_names_init(void) FTR_HIDDEN;                    /* constructor: the main thread's */
void ftr_name_for_new_thread(char name[16]) FTR_HIDDEN;  /* pthread_create(), in the creator */
void ftr_name_at_setup(struct ftr_thread *r) FTR_HIDDEN; /* setup: unless its creator gave one */
void ftr_chunk_full_slow(void *unused) FTR_HIDDEN;       /* current chunk is full */
void ftr_thread_off(void) FTR_HIDDEN;                    /* this thread stops recording */
/* This thread is out of tracing for a while, neither recording nor set up at a hook (our own
 * thread creation, whose glibc calls the program's calloc; a vfork, whose child runs on this
 * thread's TLS): @return its state, which ftr_thread_unpause() gives back. */
uint32_t ftr_thread_pause(void) FTR_HIDDEN;
void ftr_thread_unpause(uint32_t state) FTR_HIDDEN;
int ftr_threads_init(void) FTR_HIDDEN;
void ftr_threads_prepare_fork(void) FTR_HIDDEN;
void ftr_threads_parent_fork(void) FTR_HIDDEN;
void ftr_threads_child_fork(void) FTR_HIDDEN;
void ftr_release_chunk(struct ftr_chunk *c) FTR_HIDDEN; /* back to the pool, zeroed */
/* threads that ended without a word (a raw exit): their chunks to the reader, records freed */
void ftr_threads_housekeep(void) FTR_HIDDEN;
void ftr_thread_name_publish(struct ftr_thread *r) FTR_HIDDEN; /* r->name into its slot */
/* events dropped, and calls not hooked (shadow stack full), every thread so far */
uint64_t ftr_lost_events(void) FTR_HIDDEN;
uint64_t ftr_lost_calls(void) FTR_HIDDEN; /* of them, calls whose ENTRY was dropped */
uint64_t ftr_overrun_calls(void) FTR_HIDDEN;
void ftr_wake_writer(void) FTR_HIDDEN;

/* writer.c */
int ftr_writer_start(char *err, size_t errlen) FTR_HIDDEN;
void ftr_writer_reset(int after_fork) FTR_HIDDEN;
/* A fork child's image begins with its first news; describe() then gives its modules */
void ftr_writer_lazy_child(void (*describe)(struct ftr_buf *out)) FTR_HIDDEN;
void ftr_writer_stop(const struct ftr_end_info *end) FTR_HIDDEN; /* final flush, END chunk */
void ftr_writer_stop_from_signal(const struct ftr_end_info *end) FTR_HIDDEN;
int ftr_writer_failed(void) FTR_HIDDEN;
uint64_t ftr_writer_dropped(void) FTR_HIDDEN;
void ftr_writer_add_meta(const struct ftr_buf *chunks) FTR_HIDDEN; /* pre-encoded chunks */
void ftr_writer_drop_meta(void) FTR_HIDDEN; /* forget those not written yet */
/* a MARK chunk (enum ftr_mark_what): ftrace-ctl changed something at tsc */
void ftr_writer_mark(unsigned what, uint64_t tsc, uint64_t value, const char *text) FTR_HIDDEN;
extern uint32_t ftr_writer_tid FTR_HIDDEN; /* 0: none (the recorder writes) */
extern uint32_t ftr_writer_gen FTR_HIDDEN; /* moves at every ftr_writer_start() */
uint64_t ftr_writer_bytes(void) FTR_HIDDEN;
uint64_t ftr_writer_events(void) FTR_HIDDEN;
uint64_t ftr_writer_calls(void) FTR_HIDDEN;
uint64_t ftr_writer_passes(void) FTR_HIDDEN;   /* partial-flush passes done so far */
uint64_t ftr_writer_end_lost(void) FTR_HIDDEN; /* events lost, once the END chunk is written */
uint64_t ftr_writer_end_lost_calls(void) FTR_HIDDEN; /* of them, calls whose ENTRY was lost */

/* The tracer's own memory for large or temporary arrays: anonymous mmap, zeroed; never the
 * program's allocator. */
static inline void *ftr_mmap_zero(size_t bytes)
{
    void *p =
        mmap(NULL, bytes ? bytes : 1, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    return p == MAP_FAILED ? NULL : p;
}
static inline void ftr_munmap(void *p, size_t bytes)
{
    if (p) munmap(p, bytes ? bytes : 1);
}

/* dlsearch.c: file resolved along caller's own library search path (into out), or file */
const char *ftr_dl_caller_search(const void *caller, const char *file, char *out,
                                 size_t len) FTR_HIDDEN;

/* modules.c */
size_t ftr_modules_scan(void) FTR_HIDDEN; /* finds the loaded modules' sites; @return count */
void ftr_modules_skipped_names(char *out, size_t len) FTR_HIDDEN; /* "a, b, ..." */
int ftr_modules_patch(char *err, size_t errlen) FTR_HIDDEN; /* stubs + rewrite (alone or live) */
void ftr_modules_describe(struct ftr_buf *out) FTR_HIDDEN;  /* MODULE+SITES chunks, again */
/* after dlopen / dlclose; fresh_alone: the modules found now were loaded while no thread was
 * made, so no other thread can run their text yet: written alone where live is refused */
void ftr_modules_rescan(int fresh_alone) FTR_HIDDEN;
void ftr_modules_say_unmatched(const char *expr) FTR_HIDDEN; /* filter selected nothing */
void ftr_modules_values_refresh(void) FTR_HIDDEN; /* values.c: read the DWARF it now needs */
/* rewrites that waited for a thread seen running with SIGTRAP blocked, and the ms waited */
void ftr_modules_blocked_waits(unsigned *rewrites, unsigned *ms) FTR_HIDDEN;

/* settings.c, at start: parse the FTRACE_* graph knobs and filter. @return 0 or -1 (err) */
int ftr_settings_init(char *err, size_t errlen) FTR_HIDDEN;
struct ftr_site;
/* the state a site should be in (enum ftr_site_state); also sets its per-site flags */
unsigned ftr_site_wanted(const char *module, int is_main, const struct ftr_site *s) FTR_HIDDEN;
size_t ftr_settings_nearest(const char *const *names, size_t n, const char **out,
                            size_t k) FTR_HIDDEN;
const char *ftr_settings_filter_expr(void) FTR_HIDDEN;
int ftr_settings_enabled(void) FTR_HIDDEN;

/* settings.c: what can change while the process runs (ftrace-ctl, through control.c). Each
 * returns 0, or -1 with a one-line message in err. */
int ftr_set_recording(int on, char *err, size_t errlen) FTR_HIDDEN; /* off: all NOPs */
int ftr_set_filter(const char *expr, char *err, size_t errlen) FTR_HIDDEN;
int ftr_set_libcall(int on, char *err, size_t errlen) FTR_HIDDEN;        /* library calls on/off */
int ftr_set_depth(unsigned depth, char *err, size_t errlen) FTR_HIDDEN;  /* 0: unlimited */
int ftr_set_threshold(uint64_t ns, char *err, size_t errlen) FTR_HIDDEN; /* 0: all */
void ftr_status(struct ftr_buf *out) FTR_HIDDEN; /* "key: value" lines (ftrace-ctl status) */

/* control.c: the control server, listening from the start of each traced process */
void ftr_control_start(void) FTR_HIDDEN;   /* constructor: start the server thread */
void ftr_control_poll(void) FTR_HIDDEN;    /* writer thread: start it if it is to be (a child) */
void ftr_control_cleanup(void) FTR_HIDDEN; /* ftr_finish: remove the socket, stop serving */
void ftr_control_cleanup_fast(void) FTR_HIDDEN; /* the same, with no lock and no wait (_exit) */
/* fork child: forget the parent's server; park: make the child's own, parked until wanted */
void ftr_control_child_fork(int park) FTR_HIDDEN;
/* fork child: the eventfd that wakes its parked server (make 1: made now if need be; 0: as
 * it is; -1: closed), for the recorder (the child's HELLO carries it); -1 if none */
int ftr_control_child_wake_fd(int make) FTR_HIDDEN;
void ftr_control_wake_parked(void) FTR_HIDDEN; /* it is wanted: the writer thread's word */

/* fdguard.c: the writer holds this lock around its write()s, dup2() onto our number takes it */
void ftr_fd_lock(void) FTR_HIDDEN;
void ftr_fd_unlock(void) FTR_HIDDEN;
void ftr_fd_lock_reset(void) FTR_HIDDEN; /* fork child */
/* For fork (init.c): 1 locks, 0 unlocks, -1 makes the lock new (in the child). */
void ftr_settings_lock(int how) FTR_HIDDEN;
void ftr_modules_lock(int how) FTR_HIDDEN;
void ftr_writer_lock(int how) FTR_HIDDEN;
/* Further descriptors of ours (/proc/PID/stat): *fd is guarded like the trace file's, and
 * updated (under the lock) when a dup2() onto it moves it. At most 6. */
void ftr_fd_protect(int *fd) FTR_HIDDEN;
/* fd moved to a number above 512, out of the way of the program's own (the low one closed); fd
 * itself where no higher number can be had; -1 for -1 */
int ftr_fd_high(int fd) FTR_HIDDEN;
extern atomic_uint ftr_fd_moves FTR_HIDDEN; /* odd while one of ours is moved (region.c) */
void ftr_fd_unprotect(int *fd) FTR_HIDDEN;

/* init.c */
void ftr_msg(const char *fmt, ...) FTR_HIDDEN __attribute__((format(printf, 1, 2)));
/* The mapping of /proc/self/maps that holds addr: [*lo, *hi), and its PROT_* in *prot (when
 * not NULL; -1: unreadable). Raw system calls, a buffer on the stack (stacks.c). @return 0, or
 * -1: no such mapping, or the file cannot be read. */
int ftr_mapping_of(uintptr_t addr, uintptr_t *lo, uintptr_t *hi, int *prot) FTR_HIDDEN;
/* The image ends (exit, exec): stop recording, flush, END chunk. @return 1 if it did. */
int ftr_finish(uint32_t how, int code) FTR_HIDDEN;
void ftr_resume(void) FTR_HIDDEN; /* after an exec that failed */
/* The writer's questions about the end of the program: is every thread of the program gone
 * (*leader_gone: the main thread is; keep asking often)? If so, the END to write (the image is
 * marked ended), and then exit(0) with the program's exit handlers, in the writer thread. */
int ftr_program_gone(int *leader_gone) FTR_HIDDEN;
/* the same, from fd (/proc/<pid>/stat) and task (/proc/<pid>/task) */
int ftr_program_gone_read(int fd, int task, int *leader_gone) FTR_HIDDEN;
/* What ftr_program_gone() reads: descriptors of this process's /proc stat and task list,
 * opened (open_it) before a thread of ours that asks starts (the writer thread, the orphan
 * watcher); a fork child's copies of its parent's are closed either way */
void ftr_program_watch(int open_it) FTR_HIDDEN;
/* The orphan watcher could not open them (a chroot() without /proc): the control server
 * looks in its stead, and says it saw the program gone (_seen_gone) for the watcher to end it */
int ftr_orphan_watch_blind(void) FTR_HIDDEN;
void ftr_orphan_seen_gone(void) FTR_HIDDEN;
const struct ftr_end_info *ftr_end_orphaned(void) FTR_HIDDEN;
void ftr_orphan_exit(void) FTR_HIDDEN __attribute__((noreturn));
/* ctlsig.c: signals sent to one of our threads alone (the control server, the watcher of a
 * main thread's pthread_exit()), taken through a signalfd and acted on as the kernel would
 * have. Per thread: _open once (in_program_table: the watcher's, whose descriptors the guard
 * keeps; the server has a table of its own), then poll ftr_ctlsig_fd() (the guard may have
 * moved it) and _take when it is readable, _refresh at least once a second. */
int ftr_ctlsig_open(int in_program_table) FTR_HIDDEN; /* @return the signalfd, -1 */
int ftr_ctlsig_fd(void) FTR_HIDDEN;
void ftr_ctlsig_refresh(void) FTR_HIDDEN; /* the mask again: what the process has pending */
void ftr_ctlsig_take(void) FTR_HIDDEN;
void ftr_ctlsig_close(void) FTR_HIDDEN;
void ftr_orphan_watch(void) FTR_HIDDEN;        /* main called pthread_exit(): watch for the end */
extern int ftr_main_pthread_exited FTR_HIDDEN; /* unwind.c: main left by pthread_exit() */
void ftr_child_after_fork(void) FTR_HIDDEN;    /* a fork child traces on, as its own process */
extern int ftr_is_root FTR_HIDDEN;             /* this process created the trace file */

/* output.c: the trace file's descriptor (ftr_g.fd) and the lock that says this process writes
 * it: opened (@return the descriptor, or -1 with errno), locked before the writer starts, made
 * the fork child's own (or let go when the child will not write), released after the END of
 * an image that did not exec */
int ftr_output_open(void) FTR_HIDDEN;
void ftr_output_lock(void) FTR_HIDDEN;
void ftr_output_fork_child(int tracing) FTR_HIDDEN;
void ftr_output_release(void) FTR_HIDDEN;

/* summary.c: the run's one summary line. _print at an image's end (not an exec's); at an exec,
 * _exec: NULL (printed now, or not this image's to print), or the FTR_ENV_CARRY entry for the
 * new environment when the next image will load us (next_loads); _resume when that exec failed;
 * _take_carried in the constructor, first; _untraced at its end when this image does not trace. */
void ftr_summary_print(void) FTR_HIDDEN;
const char *ftr_summary_exec(int next_loads) FTR_HIDDEN;
void ftr_summary_resume(void) FTR_HIDDEN;
void ftr_summary_take_carried(void) FTR_HIDDEN;
void ftr_summary_untraced(void) FTR_HIDDEN;
/* May this image print the run's line (so its end needs the recorder's counts)? A fork child
 * of the session, or a program it ran, never does. */
int ftr_summary_may_say(void) FTR_HIDDEN;

/* process.c: the environment every child and exec'd image must carry; _restore, at the end of
 * the constructor: takes out what an exec or spawn wrapper added (FTR_ENV_ADDED) */
void ftr_env_snapshot(void) FTR_HIDDEN;
/* a session variable (enum ftr_env_id) set for this image and every one it starts */
void ftr_env_session_set(int id, const char *value) FTR_HIDDEN;
void ftr_env_restore(void) FTR_HIDDEN;

/* nosites.c: the files this session found without sites (FTRACE_NOSITES). _init in the
 * constructor, before the modules are scanned; _known: is path's file one (its identity in
 * *id either way, for _add); _add once a scan found none in it; _publish after the
 * constructor's scan, for the images this one starts. Under the modules' lock. */
struct ftr_file_id {
    unsigned long dev, ino, size, mtime;
};
void ftr_nosites_init(void) FTR_HIDDEN;
int ftr_nosites_known(const char *path, struct ftr_file_id *id) FTR_HIDDEN;
void ftr_nosites_add(const struct ftr_file_id *id) FTR_HIDDEN;
void ftr_nosites_publish(void) FTR_HIDDEN;
/* process.c, for vfork_x86_64.S (which pauses the calling thread across vfork()) */
void ftr_vfork_errno(int e) FTR_HIDDEN;

#endif /* FTR_TRACER_H */
