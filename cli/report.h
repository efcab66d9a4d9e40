/*
 * report.h - the offline report library of ftrace-run: loads a trace file into tables, merges
 * the per-thread event streams in time order, and renders views (function graph, Chrome JSON).
 *
 *   report.c  loading (one pass over the chunk headers), the streaming merge
 *   graph.c   the kernel function_graph-like text view, the note on damage, and the helpers
 *             shared by the views (output buffer, numbers, durations, call stacks)
 *   chrome.c  Chrome Trace Event JSON (chrome://tracing, Perfetto UI)
 *
 * Memory: the tables (processes, modules, site names, threads, one small index entry per
 * EVENTS chunk) are built once; events are never held in memory beyond one decompressed chunk
 * per thread that is active at the current merge time.
 *
 * The renderers are push-style: they take one struct frp_item at a time, so they can be fed
 * by the merge (frp_render_graph / frp_render_chrome) or by hand (unit tests).
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
    uint64_t base;
    const char *path;
};

/* One process instance. A pid that exec()s shows up as two instances with the same pid. */
struct frp_process {
    uint32_t idx; /* dense index in the report, in order of discovery */
    uint32_t pid, ppid;
    int has_info; /* a PROCESS chunk was read */
    int has_end;  /* an END chunk was read (else: killed, or the file is cut) */
    struct ftr_end_info end;
    uint64_t session_id, start_realtime_ns, start_tsc, tsc_hz;
    double ns_per_tick;  /* 1e9 / tsc_hz; borrowed from another process when unknown */
    int clock_guessed;   /* no tsc_hz anywhere: ns_per_tick is a guess (1.0) */
    const char *cmdline; /* argv joined for display (never NULL) */
    const char *exe;     /* may be NULL */
    struct frp_module *modules;
    uint32_t nmodules;
    int has_sites;          /* SITES chunks were read for it (else it may use its parent's) */
    struct frp_name *sites; /* by site index; .s == NULL when the index has no name */
    uint32_t nsites;        /* size of sites[] (max index + 1) */
    uint32_t nthreads;
    uint64_t first_tsc;         /* first event's tsc bound (UINT64_MAX when no events) */
    struct frp_process *parent; /* the instance of ppid that forked it, if in the file */
    int after_exec;             /* an earlier instance had the same pid: this one exec()ed */
    int selected;               /* has a selected thread (see frp_report_select) */
};

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

/* Index entry of one EVENTS chunk (sorted by thread, then time, then file order). */
struct frp_chunk {
    uint64_t offset;
    uint64_t tsc_first, tsc_last;
    uint32_t thread; /* index into report->threads */
    uint32_t seq;    /* position among the file's EVENTS chunks: the merge's tie-breaker */
};

struct frp_report_priv;
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

/*! frp_site_name() : the function name of a site of process p (a placeholder such as
 *  "<site 42>" when the trace has no name for it). The pointer lives as long as the report. */
struct frp_name frp_site_name(struct frp_report *r, struct frp_process *p, uint32_t site);

/* ---- the merged event stream ---- */
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
/*! frp_duration_marker() : the kernel's marker for a duration: '$' > 1 s, '@' > 100 ms,
 *  '*' > 10 ms, '#' > 1 ms, '!' > 100 us, '+' > 10 us, else ' '. */
char frp_duration_marker(uint64_t ns);
#define FRP_DURATION_MAX 40 /* room frp_fmt_duration() may need */
/*! frp_fmt_duration() : writes the duration column, from after "TID)" up to and including
 *  the '|': " M %7.3f us  |" (M the marker) = 16 characters, more for >= 1000 s.
 *  No NUL is written. @return the length written */
size_t frp_fmt_duration(char *buf, uint64_t ns);
/*! frp_sanitize() : makes s printable and valid UTF-8 in place (control characters and bytes
 *  of invalid sequences become '?'), so that names print on one line and JSON stays valid. */
void frp_sanitize(char *s, size_t n);
/*! frp_fmt_u64() : decimal digits of v at p. @return the end of what was written */
char *frp_fmt_u64(char *p, uint64_t v);

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
/* Returns room for n bytes (n small next to cap) at the end of the buffer; the caller then
 * adds what it used to o->len. */
static inline char *frp_out_room(struct frp_out *o, size_t n)
{
    if (__builtin_expect(o->len + n > o->cap, 0)) frp_out_flush(o);
    return o->buf + o->len;
}

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

/* ---- graph view (graph.c) ---- */
struct frp_graph;
/*! frp_graph_new() : a renderer writing to out. @return NULL when out of memory */
struct frp_graph *frp_graph_new(FILE *out);
/*! frp_graph_header() : the 3-line header of a process's section (a blank line before every
 *  section but the first). */
void frp_graph_header(struct frp_graph *g, const struct frp_process *p);
/*! frp_graph_event() : renders one item. An ENTRY whose it->next is its own EXIT prints as a
 *  leaf "name();" and that EXIT, which must be the thread's next item, prints nothing. */
void frp_graph_event(struct frp_graph *g, const struct frp_item *it);
/*! frp_graph_finish() : flushes to the FILE. @return 0, or -1 when a write failed (errno). */
int frp_graph_finish(struct frp_graph *g);
const struct frp_stats *frp_graph_stats(const struct frp_graph *g);
void frp_graph_free(struct frp_graph *g);
/*! frp_render_graph() : the whole graph of the selected threads, one section per selected
 *  process in order of start. @return FTR_OK, FTR_E_IO (errno: a read or write failed),
 *  FTR_E_NOMEM. */
int frp_render_graph(struct frp_report *r, FILE *out, struct frp_stats *st);

/* ---- Chrome Trace Event JSON (chrome.c) ---- */
struct frp_chrome;
/*! frp_chrome_new() : starts the JSON document ({"traceEvents":[) on out; base_tsc is time 0.
 *  @return NULL when out of memory */
struct frp_chrome *frp_chrome_new(FILE *out, uint64_t base_tsc);
void frp_chrome_process(struct frp_chrome *c, const struct frp_process *p); /* metadata */
void frp_chrome_thread(struct frp_chrome *c, const struct frp_thread *t);   /* metadata */
void frp_chrome_event(struct frp_chrome *c, const struct frp_item *it);
/*! frp_chrome_finish() : closes the document and flushes. @return 0 or -1 (write failed) */
int frp_chrome_finish(struct frp_chrome *c);
const struct frp_stats *frp_chrome_stats(const struct frp_chrome *c);
void frp_chrome_free(struct frp_chrome *c);
/*! frp_json_escape() : s as the inside of a JSON string, to o. */
void frp_json_escape(struct frp_out *o, const char *s, size_t n);
int frp_render_chrome(struct frp_report *r, FILE *out, struct frp_stats *st);

#ifdef __cplusplus
}
#endif
#endif /* FTR_REPORT_H */
