/*
 * render.c - every view by name: picks the view's sink, runs the pipeline (drive.c) into it
 * and ends it. The views never run the pipeline themselves.
 */
#include "render.h"

#include "callgraph.h"
#include "chrome.h"
#include "drive.h"
#include "flame.h"
#include "folded.h"
#include "graph.h"
#include "info.h"
#include "summary.h"

#include <string.h>

/* The constructor of each view that reads events (FRP_INFO reads none), by enum frp_view. */
static frp_sink_open *const sinks[] = {
    [FRP_GRAPH] = frp_graph_sink,         [FRP_CHROME] = frp_chrome_sink,
    [FRP_SUMMARY] = frp_summary_sink,     [FRP_FOLDED] = frp_folded_sink,
    [FRP_CALLGRAPH] = frp_callgraph_sink, [FRP_FLAME] = frp_flame_sink,
};

int frp_render(struct frp_report *r, enum frp_view v, const struct frp_opts *o, FILE *out,
               struct frp_stats *st)
{
    static const struct frp_opts defaults;
    struct frp_stats dummy;
    if (!o) o = &defaults;
    if (!st) st = &dummy;
    memset(st, 0, sizeof *st);
    if (v == FRP_INFO) return frp_info_write(r, out) ? frp_write_failed(st) : FTR_OK;
    frp_sink_open *open = (unsigned)v < sizeof sinks / sizeof *sinks ? sinks[v] : NULL;
    if (!open) open = frp_callgraph_sink; /* not a view: the last case of the switch it was */
    struct frp_sink s;
    int rc = open(r, o, out, &s);
    if (rc != FTR_OK) return rc;
    rc = frp_drive(r, o, &s);
    return s.end(s.ctx, rc, st);
}
