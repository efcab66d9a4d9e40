/*
 * state.h - the global state of libftrace.so, at the bottom of its modules: the thread's
 * initial-exec TLS block every hook touches (struct ftr_tls), and the process's, in three parts
 * (what the hooks read on every event, the configuration, the process and its counters).
 * Defined in state.c; each field says which module writes it.
 */
#ifndef FTR_STATE_H
#define FTR_STATE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#define FTR_HIDDEN __attribute__((visibility("hidden")))
#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)

struct ftr_rec;

/* ---- per-thread state: one initial-exec TLS block, touched by every hook ---- */
struct ftr_retaddr;
struct ftr_shadow {
    uintptr_t ret;  /* the caller's real return address */
    uintptr_t slot; /* where it was on the stack (to resynchronise after longjmp & co) */
    uint32_t site;
    uint32_t flags;           /* FTR_SH_* */
    uint64_t tsc;             /* entry time (for the threshold) */
    struct ftr_retaddr *book; /* the book's entry of slot, where this entry hooked it (retaddr.h;
                                 NULL: called through, or a tail call's) */
};
#define FTR_SH_RECORDED 1u      /* its entry was recorded: its exit will be too */
#define FTR_SH_TRIGGER 2u       /* a --graph-function root */
#define FTR_SH_NOTRACE 4u       /* a --notrace function: its subtree is hidden */
#define FTR_SH_GONE 0x80000000u /* hooks.c, exit_slow: closed, to be dropped */
#define FTR_SH_UNHOOKED 8u      /* unwind.c: slot given back its real address during a walk */
#define FTR_SH_SUSPENDED                                                                           \
    16u                    /* a coroutine's frame, left by a switch: out of the recorded           \
                              stream until its stack is resumed (hooks.c) */
#define FTR_SH_THROUGH 32u /* called through (ftr_tramp_through): its slot is not hooked */
#define FTR_SH_UNCOUNTED                                                                           \
    64u                        /* hooks.c: a suspended coroutine's --graph-function/--notrace      \
                                  frame, out of the thread's counters until resumed */
#define FTR_SH_RETVAL 128u     /* its return value is recorded (values.h) */
#define FTR_SH_REWINDING 256u  /* hooks.c, rewind_short: its ENTRY (t->rw_rec) may be taken back */
#define FTR_SH_TAKEN_BACK 512u /* hooks.c, rewind_short: its ENTRY was taken back */

/* per-site flags (ftr_site_flags[site]) */
#define FTR_SF_TRIGGER 1u
#define FTR_SF_NOTRACE 2u
#define FTR_SITE_FLAGS_MAX (1u << 24)

enum ftr_tstate {
    FTR_T_NEW = 0,   /* no hook has run in this thread yet */
    FTR_T_ACTIVE,    /* recording */
    FTR_T_OFF,       /* never records: the writer thread, a thread past its end, a failed init */
    FTR_T_SWITCHING, /* hooks.c: a coroutine switch moves its shadow entries (a signal handler's
                        hooks trace nothing meanwhile) */
};

struct ftr_chunk;
struct ftr_thread;
#define FTR_SIG_NEST 32u
#define FTR_CHAIN_MAX 31u
struct ftr_sig_frame {
    uintptr_t slot;   /* its return address slot; bit 0 set: it interrupted a hook */
    uintptr_t sp, ip; /* the context it interrupted, as its signal frame held it at its entry */
};

