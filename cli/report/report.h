/*
 * report.h - loading a trace file (report.c): opens it, fills the tables (tables.h) in one
 * pass over the chunk headers, selects the threads to show, names sites (through names.c),
 * and words the damage met and the marks of ftrace-ctl.
 *
 * The layers of the report library, each using only those above it:
 *   util.h     numbers, durations, output buffer, hash map, arena, stacks (util.c)
 *   tables.h   the tables of a loaded trace (types only)
 *   names.h    display names and source lines (names.c)
 *   report.h   loading and selecting (report.c)
 *   merge.h    the streaming merge of the selected threads by time (merge.c)
 *   sink.h     the options, and a view as the pipeline sees it (struct frp_sink)
 *   drive.h    the pipeline: merge -> shaper -> sink (drive.c)
 *   graph.h chrome.h summary.h tree.h folded.h callgraph.h flame.h info.h   the views
 *   render.h   every view by name: picks its sink and drives it (render.c)
 *   report_lib.h  all of them, for the programs and the tests
 */
#ifndef FTR_REPORT_H
#define FTR_REPORT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "names.h"
#include "tables.h"

#ifdef __cplusplus
extern "C" {
#endif

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

/* internal (merge.c): the reader of the report's file */
struct ftr_reader *frp_report_reader(struct frp_report *r);

/*! frp_report_strdup() : a sanitized (printable, valid UTF-8) copy of s[0..n) that lives as
 *  long as the report. @return NULL when out of memory */
const char *frp_report_strdup(struct frp_report *r, const char *s, size_t n);

/*! frp_mark_text() : "tracing off", "filter 'f*'", "max-depth 3", "threshold 10 us", ... in buf.
 *  @return its length */
size_t frp_mark_text(const struct frp_mark *m, char *buf, size_t n);

/* ---- what the renderers count ---- */
struct frp_stats {
    uint64_t events;     /* items consumed */
    uint64_t unmatched;  /* exits/unwinds without an open call in their thread: skipped */
    uint64_t mismatched; /* exits whose site differs from the open call's (the stack wins) */
    uint64_t lost;       /* events the tracer reported lost */
    int write_errno;     /* frp_render: set when writing the output failed */
};

/*! frp_report_note() : writes a one-line summary of the damage met (truncation, corrupt
 *  chunks, unmatched exits) into buf, without a newline. @return its length, 0 if all was well */
size_t frp_report_note(const struct frp_report *r, const struct frp_stats *st, char *buf, size_t n);

#ifdef __cplusplus
}
#endif
#endif /* FTR_REPORT_H */
