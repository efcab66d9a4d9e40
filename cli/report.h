/*
 * report.h - the offline report library of ftrace-run, core: loads a trace file into tables,
 * merges the per-thread event streams in time order, and offers the helpers every view uses.
 * The views themselves (graph, summary, call graph, folded stacks, flame graph, Chrome JSON,
 * info) and the pipeline that feeds them are declared in views.h.
 *
 *   report.c  loading (one pass over the chunk headers): processes, modules, sites, threads
 *   merge.c   the streaming merge of the selected threads by time
 *   util.c    output buffer, numbers, durations, printable names, hash map, call stacks
 *   names.c   display names (demangling, module suffix) and source lines (libdw)
 *
 * Memory: the tables (processes, modules, site names, threads, one small index entry per
 * EVENTS chunk) are built once; events are never held in memory beyond one decompressed chunk
 * per thread that is active at the current merge time.
 */
#ifndef FTR_REPORT_H
#define FTR_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ftr_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A string with its length (names are printed for every event: no strlen on the hot path). */
struct frp_name {
    const char *s;
    uint32_t len;
};

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
/*! frp_mark_text() : "tracing off", "filter 'f*'", "max-depth 3", "threshold 10 us", ... in buf.
 *  @return its length */
size_t frp_mark_text(const struct frp_mark *m, char *buf, size_t n);

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
    uint64_t file_size;
    uint16_t version_major, version_minor;
    uint64_t chunks_by_type[8]; /* chunks met while loading, by type (0: unknown types) */
    struct frp_names *names;    /* display names and source lines (names.c) */
    struct frp_report_priv *priv;
};

/*! frp_report_open() : loads the tables of the trace file at path (one pass over the chunks;
 *  EVENTS payloads are not decompressed). @return FTR_OK; FTR_E_IO (errno set),
 *  FTR_E_NOT_TRACE, FTR_E_VERSION, FTR_E_NOMEM; FTR_E_EMPTY when the file holds no chunk;
 *  FTR_E_TRUNCATED or FTR_E_CORRUPT when nothing at all is readable. Damage after a readable
 *  start is not an error: see frp_report_note(). path must outlive the report. */
int frp_report_open(const char *path, struct frp_report **out);
void frp_report_close(struct frp_report *r);

/*! frp_report_damage() : what the reader met so far (truncation, skipped bytes and chunks). */
void frp_report_damage(const struct frp_report *r, struct ftr_damage *d);

/*! frp_report_select() : chooses the threads to show: those of processes with pid (pid < 0:
 *  any) whose tid is in tids (ntids == 0: any). Everything is selected after open.
 *  @return the number of selected processes (those with a selected thread, or when ntids is
 *  0, every process with that pid). */
size_t frp_report_select(struct frp_report *r, long pid, const uint32_t *tids, size_t ntids);

/*! frp_site_name() : the display name of a site of process p (a placeholder such as
 *  "<site 42>" when the trace has no name for it). The pointer lives as long as the report. */
struct frp_name frp_site_name(struct frp_report *r, struct frp_process *p, uint32_t site);

/*! frp_site_meta() : what the trace recorded of a site of p, looking through the parents of a
 *  forked child that wrote no sites of its own; *owner receives the process whose tables hold
 *  it (its modules[] are what meta->module indexes). @return NULL when nothing is known. */
const struct frp_site_meta *frp_site_meta(const struct frp_process *p, uint32_t site,
                                          const struct frp_process **owner);

/* internal (merge.c): the reader of the report's file */
struct ftr_reader *frp_report_reader(struct frp_report *r);

/*! frp_report_strdup() : a sanitized (printable, valid UTF-8) copy of s[0..n) that lives as
 *  long as the report. @return NULL when out of memory */
const char *frp_report_strdup(struct frp_report *r, const char *s, size_t n);

/* ---- display names and source lines (names.c) ---- */
enum frp_demangle { FRP_DEMANGLE_SIMPLE, FRP_DEMANGLE_FULL, FRP_DEMANGLE_NONE };
/*! frp_report_names() : how frp_site_name() names sites from now on: demangled (simple: without
 *  the parameter list and the return type; full: as the demangler writes it; none: raw),
 *  followed by "@module" (the module's file name) when show_module. Sites the trace recorded
 *  without a name are looked up in their module's symbols when the module file is present
 *  and has the recorded build-id. Names are made on first use (a big C++ trace may have
 *  hundreds of thousands of sites, most never called). Without a call, the raw names.
 *  @return FTR_OK or FTR_E_NOMEM */
int frp_report_names(struct frp_report *r, enum frp_demangle mode, int show_module);
/*! frp_display_name() : the display name of a site of p's own SITES records, as set by
 *  frp_report_names() (internal: frp_site_name() caches it). {NULL} when out of memory. */
