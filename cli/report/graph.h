/*
 * graph.h - the kernel function_graph-like text view, the default (graph.c).
 */
#ifndef FTR_REPORT_GRAPH_H
#define FTR_REPORT_GRAPH_H

#include <stdint.h>
#include <stdio.h>

#include "sink.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif
#endif /* FTR_REPORT_GRAPH_H */
