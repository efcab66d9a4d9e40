/*
 * views.h - what ftrace-report shows: the options, the pipeline that feeds the views and the
 * views themselves. Included by report.h.
 *
 *   drive.c      the pipeline: merge -> shaper (filter, depth, time range, threshold) -> view
 *   graph.c      the kernel function_graph-like text view (the default)
 *   chrome.c     Chrome Trace Event JSON (chrome://tracing, Perfetto UI)
 *   summary.c    one row per function: calls, total, self, average, min, max
 *   tree.c       function ids and the merged call tree (shared by the three below)
 *   folded.c     folded stacks (flamegraph.pl, inferno, speedscope)
 *   callgraph.c  the merged call graph under a function, with its callers
 *   flame.c      a self-contained interactive SVG flame graph
 *   info.c       the header: processes, threads, modules, clocks, counters
 *
 * The views are push-style: they take one struct frp_item at a time, so they can be fed by
 * the pipeline (frp_render) or by hand (unit tests).
 */
#ifndef FTR_VIEWS_H
#define FTR_VIEWS_H

#include <errno.h>

#include "report.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ftr_filter;

enum frp_view {
    FRP_GRAPH,
    FRP_CHROME,
    FRP_SUMMARY,
    FRP_FOLDED,
    FRP_CALLGRAPH,
    FRP_FLAME,
    FRP_INFO
};
enum frp_sort { FRP_SORT_TOTAL, FRP_SORT_SELF, FRP_SORT_CALLS, FRP_SORT_AVG, FRP_SORT_MAX };

struct frp_opts {
    /* which calls: applied by the pipeline before any view sees them */
    const struct ftr_filter *filter;   /* functions to show, as if only they had been traced */
    uint32_t max_depth;                /* calls nested deeper (after filtering) hidden; 0: all */
    uint64_t threshold_ns;             /* calls shorter than this hidden, with their callees */
    int has_range;                     /* show only events in [range_lo_ns, range_hi_ns] ... */
    uint64_t range_lo_ns, range_hi_ns; /* ... after the start of their process */
    /* how */
    int abstime;           /* graph: a wall-clock time column */
    int no_leaf_compact;   /* graph: "f() {" + "}" even for calls without callees */
    int color;             /* graph, summary: ANSI colours */
    int srcline;           /* graph, summary, call graph: file:line of each function */
    int per_thread;        /* summary, folded, flame: one table / root frame per thread */
    enum frp_sort sort;    /* summary */
    const char *callgraph; /* call graph: the function (a name, or a glob) */
    const char *title;     /* flame graph: title (default: the command line) */
    /* progress: called about every 65536 events with EVENTS chunks done / total */
    void (*progress)(void *arg, uint64_t done, uint64_t total);
    void *progress_arg;
};

/* ---- the sink: a view as the pipeline sees it ----
 * A view's constructor (frp_graph_sink(), ...) begins the view (allocates it, writes what
 * comes before the events) and fills a struct frp_sink; the pipeline (frp_drive) then calls
 * section() before each process's part and event() for every event, and whoever drove it
 * calls end() once. No view runs the pipeline itself. */
struct frp_sink {
    void *ctx;
    /* non-NULL: one merge per selected process, in order of start, this called before each;
     * NULL: one merge of every selected thread */
    void (*section)(void *ctx, const struct frp_process *p);
    void (*event)(void *ctx, const struct frp_item *it);
    /* optional: polled now and then; non-zero (errno set) stops the pipeline with FTR_E_IO */
    int (*failed)(void *ctx);
    /* after the last event, with the pipeline's result rc: writes what the view kept for the
     * end, flushes, fills st (what the view counted), frees ctx. @return the final result */
    int (*end)(void *ctx, int rc, struct frp_stats *st);
};
/* A view's constructor: begins the view of r with options o (never NULL) writing to out, and
 * fills *s. @return FTR_OK or FTR_E_NOMEM */
typedef int frp_sink_open(struct frp_report *r, const struct frp_opts *o, FILE *out,
                          struct frp_sink *s);