struct ftr_tls {
    struct ftr_rec *pos;            /* next free record in the current chunk */
    struct ftr_rec *end;            /* end of the current chunk */
    struct ftr_shadow *top;         /* next free shadow entry */
    struct ftr_shadow *shadow_base; /* shadow stack bounds */
    struct ftr_shadow *shadow_end;
    uint32_t state;               /* enum ftr_tstate */
    uint32_t in_slow;             /* inside the slow path: nested hooks do not record */
    uintptr_t hook_sp;            /* a hook runs just below this stack address (0: none), ... */
    struct ftr_shadow *building;  /* ... building this entry: a jump past hook_sp (siglongjmp out
                                     of a handler that interrupted the hook) abandons them */
    struct ftr_shadow *exiting;   /* ... or popping this one (its EXIT being recorded) */
    struct ftr_rec *inflight;     /* the record slot the hook reserved last, or 1 once it is
                                     written (hooks.c, fill: whether the record was) */
    struct ftr_rec *rw_rec;       /* the ENTRY record an exit is taking back (--threshold), ... */
    struct ftr_chunk *rw_chunk;   /* ... in this chunk: see hooks.c, rewind_short */
    uint32_t dtor_rounds;         /* threads.c: rounds of key destructors seen at its end */
    uintptr_t slow_sp;            /* a hook's slow path runs above this stack address (0: none):
                                     a jump past it abandons the slow path (siglongjmp out of a
                                     handler that interrupted it) */
    uint32_t filling;             /* records being written (more than one: a signal handler
                                     interrupted a record, whose slot is still empty) */
    struct ftr_thread *thr;       /* registry entry (threads.c) */
    uintptr_t stack_lo, stack_hi; /* this thread's own stack (0, 0: unknown) */
    uint32_t rec_depth;           /* recorded frames open (for --max-depth) */
    uintptr_t switch_sp;          /* hooks.c: the frame of the switch under way (FTR_T_SWITCHING) */
    uint32_t chain_n;       /* switch.c: stacks resumed one inside another (swapcontext), ... */
    uint32_t *chain;        /* ... outermost first: the last one runs (stack classes); in the
                               thread's record (NULL without one: nothing is kept) */
    uint32_t graph_open;    /* --graph-function roots open */
    uint32_t notrace_open;  /* --notrace functions open */
    uint64_t overruns;      /* calls not hooked because the shadow stack was full */
    uint64_t lost;          /* events dropped (nested in the slow path, no chunk); a lost
                               ENTRY counts with the exit that then goes unrecorded */
    uint64_t lost_calls;    /* of those, calls whose ENTRY was dropped */
    uint64_t lost_reported; /* of those, already told in a LOST event */
    /* handlers.c: the traced signal handlers running, innermost last (sig_n may count past
     * what sig holds: sig_cap, FTR_SIG_NEST in the thread's record, 0 without one) */
    uint32_t sig_n, sig_cap;
    struct ftr_sig_frame *sig;
};
extern __thread struct ftr_tls ftr_tls __attribute__((tls_model("initial-exec"))) FTR_HIDDEN;

/* ---- process-wide state, in three parts ---- */

/* What the hooks read on every event: one cache line, apart from everything that is written
 * elsewhere (relaxed reads; 0 = off). */
struct ftr_hot {
    atomic_int recording;     /* hooks record events (else they keep only the shadow stack) */
    unsigned max_depth;       /* --max-depth */
    int graph_mode;           /* some site is a --graph-function root */
    int site_flags_used;      /* ftr_site_flags holds something */
    uint64_t threshold_ticks; /* --threshold, in TSC ticks */
    uint64_t threshold_from;  /* only entries after this tsc may be taken back */
    int clock_mono;           /* timestamps are CLOCK_MONOTONIC ns: the TSC is not trusted */
    atomic_int aside;         /* some stack is set aside (stacks.h, ftr_stack_aside) */
    uintptr_t sig_restorer;   /* glibc's signal restorer: a frame returning there is a handler's */
} __attribute__((aligned(64)));
extern struct ftr_hot ftr_hot FTR_HIDDEN;

/* Configuration: read once from FTRACE_* at start. */
struct ftr_config {
    int quiet;
    int verbose;
    size_t chunk_bytes; /* bytes of records per chunk */
    size_t shadow_entries;
    int zstd_level;
    unsigned flush_ms;
    int lossless;  /* FTRACE_LOSSLESS: wait for the writer rather than drop events */
    int exit_hook; /* FTRACE_EXIT=hook: never call through, every return is hooked */
    char output[4096];
};
extern struct ftr_config ftr_cfg FTR_HIDDEN;

/* The process: its trace, its clocks, its counters. */
struct ftr_global {
    int ready; /* constructor finished setting up */
    int fd;    /* the trace file */
    uint32_t pid;
    uint64_t start_tsc, start_ns;
    uint64_t tsc_hz;         /* estimate for converting the threshold */
    uint64_t holdback_ticks; /* the writer leaves records younger than twice this (>= every
                                threshold ever set: it never decreases) */
    /* counters for the END chunk and the summary line */
    uint64_t sites, patched, skipped, through; /* through: of the patched, called through */
    uint64_t libcalls;                         /* library calls found (patched counts them) */
};
extern uint8_t *ftr_site_flags FTR_HIDDEN; /* FTR_SITE_FLAGS_MAX entries, NORESERVE */
/* The body of each call-through site (the byte after it), or the function a library call
 * calls, by site index: FTR_SITE_FLAGS_MAX entries, NORESERVE, written (ftr_site_body_set(),
 * through.c) before the site first jumps to its stub. */
extern uintptr_t *ftr_site_body FTR_HIDDEN;
extern struct ftr_global ftr_g FTR_HIDDEN;

#endif /* FTR_STATE_H */
