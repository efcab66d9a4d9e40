/*
 * drain.c - reading a process's region into EVENTS and THREAD chunks (drain.h says who).
 *
 * A chunk's state says who may touch it (chunk.h): the reader takes a FULL chunk whole, its
 * thread being done with it, and gives it back to the pool zeroed; it reads an OWNED chunk
 * while its thread writes it, up to the first slot whose head is still zero (a record being
 * written: what follows waits for it), and keeps how far it got in the chunk (flushed). A
 * thread's slot turns ENDED only once each of its chunks is FULL: after a pass has taken the
 * FULL chunks, an ENDED slot seen before the pass has nothing left, and is named and freed.
 */
#define _GNU_SOURCE
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "drain.h"

int ftr_drain_init(struct ftr_drain *d, size_t nrec)
{
    d->scratch_n = nrec;
    void *p = mmap(NULL, nrec * sizeof(struct ftr_rec), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    d->scratch = p == MAP_FAILED ? NULL : p;
    return d->scratch ? 0 : -1;
}

void ftr_drain_free(struct ftr_drain *d)
{
    if (d->scratch) munmap(d->scratch, d->scratch_n * sizeof(struct ftr_rec));
    d->scratch = NULL;
}

uint64_t ftr_drain_ticks(int clock_mono)
{
    if (clock_mono) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
    }
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
}

static void encode(struct ftr_drain *d, uint32_t tid, uint64_t seq, const struct ftr_rec *r,
                   size_t n)
{
    if (!n) return;
    ftr_enc_events_at(d->enc, d->pid, tid, seq, r, n, d->out);
    uint64_t ev, calls; /* counted by the encoder, in its one pass */
    ftr_enc_last_counts(d->enc, &ev, &calls);
    d->events += ev;
    d->calls += calls;
}

/* No record is written at slot i of chunk c or after it. A thread fills its chunk in order; a
 * hole is a record whose writing was cut (by a signal, whose handler then writes the records
 * after it, or by the end of the process): a value list's head and its payload slots (head 0)
 * at most, 1 + 255 slots, with the next record's head just past it, if any. So slots with a zero
 * head that run longer than that end what was written. The reader reads no further: the rest
 * of a chunk is pages the process never touched, which a read would make the kernel allocate
 * (a fork child's chunk is almost all such pages). */
static int unwritten_from(const struct ftr_chunk *c, size_t i, size_t nrec)
{
    size_t end = i + 1 + 256 < nrec ? i + 1 + 256 : nrec;
    for (; i < end; i++)
        if (__atomic_load_n(&c->rec[i].head, __ATOMIC_ACQUIRE)) return 0;
    return 1;
}

/* Takes the records of OWNED chunk c not taken yet, in slot order: up to the first slot not
 * filled, or, past such slots, every filled one (skip_holes: the last pass, when nothing later
 * could take them; the encoder skips a hole). */
static void take_records(struct ftr_drain *d, struct ftr_chunk *c, int skip_holes)
{
    /* With a threshold, a short call's entry may still be taken back: leave records younger
     * than twice the threshold to the thread (hooks.c, rewind_short). */
    uint64_t hold = atomic_load(&d->hdr->holdback_ticks);
    uint64_t young = hold && !skip_holes ? ftr_drain_ticks(d->clock_mono) - 2 * hold : UINT64_MAX;
    size_t nrec = c->nrec < d->scratch_n ? c->nrec : d->scratch_n;
    size_t from = __atomic_load_n(&c->flushed, __ATOMIC_RELAXED), i = from, n = 0;
    if (from >= nrec) return;
    while (i < nrec) {
        struct ftr_rec *r = &c->rec[i];
        uint32_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
        if (head == 0 && (!skip_holes || unwritten_from(c, i, nrec))) break;
        uint64_t tsc = __atomic_load_n(&r->tsc, __ATOMIC_RELAXED);
        if (head && tsc >= young) break;
        uint32_t arg = __atomic_load_n(&r->arg, __ATOMIC_RELAXED);
        if (head == ftr_rec_head(FTR_SP_VALUES, FTR_EV_SPECIAL)) {
            /* a value list is taken whole: its payload slots (head 0) with it */
            size_t ns = ftr_values_slots(arg);
            if (i + 1 + ns > nrec) break;
            d->scratch[n++] = (struct ftr_rec){tsc, head, arg};
            for (size_t k = 1; k <= ns; k++)
                d->scratch[n++] =
                    (struct ftr_rec){__atomic_load_n(&c->rec[i + k].tsc, __ATOMIC_RELAXED), 0,
                                     __atomic_load_n(&c->rec[i + k].arg, __ATOMIC_RELAXED)};
            i += 1 + ns;
            continue;
        }
        d->scratch[n++] = (struct ftr_rec){tsc, head, arg};
        i++;
    }
    /* Claim, then check that no entry among them was taken back meanwhile (hooks.c,
     * rewind_short: the other half of the protocol). A slot taken back and written again
     * shows as a different head or time. */
    __atomic_store_n(&c->flushed, i, __ATOMIC_SEQ_CST);
    if (hold) {
        for (size_t k = from; k < i; k++) {
            const struct ftr_rec *r = &c->rec[k];
            if (d->scratch[k - from].head &&
                (__atomic_load_n(&r->head, __ATOMIC_SEQ_CST) != d->scratch[k - from].head ||
                 __atomic_load_n(&r->tsc, __ATOMIC_RELAXED) != d->scratch[k - from].tsc)) {
                n = k - from;
                __atomic_store_n(&c->flushed, k, __ATOMIC_SEQ_CST);
                break;
            }
        }
    }
    /* tid and seq0 were set before the first record (the head's acquire orders them); an
     * empty read reads neither: the chunk may be a spare its thread is making its window */
    if (n)
        encode(d, __atomic_load_n(&c->tid, __ATOMIC_RELAXED),
               __atomic_load_n(&c->seq0, __ATOMIC_RELAXED) + from, d->scratch, n);
}

