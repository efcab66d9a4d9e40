/*
 * sink.h - what the pipeline (drive.h) and the views share: the options of a report and
 * struct frp_sink, a view as the pipeline sees it. The views are push-style: they take one
 * struct frp_item at a time, so they can be fed by the pipeline or by hand (unit tests).
 */
#ifndef FTR_REPORT_SINK_H
#define FTR_REPORT_SINK_H

#include <errno.h>
#include <stdint.h>
#include <stdio.h>

#include "merge.h"
#include "report.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ftr_filter;

enum frp_sort { FRP_SORT_TOTAL, FRP_SORT_SELF, FRP_SORT_CALLS, FRP_SORT_AVG, FRP_SORT_MAX };

struct frp_opts {
    /* which calls: applied by the pipeline before any view sees them */
    const struct ftr_filter *filter;   /* functions to show, as if only they had been traced */
    int no_libcall;                    /* library calls hidden, as if not traced */
    uint32_t max_depth;                /* calls nested deeper (after filtering) hidden; 0: all */
    uint64_t threshold_ns;             /* calls shorter than this hidden, with their callees */
    int has_range;                     /* show only events in [range_lo_ns, range_hi_ns] ... */
    uint64_t range_lo_ns, range_hi_ns; /* ... after the start of their process */
    /* how */
    int abstime;           /* graph: a wall-clock time column */
    int no_leaf_compact;   /* graph: "f() {" + "}" even for calls without callees */
    int no_values;         /* every view: recorded arguments and return values left out */
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

#ifdef __cplusplus
}
#endif
#endif /* FTR_REPORT_SINK_H */
