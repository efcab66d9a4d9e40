/*
 * fuzz_report.c - libFuzzer target for the trace reader and every view of ftrace-report.
 *
 * An input is read in one of two ways, by its first byte:
 *   even: the rest is a trace file, as is (headers, checksums and all);
 *   odd:  the rest is a list of chunks to build: each
 *           type u8, pid u8, tid u8, tsc_first u16, tsc_span u16, len u16, payload[len]
 *         becomes a chunk with a valid header and a valid zstd frame around the fuzzed
 *         payload, so that the decoders and the views, not the checksums, meet the fuzzed
 *         bytes.
 * The file is then opened and rendered in every view (to /dev/null) with and without the
 * shaper's options, with them keeping only 2 levels of calls (the report's depth_max, which
 * only a forged file reaches otherwise). See docs/report.md for how to run it.
 */
#define _GNU_SOURCE /* memfd_create */
#include "report_lib.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <zstd.h>

static uint32_t fnv1a(const uint8_t *p, size_t n)
{
    uint32_t h = 0x811c9dc5u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x01000193u;
    return h;
}

static void put_chunk(struct ftr_buf *f, unsigned type, unsigned pid, unsigned tid,
                      uint64_t tsc_first, uint64_t tsc_last, uint64_t seq, const uint8_t *p,
                      size_t n)
{
    static ZSTD_CCtx *cctx;
    if (!cctx) {
        cctx = ZSTD_createCCtx();
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_checksumFlag, 1);
        ZSTD_CCtx_setParameter(cctx, ZSTD_c_contentSizeFlag, 1);
    }
    size_t bound = ZSTD_compressBound(n);
    if (ftr_buf_reserve(f, FTR_CHUNK_HEADER_SIZE + bound)) return;
    uint8_t *h = f->data + f->len;
    size_t z = ZSTD_compress2(cctx, h + FTR_CHUNK_HEADER_SIZE, bound, p, n);
    if (ZSTD_isError(z)) return;
    ftr_wr_le32(h, FTR_CHUNK_MAGIC);
    ftr_wr_le16(h + 4, (uint16_t)type);
    ftr_wr_le16(h + 6, 0);
    ftr_wr_le32(h + 8, pid);
    ftr_wr_le32(h + 12, tid);
    ftr_wr_le32(h + 16, (uint32_t)z);
    ftr_wr_le64(h + 20, tsc_first);
    ftr_wr_le64(h + 28, tsc_last);
    ftr_wr_le64(h + 36, seq);
    ftr_wr_le32(h + FTR_CHUNK_HEADER_SIZE - 4, fnv1a(h, FTR_CHUNK_HEADER_SIZE - 4));
    f->len += FTR_CHUNK_HEADER_SIZE + z;
}

static void build(struct ftr_buf *f, const uint8_t *d, size_t n)
{
    ftr_enc_file_header(f);
    while (n >= 9) {
        unsigned type = d[0] % 8, pid = 1 + d[1] % 4, tid = pid + d[2] % 3;
        uint64_t first = ftr_rd_le16(d + 3), span = ftr_rd_le16(d + 5);
        size_t len = ftr_rd_le16(d + 7);
        d += 9;
        n -= 9;
        if (len > n) len = n;
        int ev = type == FTR_CHUNK_EVENTS; /* seq: small, often 0 (lives of a tid) */
        put_chunk(f, type, pid, ev || type == FTR_CHUNK_THREAD ? tid : 0, ev ? first : 0,
                  ev ? first + span : 0, ev ? (first ^ span) % 16 : 0, d, len);
        d += len;
        n -= len;
    }
}

static void views(struct frp_report *r, FILE *out)
{
    static const enum frp_view all[] = {FRP_GRAPH,     FRP_CHROME, FRP_SUMMARY, FRP_FOLDED,
                                        FRP_CALLGRAPH, FRP_FLAME,  FRP_INFO};
    struct frp_opts plain = {.callgraph = "*"};
    struct frp_opts shaped = {.max_depth = 3,
                              .threshold_ns = 20,
                              .has_range = 1,
                              .range_lo_ns = 5,
                              .range_hi_ns = 50000,
                              .per_thread = 1,
                              .no_leaf_compact = 1,
                              .abstime = 1,
                              .color = 1,
                              .callgraph = "main"};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) {
        struct frp_stats st;
        frp_render(r, all[i], &plain, out, &st);
        r->depth_max = 2; /* what a forged file's calls nested deeper than kept meet */
        frp_render(r, all[i], &shaped, out, &st);
        r->depth_max = FTR_DEPTH_MAX;
        char note[256];
        frp_report_note(r, &st, note, sizeof note);
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1) return 0;
    struct ftr_buf f = {0};
    if (data[0] & 1)
        build(&f, data + 1, size - 1);
    else
        ftr_buf_append(&f, data + 1, size - 1);
    int fd = memfd_create("fuzz_report", MFD_CLOEXEC);
    if (fd < 0) abort();
    if (f.len && write(fd, f.data, f.len) != (ssize_t)f.len) abort();
    ftr_buf_free(&f);
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    static FILE *out;
    if (!out) out = fopen("/dev/null", "w");
    struct frp_report *r;
    if (frp_report_open(path, &r) == FTR_OK) {
        frp_report_names(r, (data[0] >> 1) % 3, data[0] & 8);
        views(r, out);
        if (r->nthreads) {
            uint32_t tid = r->threads[0]->tid;
            frp_report_select(r, -1, &tid, 1);
            views(r, out);
        }
        frp_report_close(r);
    }
    close(fd);
    return 0;
}