static void take_full(struct ftr_drain *d, struct ftr_chunk *c)
{
    size_t used = c->used < c->nrec ? c->used : c->nrec, from = c->flushed;
    if (used > from) encode(d, c->tid, c->seq0 + from, c->rec + from, used - from);
    c->used = used;
    ftr_chunk_recycle(d->hdr, c, d->wake_pool);
    atomic_fetch_sub(&d->hdr->full, 1);
}

static struct ftr_region_thread *slot_at(struct ftr_drain *d, uint32_t i)
{
    return (struct ftr_region_thread *)((char *)d->hdr + FTR_REGION_SLOT0) + i;
}

static void thread_chunk(struct ftr_drain *d, const struct ftr_region_thread *sl, uint32_t what)
{
    char name[17];
    memcpy(name, sl->name, 16);
    name[16] = 0;
    struct ftr_thread_info ti = {.tid = sl->tid,
                                 .what = what,
                                 .tsc = ftr_drain_ticks(d->clock_mono),
                                 .name = name[0] ? name : NULL};
    ftr_enc_thread(d->enc, d->pid, &ti, d->out);
}

void ftr_drain_pass(struct ftr_drain *d, int partial, int final, void (*flush)(struct ftr_drain *))
{
    struct ftr_region_hdr *h = d->hdr;
    uint32_t nslots = atomic_load(&h->nslots);
    if (nslots > FTR_REGION_SLOTS) nslots = FTR_REGION_SLOTS;
    uint32_t ended[FTR_REGION_SLOTS], nended = 0;
    for (uint32_t i = 0; i < nslots; i++)
        if (atomic_load_explicit(&slot_at(d, i)->state, memory_order_acquire) == FTR_SLOT_ENDED)
            ended[nended++] = i;
    uint32_t nchunks = atomic_load((_Atomic uint32_t *)&h->nchunks);
    for (uint32_t i = 0; i < nchunks; i++) {
        struct ftr_chunk *c = d->chunk(d, i);
        if (!c) continue;
        uint32_t state = atomic_load_explicit(&c->state, memory_order_acquire);
        if (state == FTR_CHUNK_FULL)
            take_full(d, c);
        else if (state == FTR_CHUNK_OWNED && partial)
            take_records(d, c, final);
        if (flush && d->out->len > (1u << 20)) flush(d);
    }
    for (uint32_t k = 0; k < nended; k++) {
        struct ftr_region_thread *sl = slot_at(d, ended[k]);
        thread_chunk(d, sl, 2);
        atomic_store_explicit(&sl->state, FTR_SLOT_FREE, memory_order_release);
    }
    if (partial) atomic_fetch_add(&h->passes, 1);
}

void ftr_drain_name_live(struct ftr_drain *d)
{
    uint32_t nslots = atomic_load(&d->hdr->nslots);
    for (uint32_t i = 0; i < nslots && i < FTR_REGION_SLOTS; i++)
        if (atomic_load_explicit(&slot_at(d, i)->state, memory_order_acquire) == FTR_SLOT_LIVE)
            thread_chunk(d, slot_at(d, i), 1);
}

int ftr_drain_news(struct ftr_drain *d)
{
    struct ftr_region_hdr *h = d->hdr;
    if (!h->lazy || atomic_load(&h->news)) return 1;
    uint32_t nchunks = atomic_load((_Atomic uint32_t *)&h->nchunks);
    for (uint32_t i = 0; i < nchunks; i++) {
        struct ftr_chunk *c = d->chunk(d, i);
        if (!c) continue;
        uint32_t state = atomic_load_explicit(&c->state, memory_order_acquire);
        size_t at = i == h->quiet_chunk ? h->quiet_slots : 0;
        if (state == FTR_CHUNK_FULL || (state == FTR_CHUNK_OWNED && at < c->nrec &&
                                        __atomic_load_n(&c->rec[at].head, __ATOMIC_ACQUIRE)))
            return 1;
    }
    return 0;
}
