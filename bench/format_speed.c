/*
 * format_speed.c - how fast ftr_enc_events() turns hot-path records into EVENTS chunks, and
 * how small they get, at a few zstd levels. Also times the way back (reader side decode).
 *
 * Input: 10M records of a fib-like call pattern (a recursive call tree over a handful of sites,
 * 60-250 cycles between events with noise), or the events of a trace file (--trace FILE: the
 * first thread's events, up to n, as the hooks recorded them), encoded 16384 records (256 KiB)
 * per chunk, as the tracer's writer thread does.
 * Usage: format_speed [--trace FILE] [n_events] [records_per_chunk]
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <zstd.h>

#include "ftr_format.h"

static uint64_t rng = 88172645463325252ull;
static uint64_t rnd(void)
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Iterative fib(n) call tree: fib calls fib(n-1) then fib(n-2); leaves call a tiny helper. */
static size_t gen_fib(struct ftr_rec *r, size_t cap)
{
    enum { SITE_MAIN = 3, SITE_FIB = 17, SITE_LEAF = 18 };
    struct frame {
        int n, state;
    } st[64];
    uint64_t tsc = 123456789;
    size_t k = 0;
#define EMIT(site, kind)                                                                           \
    do {                                                                                           \
        tsc += 60 + rnd() % 120 + (rnd() % 32 == 0 ? rnd() % 1000 : 0);                            \
        r[k++] = (struct ftr_rec){tsc, ftr_rec_head(site, kind), 0};                               \
    } while (0)
    while (k + 64 < cap) {
        EMIT(SITE_MAIN, FTR_EV_ENTRY);
        int sp = 0;
        st[sp++] = (struct frame){22, 0};
        EMIT(SITE_FIB, FTR_EV_ENTRY);
        while (sp && k + 4 < cap) {
            struct frame *f = &st[sp - 1];
            if (f->n < 2 || f->state == 2) {
                if (f->n < 2) {
                    EMIT(SITE_LEAF, FTR_EV_ENTRY);
                    EMIT(SITE_LEAF, FTR_EV_EXIT);
                }
                EMIT(SITE_FIB, FTR_EV_EXIT);
                sp--;
                continue;
            }
            int child = f->n - 1 - f->state;
            f->state++;
            st[sp++] = (struct frame){child, 0};
            EMIT(SITE_FIB, FTR_EV_ENTRY);
        }
        if (k % 100 == 0) { /* now and then a lost-events marker */
            tsc += 100;
            r[k++] = (struct ftr_rec){tsc, ftr_rec_head(FTR_SP_LOST, FTR_EV_SPECIAL), 42};
        }
        EMIT(SITE_MAIN, FTR_EV_EXIT);
    }
#undef EMIT
    return k;
}

/* The events of the first thread that has any in a trace file, back into hot-path records. */
static size_t load_trace(const char *path, struct ftr_rec *r, size_t cap)
{
    struct ftr_reader *rd;
    if (ftr_reader_open(path, &rd) != FTR_OK) {
        fprintf(stderr, "format_speed: cannot read %s\n", path);
        exit(1);
    }
    struct ftr_chunk_hdr h;
    struct ftr_buf pl = {0};
    uint64_t off;
    uint32_t tid = 0;
    size_t k = 0;
    while (k < cap && ftr_reader_next(rd, &h, &off) == FTR_OK) {
        if (h.type != FTR_CHUNK_EVENTS || (tid && h.tid != tid)) continue;
        struct ftr_ev_iter it;
        struct ftr_event ev;
        if (ftr_reader_payload(rd, &pl) != FTR_OK || ftr_dec_events_begin(&h, pl.data, pl.len, &it))
            continue;
        tid = h.tid;
        while (k < cap && ftr_dec_events_next(&it, &ev) == 1)
            r[k++] = (struct ftr_rec){ev.tsc, ftr_rec_head(ev.site, ev.kind), (uint32_t)ev.arg};
    }
    ftr_buf_free(&pl);
    ftr_reader_close(rd);
    return k;
}

