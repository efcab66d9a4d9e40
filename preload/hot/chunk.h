/*
 * chunk.h - a chunk of records in the region (region.h), and the region's pool of free chunks.
 *
 * A chunk is FREE (in the pool), OWNED by a thread (its window, its spare, or held: full but
 * for a record a signal handler interrupted), or FULL (handed to the reader). Its state is the
 * only hand-off: the reader, in this process (writer.c) or in the recorder (recorder.c), scans
 * the region's chunks by index (drain.c), takes a FULL chunk whole and an OWNED one up to its
 * first unfilled slot, and gives a chunk it has taken back to the pool, zeroed. Every field a
 * reader uses is in the chunk or in the region's header, never behind a pointer of the process.
 */
#ifndef FTR_CHUNK_H
#define FTR_CHUNK_H

#include <linux/futex.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "ftr_format.h"
#include "region.h"

enum { FTR_CHUNK_FREE = 0, FTR_CHUNK_OWNED, FTR_CHUNK_FULL };

struct ftr_chunk {
    struct ftr_chunk *held_next; /* its thread's held chain: the one held before it (the
                                    process's pointer: no reader follows it) */
    _Atomic uint32_t state;      /* FTR_CHUNK_* */
    uint32_t tid;                /* owner thread */
    uint32_t index;              /* in the region */
    uint32_t next_free;          /* pool: index + 1 of the next free chunk (0: none) */
    size_t flushed;              /* records the reader has taken (it writes; rewind_short reads) */
    size_t nrec;                 /* capacity in records */
    size_t used;                 /* slots its thread reserved: nrec, or fewer in the last chunk of
                                    a thread that ended; what the reader reads and zeroes */
    uint64_t seq0;               /* position of rec[0] in its thread's stream of record slots: the
                                    report orders of a thread's pieces by it */
    struct ftr_rec rec[];        /* zeroed before (re)use: a zero head is an unfilled slot */
};

/* Chunk c onto the pool: lock-free, from any context and either side of the region. */
static inline void ftr_pool_put(struct ftr_region_hdr *h, struct ftr_chunk *c)
{
    atomic_store_explicit(&c->state, FTR_CHUNK_FREE, memory_order_relaxed);
    uint64_t head = atomic_load(&h->pool_head), nh;
    do {
        __atomic_store_n(&c->next_free, (uint32_t)head, __ATOMIC_RELAXED);
        nh = ((head >> 32) + 1) << 32 | (c->index + 1);
    } while (!atomic_compare_exchange_weak(&h->pool_head, &head, nh));
}

/* A chunk its reader is done with (or one never handed to it) back to the pool, zeroed; a
 * thread that waits for a chunk (FTRACE_LOSSLESS) is woken. */
static inline void ftr_chunk_recycle(struct ftr_region_hdr *h, struct ftr_chunk *c, int wake)
{
    memset(c->rec, 0, c->used * sizeof c->rec[0]); /* set when it became a thread's window */
    c->flushed = 0;
    ftr_pool_put(h, c);
    atomic_fetch_add(&h->pool_gen, 1);
    if (wake) syscall(SYS_futex, &h->pool_gen, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
}

/* Wakes the region's reader: a chunk filled, or the image ended. Any context. */
static inline void ftr_region_wake(struct ftr_region_hdr *h)
{
    atomic_fetch_add(&h->wake, 1);
    syscall(SYS_futex, &h->wake, FUTEX_WAKE, 1, NULL, NULL, 0);
}

#endif
