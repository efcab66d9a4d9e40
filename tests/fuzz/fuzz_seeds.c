/*
 * fuzz_seeds.c - writes the seed corpus of fuzz_report into a directory: small valid traces
 * (threads, lost events, fork and exec, C++ names, modules, unwinds, specials), each as a raw
 * file (first byte 0) and as a list of chunks to build (first byte 1; see fuzz_report.c), and a
 * damaged multi-process trace (a chunk cut short, a hole of zeros).
 * usage: fuzz_seeds DIR
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftr_format.h"

struct ev {
    unsigned kind;
    uint32_t site;
    uint64_t tsc, arg;
};

static struct ftr_enc *enc;

static void events(struct ftr_buf *f, uint32_t pid, uint32_t tid, const struct ev *e, size_t n)
{
    struct ftr_rec r[64];
    for (size_t i = 0; i < n; i++)
        r[i] = (struct ftr_rec){e[i].tsc, ftr_rec_head(e[i].site, e[i].kind), (uint32_t)e[i].arg};
    ftr_enc_events(enc, pid, tid, r, n, f);
}

static void process(struct ftr_buf *f, uint32_t pid, uint32_t ppid, uint64_t start, const char *cmd)
{
    const char *argv[] = {cmd, "arg"};
    struct ftr_process_info pi = {.pid = pid,
                                  .ppid = ppid,
                                  .start_tsc = start,
                                  .start_realtime_ns = 1700000000000000000ull,
                                  .tsc_hz = 2000000000,
                                  .argc = 2,
                                  .argv = argv,
                                  .exe = cmd};
    ftr_enc_process(enc, &pi, f);
}

static void sites(struct ftr_buf *f, uint32_t pid, uint32_t mod, const char *path,
                  const char *const *names, uint32_t n)
{
    static const uint8_t id[] = {0xde, 0xad, 0xbe, 0xef};
    struct ftr_module_info mi = {
        .module_id = mod, .base = 0x1000 * mod, .path = path, .build_id = id, .build_id_len = 4};
    ftr_enc_module(enc, pid, &mi, f);
    struct ftr_site_info s[16];
    for (uint32_t i = 0; i < n; i++)
        s[i] = (struct ftr_site_info){i + 1 + 10 * (mod - 1), 0x1000 * mod + i * 16,
                                      0x1000 * mod + i * 16, names[i]};
    ftr_enc_sites(enc, pid, mod, s, n, f);
}

static void end(struct ftr_buf *f, uint32_t pid, uint64_t tsc)
{
    struct ftr_end_info ei = {.tsc = tsc, .how = FTR_END_EXIT, .calls = 3, .events = 6};
    ftr_enc_end(enc, pid, &ei, f);
}

#define E(s, t)                                                                                    \
    {                                                                                              \
        FTR_EV_ENTRY, s, t, 0                                                                      \
    }
#define X(s, t)                                                                                    \
    {                                                                                              \
        FTR_EV_EXIT, s, t, 0                                                                       \
    }
#define U(s, t)                                                                                    \
    {                                                                                              \
        FTR_EV_UNWIND, s, t, 0                                                                     \
    }
#define SP(k, t, a)                                                                                \
    {                                                                                              \
        FTR_EV_SPECIAL, k, t, a                                                                    \
    }

static const char *const cnames[] = {
    "main", "leaf", "mid", "_ZN5store7use_boxEi", "0x4242", "_ZNK2OpclEi.isra.0"};

static void seed_threads(struct ftr_buf *f)
{
    static const struct ev a[] = {E(1, 100), E(2, 110), X(2, 130), E(3, 140), E(2, 150)};
    static const struct ev b[] = {X(2, 160), X(3, 170), X(1, 200), SP(FTR_SP_LOST, 210, 5)};
    static const struct ev w[] = {E(4, 120), SP(FTR_SP_OVERRUN, 125, 2), U(4, 180)};
    process(f, 10, 1, 90, "/bin/prog");
    sites(f, 10, 1, "/bin/prog", cnames, 6);
    struct ftr_thread_info ti = {.tid = 11, .what = 1, .tsc = 100, .name = "worker"};
    ftr_enc_thread(enc, 10, &ti, f);
    events(f, 10, 10, a, 5);
    events(f, 10, 11, w, 3);
    events(f, 10, 10, b, 4);
    end(f, 10, 300);
}

static void seed_fork_exec(struct ftr_buf *f)
{
    static const struct ev p[] = {E(1, 100), E(3, 110), E(2, 120), X(2, 125), X(3, 130), X(1, 900)};
    static const struct ev c[] = {E(2, 200), SP(FTR_SP_TRACE_OFF, 210, 0),
                                  SP(FTR_SP_TRACE_ON, 220, 0), X(2, 230)};
    static const struct ev x[] = {E(11, 400), E(12, 410), X(12, 420), X(11, 500)};
    process(f, 20, 1, 50, "/bin/parent");
    sites(f, 20, 1, "/bin/parent", cnames, 3);
    sites(f, 20, 2, "/usr/lib/libstore.so", cnames + 3, 3);
    process(f, 21, 20, 150, "/bin/parent");
    events(f, 20, 20, p, 6);
    events(f, 21, 21, c, 4);
    end(f, 21, 250);
    process(f, 21, 20, 300, "/bin/execd");
    sites(f, 21, 2, "/bin/execd", cnames + 3, 3);
    events(f, 21, 21, x, 4);
}

static void seed_deep(struct ftr_buf *f)
{
    struct ev e[64];
    size_t n = 0;
    for (uint32_t i = 0; i < 30; i++)
        e[n++] = (struct ev)E(1 + i % 3, 1000 + 10 * i);
    for (uint32_t i = 30; i-- > 0;)
        e[n++] =
            (struct ev){i % 7 ? FTR_EV_EXIT : FTR_EV_UNWIND, 1 + i % 3, 2000 + 5 * (30 - i), 0};
    process(f, 30, 1, 1000, "/bin/deep");
    sites(f, 30, 1, "/bin/deep", cnames, 3);
    events(f, 30, 30, e, n);
}

/* The damage: fork_exec with its 7th chunk (the parent's events) cut in half, as by a
 * writer killed in the middle of its write(), and a hole of zeros after the next chunk. */
