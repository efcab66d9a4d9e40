/*
 * chrome.h - Chrome Trace Event JSON, for chrome://tracing and the Perfetto UI (chrome.c).
 */
#ifndef FTR_REPORT_CHROME_H
#define FTR_REPORT_CHROME_H

#include <stdint.h>
#include <stdio.h>

#include "sink.h"
#include "util.h"

#ifdef __cplusplus
extern "C" {
#endif

struct frp_chrome;
/*! frp_chrome_new() : starts the JSON document ({"traceEvents":[) on out; base_tsc is time 0.
 *  @return NULL when out of memory */
struct frp_chrome *frp_chrome_new(FILE *out, uint64_t base_tsc);
void frp_chrome_process(struct frp_chrome *c, const struct frp_process *p); /* metadata */
void frp_chrome_thread(struct frp_chrome *c, const struct frp_thread *t);   /* metadata */
void frp_chrome_event(struct frp_chrome *c, const struct frp_item *it);
/*! frp_chrome_finish() : closes the document and flushes. @return 0 or -1 (write failed) */
int frp_chrome_finish(struct frp_chrome *c);
const struct frp_stats *frp_chrome_stats(const struct frp_chrome *c);
void frp_chrome_free(struct frp_chrome *c);
/*! frp_json_escape() : s as the inside of a JSON string, to o. */
void frp_json_escape(struct frp_out *o, const char *s, size_t n);
/*! frp_chrome_sink() : the JSON document as a sink (with the metadata of the selected
 *  processes and threads first). */
frp_sink_open frp_chrome_sink;

#ifdef __cplusplus
}
#endif
#endif /* FTR_REPORT_CHROME_H */
