/*
 * drive.h - the pipeline (drive.c): merge -> shaper (filter, depth, time range, threshold)
 * -> sink. It knows no view: render.h picks the sink.
 */
#ifndef FTR_REPORT_DRIVE_H
#define FTR_REPORT_DRIVE_H

#include <stddef.h>
#include <stdint.h>

#include "sink.h"

#ifdef __cplusplus
extern "C" {
#endif

struct ftr_filter;

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

#ifdef __cplusplus
}
#endif
#endif /* FTR_REPORT_DRIVE_H */