int main(int argc, char **argv)
{
    const char *trace = NULL;
    if (argc > 2 && !strcmp(argv[1], "--trace")) {
        trace = argv[2];
        argc -= 2;
        argv += 2;
    }
    size_t n = argc > 1 ? strtoull(argv[1], NULL, 0) : 10000000;
    size_t per = argc > 2 ? strtoull(argv[2], NULL, 0) : 16384;
    struct ftr_rec *r = calloc(n, sizeof(*r));
    if (!r) return 1;
    n = trace ? load_trace(trace, r, n) : gen_fib(r, n);
    if (n == 0) {
        fprintf(stderr, "format_speed: no events\n");
        return 1;
    }
    printf("%zu events, %zu records (%zu KiB) per chunk, input %.1f MB\n", n, per,
           per * sizeof(*r) >> 10, (double)n * sizeof(*r) / 1e6);
    printf("%6s %10s %9s %12s %12s %12s\n", "level", "MB/s", "ns/event", "bytes/event", "ratio",
           "decode ns/ev");

    static const int levels[] = {-5, -1, 1, 3};
    for (size_t li = 0; li < sizeof(levels) / sizeof(levels[0]); li++) {
        struct ftr_enc *e = ftr_enc_new(levels[li]);
        struct ftr_buf out = {0};
        /* warm up: sizes the scratch buffers and the zstd context */
        ftr_enc_events(e, 1, 1, r, per < n ? per : n, &out);
        ftr_buf_reserve(&out, n * 4); /* ~1.5 bytes/event expected; grows if not */
        memset(out.data, 0, out.cap); /* no page faults in the timed loop */
        double dt = 1e9;
        for (int rep = 0; rep < 3; rep++) { /* best of 3 */
            out.len = 0;
            double t0 = now();
            for (size_t i = 0; i < n; i += per) {
                size_t m = n - i < per ? n - i : per;
                if (ftr_enc_events(e, 1, 1, r + i, m, &out) != FTR_OK) return 1;
            }
            double t = now() - t0;
            dt = t < dt ? t : dt;
        }

        /* decode: decompress and iterate chunk by chunk, from memory (no file I/O) */
        ZSTD_DCtx *dctx = ZSTD_createDCtx();
        struct ftr_buf pl = {0};
        ftr_buf_reserve(&pl, per * 24 + 64);
        uint64_t sum = 0;
        size_t nev = 0;
        double t1 = now();
        for (size_t off = 0; off + FTR_CHUNK_HEADER_SIZE <= out.len;) {
            const uint8_t *p = out.data + off;
            struct ftr_chunk_hdr h = {.type = ftr_rd_le16(p + 4),
                                      .payload_size = ftr_rd_le32(p + 16),
                                      .tsc_first = ftr_rd_le64(p + 20),
                                      .tsc_last = ftr_rd_le64(p + 28)};
            size_t raw = ZSTD_decompressDCtx(dctx, pl.data, pl.cap, p + FTR_CHUNK_HEADER_SIZE,
                                             h.payload_size);
            if (ZSTD_isError(raw)) return 2;
            struct ftr_ev_iter it;
            struct ftr_event ev;
            if (ftr_dec_events_begin(&h, pl.data, raw, &it)) return 3;
            int k;
            while ((k = ftr_dec_events_next(&it, &ev)) == 1)
                sum += ev.site, nev++;
            if (k) return 4;
            off += FTR_CHUNK_HEADER_SIZE + h.payload_size;
        }
        double dt2 = now() - t1;
        if (nev != n) return 5;

        printf("%6d %10.0f %9.2f %12.3f %12.1f %12.2f\n", levels[li],
               (double)n * sizeof(*r) / dt / 1e6, dt / (double)n * 1e9, (double)out.len / n,
               (double)n * sizeof(*r) / out.len, dt2 / (double)n * 1e9);
        ZSTD_freeDCtx(dctx);
        ftr_buf_free(&pl);
        ftr_buf_free(&out);
        ftr_enc_free(e);
        (void)sum;
    }
    free(r);
    return 0;
}
