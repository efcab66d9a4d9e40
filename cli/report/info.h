/*
 * info.h - the trace's header: processes, threads, modules, clocks, counters (info.c).
 */
#ifndef FTR_REPORT_INFO_H
#define FTR_REPORT_INFO_H

#include <stdio.h>

#include "report.h"

#ifdef __cplusplus
extern "C" {
#endif

/*! frp_info_write() : the --info view of r. @return 0, or -1 when a write failed (errno) */
int frp_info_write(struct frp_report *r, FILE *out);

#ifdef __cplusplus
}
#endif
#endif /* FTR_REPORT_INFO_H */
