/*
 * callgraph.h - the merged call graph under a function, with its callers (callgraph.c).
 */
#ifndef FTR_REPORT_CALLGRAPH_H
#define FTR_REPORT_CALLGRAPH_H

#include <stdint.h>
#include <stdio.h>

#include "sink.h"
#include "tree.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! frp_callgraph_write() : the call graph under every function matching o->callgraph
 *  (callgraph.c). @return 0, 1 when no function matched, -1 (write failed, errno) */
int frp_callgraph_write(struct frp_tree *t, const struct frp_opts *o, FILE *out);
frp_sink_open frp_callgraph_sink; /* one tree of every thread, frp_callgraph_write() */

#ifdef __cplusplus
}
#endif
#endif /* FTR_REPORT_CALLGRAPH_H */
