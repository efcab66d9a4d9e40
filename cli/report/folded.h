/*
 * folded.h - folded stacks, for flamegraph.pl, inferno, speedscope (folded.c).
 */
#ifndef FTR_REPORT_FOLDED_H
#define FTR_REPORT_FOLDED_H

#include <stdint.h>
#include <stdio.h>

#include "sink.h"
#include "tree.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! frp_folded_write() : "a;b;c SELF_NS" for every path with self time (folded.c). */
int frp_folded_write(struct frp_tree *t, FILE *out);
frp_sink_open frp_folded_sink; /* a tree per o->per_thread, written by frp_folded_write() */

#ifdef __cplusplus
}
#endif
#endif /* FTR_REPORT_FOLDED_H */