/*! frp_write_failed() : records that writing the output failed (errno) in st. @return FTR_E_IO */
static inline int frp_write_failed(struct frp_stats *st)
{
    st->write_errno = errno ? errno : EIO;
    return FTR_E_IO;
}

/* ---- the pipeline (drive.c) ---- */
/*! frp_drive() : feeds the selected events to s, through the shaper when o asks for filtering
 *  (filter, max_depth, threshold, time range). The shaper keeps every thread's tree consistent:
 *  a hidden call's exit is hidden too, its visible callees take its place, and the thread's
 *  next visible event is always known before an event is passed on (it->next); items still
 *  come out in the merge's time order.
 *  @return FTR_OK, FTR_E_IO (errno), FTR_E_NOMEM */
int frp_drive(struct frp_report *r, const struct frp_opts *o, const struct frp_sink *s);
/*! frp_filter_site() : whether filter f selects a site of p: by the function's raw (mangled)
 *  name or its demangled forms (a term matches when one of them does: ftr_filter.h), and its
 *  module. */
int frp_filter_site(struct frp_report *r, const struct ftr_filter *f, struct frp_process *p,
                    uint32_t site);
/*! frp_filter_count() : the sites of the selected processes that f selects. */
size_t frp_filter_count(struct frp_report *r, const struct ftr_filter *f);
/*! frp_shaping() : 1 when o asks the pipeline to filter anything. */
int frp_shaping(const struct frp_opts *o);

/*! frp_render() : renders view v of the selected threads to out. st receives what the view
 *  counted. @return FTR_OK, FTR_E_IO (errno; st->write_errno when writing failed),
 *  FTR_E_NOMEM, FTR_E_EMPTY (call graph: no such function) */
int frp_render(struct frp_report *r, enum frp_view v, const struct frp_opts *o, FILE *out,
               struct frp_stats *st);

/* ---- graph view (graph.c) ---- */
struct frp_graph;
/*! frp_graph_new() : a renderer writing to out, with options o (NULL: the defaults) and the
 *  report r (NULL: no source lines). @return NULL when out of memory */
struct frp_graph *frp_graph_new(FILE *out);
void frp_graph_configure(struct frp_graph *g, struct frp_report *r, const struct frp_opts *o);
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
/*! frp_graph_sink() : the graph as a sink: one section per selected process. */
frp_sink_open frp_graph_sink;

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
/*! frp_chrome_sink() : the JSON document as a sink (with the metadata of the selected
 *  processes and threads first). */
frp_sink_open frp_chrome_sink;

/* ---- function ids (tree.c): display names interned to dense ids, 1.. ---- */
struct frp_funcs {
    struct frp_report *r;
    struct frp_name *names;              /* by id; [0] unused */
    const struct frp_process **rep_proc; /* by id: a process and site of it (source lines) */
    uint32_t *rep_site;
    uint32_t *chain; /* by id: the next id whose name has the same hash slot */
    uint32_t n;      /* ids in use + 1 */
    size_t cap;
    struct frp_hmap by_name; /* name hash -> first id */
    uint32_t **site_ids;     /* by process idx: site -> id (0: not seen yet) */
    uint32_t *site_ids_n;
    uint32_t nprocs;
};
void frp_funcs_init(struct frp_funcs *fs, struct frp_report *r);
void frp_funcs_free(struct frp_funcs *fs);
/*! frp_funcs_intern() : the id of a name (p, site: where it was met, or NULL). @return 0 when
 *  out of memory */
uint32_t frp_funcs_intern(struct frp_funcs *fs, struct frp_name name, const struct frp_process *p,
                          uint32_t site);
uint32_t frp_funcs_slow(struct frp_funcs *fs, const struct frp_item *it);
/*! frp_funcs_id() : the id of the function an ENTRY item enters. @return 0: out of memory */
static inline uint32_t frp_funcs_id(struct frp_funcs *fs, const struct frp_item *it)
{
    uint32_t pi = it->thread->proc->idx, site = it->ev.site;
    if (__builtin_expect(pi < fs->nprocs && site < fs->site_ids_n[pi], 1)) {
        uint32_t id = fs->site_ids[pi][site];
        if (__builtin_expect(id != 0, 1)) return id;
    }
    return frp_funcs_slow(fs, it);
}