struct frp_name frp_display_name(struct frp_report *r, const struct frp_process *p, uint32_t site);
/*! frp_demangle() : the demangled form of a C++ symbol (malloc'ed), NULL when sym is not a
 *  mangled name or mode is FRP_DEMANGLE_NONE. */
char *frp_demangle(const char *sym, enum frp_demangle mode);
/*! frp_srcline() : "file:line" of the function of a site, from the DWARF line table of its
 *  module file when present with the recorded build-id. Cached; @return NULL when unknown. */
const char *frp_srcline(struct frp_report *r, const struct frp_process *p, uint32_t site);
/*! frp_names_warnings() : writes, once per module, why source lines are missing (file gone,
 *  build-id differs) to f. */
void frp_names_warnings(struct frp_report *r, FILE *f);
void frp_names_free(struct frp_report *r);
/*! frp_module_file() : the file name of a module path (after the last '/'). */
const char *frp_module_file(const char *path);

/* ---- the merged event stream (merge.c) ---- */
struct frp_item {
    struct ftr_event ev;
    const struct ftr_event *next; /* the same thread's next event, NULL at its end */
    struct frp_thread *thread;
    struct frp_name name; /* ENTRY events: the function's name; else empty */
};

struct frp_merge;
/*! frp_merge_open() : merges the selected threads of process p (NULL: of every process) by
 *  tsc; ties go to the earlier chunk in the file. @return FTR_OK or FTR_E_NOMEM. */
int frp_merge_open(struct frp_report *r, struct frp_process *p, struct frp_merge **out);
/*! frp_merge_next() : @return 1 with *it filled (valid until the next call), 0 at the end,
 *  or -FTR_E_IO / -FTR_E_NOMEM. Damaged chunks are skipped and counted. */
int frp_merge_next(struct frp_merge *m, struct frp_item *it);
/*! frp_merge_progress() : EVENTS chunks taken so far, out of the merge's total. */
void frp_merge_progress(const struct frp_merge *m, uint64_t *done, uint64_t *total);
void frp_merge_close(struct frp_merge *m);

/* ---- what the renderers count ---- */
struct frp_stats {
    uint64_t events;     /* items consumed */
    uint64_t unmatched;  /* exits/unwinds without an open call in their thread: skipped */
    uint64_t mismatched; /* exits whose site differs from the open call's (the stack wins) */
    uint64_t lost;       /* events the tracer reported lost */
    int write_errno;     /* frp_render_*: set when writing the output failed */
};

/*! frp_report_note() : writes a one-line summary of the damage met (truncation, corrupt
 *  chunks, unmatched exits) into buf, without a newline. @return its length, 0 if all was well */
size_t frp_report_note(const struct frp_report *r, const struct frp_stats *st, char *buf, size_t n);

/* ---- time ---- */
/*! frp_ticks_to_ns() : ticks * ns_per_tick, rounded to the nearest ns. */
static inline uint64_t frp_ticks_to_ns(uint64_t ticks, double ns_per_tick)
{
    double ns = (double)ticks * ns_per_tick + 0.5;
    return ns >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)ns;
}
/*! frp_proc_ns() : frp_ticks_to_ns() for process p in fixed point (the views that sum
 *  durations of every call use it); equal to it but in rare ties of rounding. */
static inline uint64_t frp_proc_ns(const struct frp_process *p, uint64_t ticks)
{
    if (__builtin_expect(!p->ns_mul, 0)) return frp_ticks_to_ns(ticks, p->ns_per_tick);
    unsigned __int128 v = (unsigned __int128)ticks * p->ns_mul + (1u << 31);
    return v >> 96 ? UINT64_MAX : (uint64_t)(v >> 32);
}
/*! frp_ns_to_ticks() : the inverse, rounded up (so that "at least ns" stays true). */
uint64_t frp_ns_to_ticks(uint64_t ns, double ns_per_tick);
/*! frp_duration_marker() : the kernel's marker for a duration: '$' > 1 s, '@' > 100 ms,
 *  '*' > 10 ms, '#' > 1 ms, '!' > 100 us, '+' > 10 us, else ' '. */
char frp_duration_marker(uint64_t ns);
#define FRP_DURATION_MAX 40 /* room frp_fmt_duration() may need */
/*! frp_fmt_duration() : writes the duration column, from after "TID)" up to and including
 *  the '|': " M %7.3f us  |" (M the marker) = 16 characters, more for >= 1000 s.
 *  No NUL is written. @return the length written */
size_t frp_fmt_duration(char *buf, uint64_t ns);
/*! frp_fmt_time() : a duration with a unit that fits it, right-aligned in 11 characters:
 *  "     318 ns", "   1.402 us", "  12.206 ms", "   3.000  s". NUL-terminated. @return length */