static void seed_cut(struct ftr_buf *f)
{
    struct ftr_buf g = {0};
    seed_fork_exec(&g);
    struct ftr_chunk_hdr h;
    size_t off = 0;
    static const uint8_t hole[64];
    for (int c = 0; off + FTR_CHUNK_HEADER_SIZE <= g.len && ftr_chunk_hdr_decode(g.data + off, &h);
         c++) {
        size_t n = FTR_CHUNK_HEADER_SIZE + h.payload_size;
        ftr_buf_append(f, g.data + off, c == 6 ? FTR_CHUNK_HEADER_SIZE + h.payload_size / 2 : n);
        if (c == 7) ftr_buf_append(f, hole, sizeof hole);
        off += n;
    }
    ftr_buf_free(&g);
}

/* The structured form: chunks as (type, pid, tid, tsc_first, span, len, payload). */
static void structured(const struct ftr_buf *raw, FILE *out)
{
    char path[] = "/tmp/fuzz_seed_XXXXXX";
    FILE *t = fdopen(mkstemp(path), "w");
    fwrite(raw->data, 1, raw->len, t);
    fclose(t);
    struct ftr_reader *rd;
    if (ftr_reader_open(path, &rd)) return;
    struct ftr_chunk_hdr h;
    uint64_t off;
    struct ftr_buf p = {0};
    fputc(1, out);
    while (ftr_reader_next(rd, &h, &off) == FTR_OK) {
        if (ftr_reader_payload(rd, &p) || p.len > 65535) continue;
        uint8_t hd[9] = {(uint8_t)h.type, (uint8_t)(h.pid - 1), (uint8_t)(h.tid - h.pid)};
        ftr_wr_le16(hd + 3, (uint16_t)h.tsc_first);
        ftr_wr_le16(hd + 5, (uint16_t)(h.tsc_last - h.tsc_first));
        ftr_wr_le16(hd + 7, (uint16_t)p.len);
        fwrite(hd, 1, 9, out);
        fwrite(p.data, 1, p.len, out);
    }
    ftr_buf_free(&p);
    ftr_reader_close(rd);
    remove(path);
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: fuzz_seeds DIR\n");
        return 2;
    }
    static void (*const seeds[])(struct ftr_buf *) = {seed_threads, seed_fork_exec, seed_deep,
                                                      seed_cut};
    enc = ftr_enc_new(1);
    for (size_t i = 0; i < sizeof seeds / sizeof *seeds; i++) {
        struct ftr_buf f = {0};
        ftr_enc_file_header(&f);
        seeds[i](&f);
        char name[4096];
        snprintf(name, sizeof name, "%s/seed%zu-raw", argv[1], i);
        FILE *o = fopen(name, "w");
        if (!o) {
            perror(name);
            return 1;
        }
        fputc(0, o);
        fwrite(f.data, 1, f.len, o);
        fclose(o);
        snprintf(name, sizeof name, "%s/seed%zu-chunks", argv[1], i);
        o = fopen(name, "w");
        structured(&f, o);
        fclose(o);
        ftr_buf_free(&f);
    }
    ftr_enc_free(enc);
    return 0;
}