/* ---- the merged call tree (tree.c) ---- */
struct frp_tnode {
    uint32_t func;    /* function id; node 0 (the root) has 0 */
    uint32_t parent;  /* node index */
    uint32_t child;   /* first child, 0: none (in order of first call) */
    uint32_t sibling; /* next sibling, 0: none */
    uint32_t last;    /* last child (appending) */
    uint32_t hint;    /* the child looked up last */
    uint32_t depth;
    uint64_t calls;
    uint64_t total_ns; /* inclusive time of its calls (open calls end at their thread's end) */
    uint64_t self_ns;  /* total_ns minus the callees' */
};
struct frp_tree {
    struct frp_funcs funcs;
    struct frp_tnode *nodes;
    uint32_t n;
    size_t cap;
    struct frp_hmap kids;  /* parent << 32 | func -> child node */
    struct frp_tstack *ts; /* per thread */
    uint32_t nts;
    int per_thread; /* a root frame per thread: "name-tid" */
    struct frp_stats stats;
    int nomem;
};
int frp_tree_init(struct frp_tree *t, struct frp_report *r, int per_thread); /* FTR_OK/NOMEM */
void frp_tree_event(struct frp_tree *t, const struct frp_item *it);
void frp_tree_free(struct frp_tree *t);
/* What a view of the tree writes at the end: @return 0, 1 (nothing to show), -1 (errno) */
typedef int frp_tree_writer(struct frp_tree *t, const struct frp_opts *o, FILE *out);
/*! frp_tree_sink() : a tree (a root frame per thread when per_thread) as a sink; its end()
 *  completes the tree (the root's time) and hands it to write (1: FTR_E_EMPTY). */
int frp_tree_sink(struct frp_report *r, const struct frp_opts *o, int per_thread,
                  frp_tree_writer *write, FILE *out, struct frp_sink *s);

/* ---- summary (summary.c) ---- */
struct frp_summary;
struct frp_summary *frp_summary_new(struct frp_report *r, const struct frp_opts *o);
/*! frp_summary_sink() : the summary as a sink: the table(s) are written at the end. */
frp_sink_open frp_summary_sink;
void frp_summary_event(struct frp_summary *s, const struct frp_item *it);
/*! frp_summary_write() : closes the calls still open (at their thread's last event) and writes
 *  the table(s). @return 0 or -1 (write failed, errno) */
int frp_summary_write(struct frp_summary *s, FILE *out);
const struct frp_stats *frp_summary_stats(const struct frp_summary *s);
void frp_summary_free(struct frp_summary *s);

/* ---- views of the call tree ---- */
/*! frp_folded_write() : "a;b;c SELF_NS" for every path with self time (folded.c). */
int frp_folded_write(struct frp_tree *t, FILE *out);
frp_sink_open frp_folded_sink; /* a tree per o->per_thread, written by frp_folded_write() */
/*! frp_callgraph_write() : the call graph under every function matching o->callgraph
 *  (callgraph.c). @return 0, 1 when no function matched, -1 (write failed, errno) */
int frp_callgraph_write(struct frp_tree *t, const struct frp_opts *o, FILE *out);
frp_sink_open frp_callgraph_sink; /* one tree of every thread, frp_callgraph_write() */
/*! frp_flame_write() : the SVG flame graph (flame.c). @return 0 or -1 (errno) */
int frp_flame_write(struct frp_tree *t, const struct frp_opts *o, FILE *out);
frp_sink_open frp_flame_sink; /* a tree per o->per_thread, written by frp_flame_write() */

/* ---- info (info.c) ---- */
int frp_info_write(struct frp_report *r, FILE *out);

#ifdef __cplusplus
}
#endif
#endif /* FTR_VIEWS_H */
