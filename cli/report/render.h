/*
 * render.h - every view by name (render.c): picks the view's sink (graph.h, chrome.h, ...),
 * runs the pipeline (drive.h) into it and ends it.
 */
#ifndef FTR_REPORT_RENDER_H
#define FTR_REPORT_RENDER_H

#include <stdio.h>

#include "sink.h"

#ifdef __cplusplus
extern "C" {
#endif

enum frp_view {
    FRP_GRAPH,
    FRP_CHROME,
    FRP_SUMMARY,
    FRP_FOLDED,
    FRP_CALLGRAPH,
    FRP_FLAME,
    FRP_INFO
};
/*! frp_render() : renders view v of the selected threads to out. st receives what the view
 *  counted. @return FTR_OK, FTR_E_IO (errno; st->write_errno when writing failed),
 *  FTR_E_NOMEM, FTR_E_EMPTY (call graph: no such function) */
int frp_render(struct frp_report *r, enum frp_view v, const struct frp_opts *o, FILE *out,
               struct frp_stats *st);

#ifdef __cplusplus
}
#endif
#endif /* FTR_REPORT_RENDER_H */
