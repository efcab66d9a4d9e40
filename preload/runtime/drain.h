/*
 * drain.h - reading a process's region (region.h, chunk.h) into EVENTS and THREAD chunks.
 *
 * The one reader of a region: the writer thread of the process itself (writer.c: when no
 * recorder process could be had), or the recorder process (recorder.c), which maps the same
 * memfd elsewhere. It needs nothing of the process but the region's pages: chunks by index,
 * their states and headers, the thread slots.
 */
#ifndef FTR_DRAIN_H
#define FTR_DRAIN_H

#include <stddef.h>
#include <stdint.h>

#include "chunk.h"
#include "ftr_format.h"

struct ftr_drain {
    struct ftr_region_hdr *hdr;
    /* chunk index as this reader maps it (NULL: not mapped, cannot be) */
    struct ftr_chunk *(*chunk)(struct ftr_drain *d, uint32_t index);
    void *ctx;               /* the mapping's, for chunk() */
    uint32_t pid;            /* the process the chunks are written for */
    int clock_mono;          /* its timestamps are CLOCK_MONOTONIC ns, not TSC ticks */
    int wake_pool;           /* a thread may wait for a free chunk (FTRACE_LOSSLESS) */
    struct ftr_enc *enc;     /* the reader's encoder */
    struct ftr_buf *out;     /* encoded chunks go here */
    struct ftr_rec *scratch; /* a copy of a partial chunk's records */
    size_t scratch_n;
    uint64_t events, calls; /* encoded so far */
};

/* Now, in the process's ticks: CLOCK_MONOTONIC ns (clock_mono) or the TSC */
uint64_t ftr_drain_ticks(int clock_mono);

/* Sets d up for chunks of nrec records (scratch from the tracer's own memory). @return 0, -1 */
int ftr_drain_init(struct ftr_drain *d, size_t nrec);
void ftr_drain_free(struct ftr_drain *d);

/* One pass: every FULL chunk taken whole and given back to the pool; with partial, every
 * OWNED chunk up to its first unfilled slot (final: past such slots too, the process being
 * over); then the threads that have ended are named (THREAD chunks) and their slots freed.
 * flush(d) is called when out grows past 1 MiB. */
void ftr_drain_pass(struct ftr_drain *d, int partial, int final, void (*flush)(struct ftr_drain *));

/* THREAD chunks for the threads still live (at the end: the names they have now) */
void ftr_drain_name_live(struct ftr_drain *d);

/* A lazy fork child's image (hdr->lazy): has it recorded anything beyond the frames it
 * re-entered at the fork? */
int ftr_drain_news(struct ftr_drain *d);

#endif
