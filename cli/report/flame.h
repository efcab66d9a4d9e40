/*
 * flame.h - a self-contained interactive SVG flame graph (flame.c).
 */
#ifndef FTR_REPORT_FLAME_H
#define FTR_REPORT_FLAME_H

#include <stdint.h>
#include <stdio.h>

#include "sink.h"
#include "tree.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! frp_flame_write() : the SVG flame graph (flame.c). @return 0 or -1 (errno) */
int frp_flame_write(struct frp_tree *t, const struct frp_opts *o, FILE *out);
frp_sink_open frp_flame_sink; /* a tree per o->per_thread, written by frp_flame_write() */

#ifdef __cplusplus
}
#endif
#endif /* FTR_REPORT_FLAME_H */
