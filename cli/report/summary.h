/*
 * summary.h - one row per function: calls, total, self, average, min, max (summary.c).
 */
#ifndef FTR_REPORT_SUMMARY_H
#define FTR_REPORT_SUMMARY_H

#include <stdint.h>
#include <stdio.h>

#include "sink.h"

#ifdef __cplusplus
extern "C" {
#endif

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

#ifdef __cplusplus
}
#endif
#endif /* FTR_REPORT_SUMMARY_H */
