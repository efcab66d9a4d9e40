/*
 * merge.h - the merged event stream (merge.c): the events of the selected threads, one at a
 * time in time order, with each thread's next event and the name of the function entered.
 */
#ifndef FTR_REPORT_MERGE_H
#define FTR_REPORT_MERGE_H

#include <stdint.h>

#include "report.h"

#ifdef __cplusplus
extern "C" {
#endif

struct frp_item {
    struct ftr_event ev;
    const struct ftr_event *next; /* the same thread's next event, NULL at its end */
    struct frp_thread *thread;
    struct frp_name name; /* ENTRY events: the function's name; else empty */
    /* the call's values (formats/ftr_values.h): ENTRY, its arguments; EXIT, its return value;
     * NULL when none were recorded */
    const uint8_t *vals;
    uint32_t vals_len;
    const uint8_t *next_vals; /* the same for next (a leaf's return value) */
    uint32_t next_vals_len;
};

struct frp_merge;
/*! frp_merge_open() : merges the selected threads of process p (NULL: of every process) by
 *  tsc; ties go to the earlier chunk in the file. @return FTR_OK or FTR_E_NOMEM. */
int frp_merge_open(struct frp_report *r, struct frp_process *p, struct frp_merge **out);
/*! frp_merge_next() : @return 1 with *it filled (valid until the next call), 0 at the end,
 *  or -FTR_E_IO / -FTR_E_NOMEM. Damaged chunks are skipped and counted. */
int frp_merge_next(struct frp_merge *m, struct frp_item *it);
/*! frp_merge_progress() : EVENTS chunks taken so far, out of the merge's total. */
void frp_merge_progress(const struct frp_merge *m, uint64_t *done, uint64_t *total);
void frp_merge_close(struct frp_merge *m);

#ifdef __cplusplus
}
#endif
#endif /* FTR_REPORT_MERGE_H */