size_t frp_fmt_time(char *buf, uint64_t ns);
/*! frp_sanitize() : makes s printable and valid UTF-8 in place (control characters and bytes
 *  of invalid sequences become '?'), so that names print on one line and JSON stays valid. */
void frp_sanitize(char *s, size_t n);
/*! frp_fmt_u64() : decimal digits of v at p. @return the end of what was written */
char *frp_fmt_u64(char *p, uint64_t v);
/*! frp_parse_duration() : "10us", "1.5ms", "2s", "300ns", "0" -> ns. @return 0 or -1 */
int frp_parse_duration(const char *s, const char *end, uint64_t *ns);

/* ---- buffered output (big blocks to a FILE *) ---- */
struct frp_out {
    FILE *f;
    char *buf;
    size_t len, cap;
    int err; /* a write failed (errno kept in err_no) */
    int err_no;
};
int frp_out_init(struct frp_out *o, FILE *f, size_t cap); /* FTR_OK or FTR_E_NOMEM */
void frp_out_flush(struct frp_out *o);                    /* to the FILE (not fflush) */
void frp_out_free(struct frp_out *o);                     /* flushes first */
void frp_out_write_slow(struct frp_out *o, const void *p, size_t n);
void frp_out_spaces(struct frp_out *o, size_t n);
/*! frp_out_printf() : formatted text (short pieces: at most 4096 bytes). */
void frp_out_printf(struct frp_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*! frp_out_finish() : flushes the buffer and the FILE. @return 0, or -1 with errno when a write
 *  failed (now or before) */
int frp_out_finish(struct frp_out *o);
static inline void frp_out_write(struct frp_out *o, const void *p, size_t n)
{
    if (__builtin_expect(o->len + n <= o->cap, 1)) {
        __builtin_memcpy(o->buf + o->len, p, n);
        o->len += n;
    } else {
        frp_out_write_slow(o, p, n);
    }
}
#define frp_out_lit(o, s) frp_out_write((o), (s), sizeof(s) - 1)
static inline void frp_out_str(struct frp_out *o, const char *s)
{
    frp_out_write(o, s, __builtin_strlen(s));
}
/* Returns room for n bytes (n small next to cap) at the end of the buffer; the caller then
 * adds what it used to o->len. */
static inline char *frp_out_room(struct frp_out *o, size_t n)
{
    if (__builtin_expect(o->len + n > o->cap, 0)) frp_out_flush(o);
    return o->buf + o->len;
}

/* ---- hash map uint64 -> uint32 (open addressing) ---- */
struct frp_hmap {
    uint64_t *keys; /* key + 1; 0 = empty slot */
    uint32_t *vals;
    size_t cap, n;
};
uint64_t frp_hash64(uint64_t x);
uint64_t frp_hash_str(const char *s, size_t n);
static inline uint32_t *frp_hmap_get(const struct frp_hmap *m, uint64_t key)
{
    if (!m->cap) return NULL;
    for (size_t i = frp_hash64(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key + 1) return &m->vals[i];
        if (!m->keys[i]) return NULL;
    }
}
int frp_hmap_put(struct frp_hmap *m, uint64_t key, uint32_t val); /* FTR_OK or FTR_E_NOMEM */
void frp_hmap_free(struct frp_hmap *m);
/*! frp_grow() : makes room for need elements of elem bytes in *arr (capacity *cap doubles).
 *  @return FTR_OK or FTR_E_NOMEM */
int frp_grow(void **arr, size_t *cap, size_t need, size_t elem);

/* ---- string arena: copies that live until frp_arena_free() ---- */
struct frp_arena_blk;
struct frp_arena {
    struct frp_arena_blk *head;
};
/*! frp_arena_alloc() : n bytes (unaligned) from a. @return NULL when out of memory */
char *frp_arena_alloc(struct frp_arena *a, size_t n);
/*! frp_arena_str() : a sanitized (frp_sanitize), NUL-terminated copy of s[0..n) in a.
 *  @return NULL when out of memory */
const char *frp_arena_str(struct frp_arena *a, const char *s, size_t n);
void frp_arena_free(struct frp_arena *a);

/* ---- per-thread call stacks kept by the renderers ---- */
struct frp_frame {
    struct frp_name name;
    uint32_t site;
    uint64_t tsc;
};
struct frp_stack {
    struct frp_frame *f;
    uint32_t depth, cap;
};
int frp_stack_grow(struct frp_stack *s); /* FTR_OK or FTR_E_NOMEM */
static inline struct frp_frame *frp_stack_push(struct frp_stack *s)
{
    if (__builtin_expect(s->depth == s->cap, 0) && frp_stack_grow(s) != FTR_OK) return NULL;
    return &s->f[s->depth++];
}

#ifdef __cplusplus
}
#endif

#include "views.h"

#endif /* FTR_REPORT_H */
