/*
 * tables.h - the tables a loaded trace is made of (filled by report.c, read by every module):
 * processes, modules, what is known of each site, threads, the index of EVENTS chunks, marks.
 * Types and inline helpers only.
 *
 * Memory: the tables (processes, modules, site names, threads, one small index entry per
 * EVENTS chunk) are built once; events are never held in memory beyond one decompressed chunk
 * per thread that is active at the current merge time.
 */
#ifndef FTR_REPORT_TABLES_H
#define FTR_REPORT_TABLES_H

#include <stddef.h>
#include <stdint.h>

#include "ftr_format.h"
#include "util.h"

#ifdef __cplusplus
extern "C" {
#endif

struct frp_module {
    uint32_t id;
    uint64_t base; /* load bias */
    uint64_t load_tsc;
    const char *path;
    const uint8_t *build_id; /* NULL when not recorded */
    uint32_t build_id_len;
    uint32_t nsites; /* sites the trace names in it */
};

/* What the trace says of a site besides its name (see frp_site_meta()). */
struct frp_site_meta {
    const char *raw; /* the symbol as recorded (mangled), NULL when the trace has none */
    uint64_t func;   /* runtime address of the function */
    uint32_t module; /* index into the owning process's modules[] + 1; 0 = unknown */
    uint8_t kind;    /* enum ftr_site_kind: a library call's module is the caller's */
};

/* What ftrace-ctl changed in a running process (a MARK chunk). */
struct frp_mark {
    uint64_t tsc;
    uint32_t what; /* enum ftr_mark_what */
    uint64_t value;
    const char *text; /* never NULL ("" when none) */
};
/* The merge hands out a process's marks as SPECIAL events of this subtype (arg: the index in
 * its marks[]), on one of its threads (frp_merge_open); no file event has it. */
#define FRP_SP_MARK 0xfffffffeu
/* ... and calls nested deeper than the report keeps (frp_report.depth_max) as one SPECIAL event
 * of this subtype (arg: how many calls it stands for) where the thread comes back to the depth
 * kept, or where its events end (merge.c). */
#define FRP_SP_DEEP 0xfffffffdu
/* One process instance. A pid that exec()s shows up as two instances with the same pid. */
struct frp_process {
    uint32_t idx; /* dense index in the report, in order of discovery */
    uint32_t pid, ppid;
    int has_info; /* a PROCESS chunk was read */
    int has_end;  /* an END chunk was read (else: killed, or the file is cut) */
    struct ftr_end_info end;
    uint64_t session_id, start_realtime_ns, start_tsc, tsc_hz;
    uint32_t tsc_cal;     /* enum ftr_tsc_cal */
    uint32_t clock_check; /* FTR_CLOCK_* bits (PROC_CLOCK_CHECK) */
    double ns_per_tick;   /* 1e9 / tsc_hz; borrowed from another process when unknown */
    uint64_t ns_mul;      /* ns_per_tick * 2^32, rounded (0: use ns_per_tick) */
    int clock_guessed;    /* no tsc_hz anywhere: ns_per_tick is a guess (1.0) */
    const char *cmdline;  /* argv joined for display (never NULL) */
    const char *exe;      /* may be NULL */
    struct frp_module *modules;
    uint32_t nmodules;
    int has_sites;          /* SITES chunks were read for it (else it may use its parent's) */
    struct frp_name *sites; /* display names by site index; .s == NULL when the index has none */
    struct frp_site_meta *meta; /* parallel to sites[] (may be NULL in hand-made processes) */
    uint32_t nsites;            /* size of sites[] (max index + 1) */
    uint32_t nthreads;
    uint64_t first_tsc;         /* first event's tsc bound (UINT64_MAX when no events) */
    uint64_t last_tsc;          /* last event's tsc bound (0 when no events) */
    struct frp_process *parent; /* the instance of ppid that forked it, if in the file */
    int after_exec;             /* an earlier instance had the same pid: this one exec()ed */
    int selected;               /* has a selected thread (see frp_report_select) */
    struct frp_mark *marks;     /* in time order */
    uint32_t nmarks;
};

/* Site indices are dense from 1 (the preload numbers them in order). Tables indexed by site
 * never grow beyond this: a higher index is damage (its SITES entry is skipped and counted,
 * its events show "<bad site>"). */
#define FRP_SITE_LIMIT (1u << 22)

/* Time 0 of a process: its recorded start, else its first event. */
static inline uint64_t frp_proc_start(const struct frp_process *p)
{
    return p->has_info ? p->start_tsc : p->first_tsc;
}

/*! frp_proc_ns() : frp_ticks_to_ns() for process p in fixed point (the views that sum
 *  durations of every call use it); equal to it but in rare ties of rounding. */
static inline uint64_t frp_proc_ns(const struct frp_process *p, uint64_t ticks)
{
    if (__builtin_expect(!p->ns_mul, 0)) return frp_ticks_to_ns(ticks, p->ns_per_tick);
    unsigned __int128 v = (unsigned __int128)ticks * p->ns_mul + (1u << 31);
    return v >> 96 ? UINT64_MAX : (uint64_t)(v >> 32);
}
struct frp_thread {
    uint32_t idx; /* dense index in the report: renderers keep per-thread state by it */
    uint32_t tid;
    struct frp_process *proc;
    const char *name;     /* from THREAD chunks, NULL when unknown */
    uint32_t first_chunk; /* its EVENTS chunks: report->chunks[first_chunk .. +nchunks) */
    uint32_t nchunks;
    uint64_t tsc_first, tsc_last;
    int selected;
};

/* Index entry of one EVENTS chunk. Sorted by thread, then in the thread's order: by piece (the
 * header's seq, format 2) within each life of the thread (epoch: a tid used again is a new
 * life), else (format 1) by time, then file order. */
struct frp_chunk {
    uint64_t offset;
    uint64_t tsc_first, tsc_last;
    uint64_t piece;  /* the header's seq: where its first slot lies in its thread's stream */
    uint32_t thread; /* index into report->threads */
    uint32_t seq;    /* position among the file's EVENTS chunks: the merge's tie-breaker */
    uint32_t epoch;  /* which life of its tid (format 2; see order_pieces in report.c) */
};

struct frp_report_priv;
struct frp_names;
struct frp_report {
    const char *path;
    struct frp_process **procs; /* by idx */
    uint32_t nprocs;
    struct frp_process **order;  /* the same, in order of process start */
    struct frp_thread **threads; /* by idx */
    uint32_t nthreads;
    struct frp_chunk *chunks;
    uint32_t nchunks;
    uint64_t base_tsc;    /* earliest process start or event: time 0 of the Chrome view */
    uint64_t good_chunks; /* chunks read and understood during loading */
    uint64_t bad_meta;    /* metadata chunks whose payload did not decode */
    uint64_t bad_events;  /* EVENTS chunks with undecodable event data (found while merging) */
    uint32_t depth_max;   /* calls nested deeper are left out: FTR_DEPTH_MAX (tests lower it) */
    uint64_t deep_calls;  /* ENTRY events left out so (found while merging) */
    uint64_t file_size;
    uint16_t version_major, version_minor;
    uint64_t chunks_by_type[8]; /* chunks met while loading, by type (0: unknown types) */
    struct frp_names *names;    /* display names and source lines (names.c) */
    struct frp_report_priv *priv;
};

#ifdef __cplusplus
}
#endif
#endif /* FTR_REPORT_TABLES_H */
