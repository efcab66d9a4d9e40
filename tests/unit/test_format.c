/*
 * test_format.c - unit tests of formats/: encoder -> file -> reader -> decoders, damage handling.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ftr_format.h"

/* ---------------------------------------------------------------- helpers */

static char tmp_path[64];

static void cleanup_tmp(void)
{
    if (tmp_path[0]) unlink(tmp_path);
    tmp_path[0] = 0;
}
TestSuite(format, .fini = cleanup_tmp);

/* Writes n bytes to a fresh temporary file; returns its path (valid until the test ends). */
static const char *write_tmp(const void *p, size_t n)
{
    cleanup_tmp();
    strcpy(tmp_path, "/tmp/ftr_test_XXXXXX");
    int fd = mkstemp(tmp_path);
    cr_assert(fd >= 0, "mkstemp: %s", strerror(errno));
    cr_assert_eq(write(fd, p, n), (ssize_t)n);
    close(fd);
    return tmp_path;
}

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;
static uint64_t rnd(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 7;
    rng_state ^= rng_state << 17;
    return rng_state;
}

static struct ftr_enc *enc_new(void)
{
    struct ftr_enc *e = ftr_enc_new(1);
    cr_assert_not_null(e);
    return e;
}

/* A file of n EVENTS chunks for tid 100+i, each holding 50 events with tsc i*1000+j. */
static void build_events_file(struct ftr_buf *f, int nchunks, size_t *chunk_off)
{
    struct ftr_enc *e = enc_new();
    cr_assert_eq(ftr_enc_file_header(f), FTR_OK);
    for (int c = 0; c < nchunks; c++) {
        struct ftr_rec r[50];
        for (int j = 0; j < 50; j++)
            r[j] = (struct ftr_rec){(uint64_t)c * 1000 + j, ftr_rec_head(j + 1, j & 1), 0};
        if (chunk_off) chunk_off[c] = f->len;
        cr_assert_eq(ftr_enc_events(e, 7, 100 + c, r, 50, f), FTR_OK);
    }
    ftr_enc_free(e);
}

/* Reads every chunk, decoding EVENTS; returns the tids seen (in order) and the final status. */
static int read_all(const char *path, uint32_t *tids, int *ntids, struct ftr_damage *d)
{
    struct ftr_reader *r;
    cr_assert_eq(ftr_reader_open(path, &r), FTR_OK);
    struct ftr_buf pl = {0};
    struct ftr_chunk_hdr h;
    int rc;
    *ntids = 0;
    while ((rc = ftr_reader_next(r, &h, NULL)) == FTR_OK) {
        if (ftr_reader_payload(r, &pl) != FTR_OK) continue;
        struct ftr_ev_iter it;
        struct ftr_event ev;
        cr_assert_eq(ftr_dec_events_begin(&h, pl.data, pl.len, &it), FTR_OK);
        int k, n = 0;
        while ((k = ftr_dec_events_next(&it, &ev)) == 1)
            n++;
        cr_assert_eq(k, 0);
        cr_assert_eq(n, 50);
        tids[(*ntids)++] = h.tid;
    }
    ftr_reader_damage(r, d);
    ftr_reader_close(r);
    ftr_buf_free(&pl);
    return rc;
}

/* ---------------------------------------------------------------- basics */

Test(format, names)
{
    cr_assert_str_eq(ftr_strerror(FTR_OK), "success");
    cr_assert_str_eq(ftr_strerror(-FTR_E_CORRUPT), ftr_strerror(FTR_E_CORRUPT));
    cr_assert_str_eq(ftr_strerror(9999), "unknown error");
    cr_assert_str_eq(ftr_chunk_type_name(FTR_CHUNK_EVENTS), "events");
    cr_assert_str_eq(ftr_chunk_type_name(77), "?");
    cr_assert_str_eq(ftr_tsc_cal_name(FTR_TSC_CAL_KERNEL), "kernel tsc_khz");
    cr_assert_str_eq(ftr_end_how_name(FTR_END_SIGNAL), "killed by signal");
    cr_assert_str_eq(ftr_end_how_name(42), "?");
    cr_assert_str_eq(ftr_event_kind_name(FTR_EV_UNWIND), "unwind");
    cr_assert_str_eq(ftr_special_name(FTR_SP_OVERRUN), "overrun");
}

Test(format, buf)
{
    struct ftr_buf b = {0};
    for (int i = 0; i < 10000; i++)
        cr_assert_eq(ftr_buf_append(&b, &i, sizeof(i)), FTR_OK);
    cr_assert_eq(b.len, 10000 * sizeof(int));
    cr_assert_geq(b.cap, b.len);
    for (int i = 0; i < 10000; i++)
        cr_assert_eq(((int *)b.data)[i], i);
    cr_assert_eq(ftr_buf_append(&b, NULL, 0), FTR_OK);
    ftr_buf_free(&b);
    cr_assert_null(b.data);
    cr_assert_eq(b.len + b.cap, 0);
}

Test(format, file_header_bytes)
{
    struct ftr_buf b = {0};
    cr_assert_eq(ftr_enc_file_header(&b), FTR_OK);
    cr_assert_eq(b.len, FTR_FILE_HEADER_SIZE);
    cr_assert_eq(memcmp(b.data, "FTRACE\x1a\x01", 8), 0);
    cr_assert_eq(ftr_rd_le16(b.data + 8), FTR_FORMAT_MAJOR);
    cr_assert_eq(ftr_rd_le16(b.data + 10), FTR_FORMAT_MINOR);
    cr_assert_eq(ftr_rd_le32(b.data + 12), 0);
    ftr_buf_free(&b);
}

/* ---------------------------------------------------------------- round trip of every chunk */

Test(format, roundtrip_all_chunk_types)
{
    struct ftr_enc *e = enc_new();
    struct ftr_buf f = {0};
    const char *argv_in[] = {"/usr/bin/prog", "--flag", "", "ünïcode arg"};
    struct ftr_process_info pi = {.pid = 1234,
                                  .ppid = 1,
                                  .session_id = 0x1122334455667788ull,
                                  .start_realtime_ns = 1700000000123456789ull,
                                  .start_tsc = 987654321012ull,
                                  .tsc_hz = 2995200000ull,
                                  .tsc_calibration = FTR_TSC_CAL_CPUID,
                                  .argc = 4,
                                  .argv = argv_in,
                                  .exe = "/usr/bin/prog"};
    static const uint8_t bid[20] = {0xde, 0xad, 0xbe, 0xef, 0, 1, 2, 3, 4, 5,
                                    6,    7,    8,    9,    0, 0, 0, 0, 0, 0xff};
    struct ftr_module_info mi = {.module_id = 3,
                                 .base = 0x7f0000000000ull,
                                 .load_tsc = 55,
                                 .build_id_len = sizeof(bid),
                                 .build_id = bid,
                                 .path = "/lib/libfoo.so.1"};
    struct ftr_site_info si[4] = {{1, 0x401000, 0x400ffc, "main"},
                                  {2, 0x401100, 0x4010fc, "_ZN3foo3barEv"},
                                  {FTR_SITE_MAX, 0xffffffffffffff00ull, 0x10, NULL},
                                  {7, 0, 0, ""}};
    struct ftr_thread_info ti = {.tid = 1240, .what = 1, .tsc = 999, .name = "worker-1"};
    struct ftr_thread_info ti2 = {.tid = 1241, .what = 2, .tsc = 1999, .name = NULL};
    struct ftr_end_info ei = {.tsc = 123456,
                              .how = FTR_END_SIGNAL,
                              .code = -11,
                              .calls = 77,
                              .events = 1ull << 40,
                              .lost = 2,
                              .sites = 3,
                              .patched = 4,
                              .skipped = 5,
                              .overruns = 6,
                              .bytes_raw = UINT64_MAX};
    struct ftr_rec ev[3] = {{100, ftr_rec_head(1, FTR_EV_ENTRY), 0},
                            {150, ftr_rec_head(FTR_SP_LOST, FTR_EV_SPECIAL), 17},
                            {170, ftr_rec_head(1, FTR_EV_EXIT), 0}};

    cr_assert_eq(ftr_enc_file_header(&f), FTR_OK);
    cr_assert_eq(ftr_enc_process(e, &pi, &f), FTR_OK);
    cr_assert_eq(ftr_enc_module(e, 1234, &mi, &f), FTR_OK);
    cr_assert_eq(ftr_enc_sites(e, 1234, 3, si, 4, &f), FTR_OK);
    cr_assert_eq(ftr_enc_thread(e, 1234, &ti, &f), FTR_OK);
    cr_assert_eq(ftr_enc_events(e, 1234, 1240, ev, 3, &f), FTR_OK);
    cr_assert_eq(ftr_enc_thread(e, 1234, &ti2, &f), FTR_OK);
    cr_assert_eq(ftr_enc_end(e, 1234, &ei, &f), FTR_OK);
    const char *path = write_tmp(f.data, f.len);

    struct ftr_reader *r;
    cr_assert_eq(ftr_reader_open(path, &r), FTR_OK);
    struct ftr_buf pl = {0};
    struct ftr_chunk_hdr h;
    uint64_t off;
    static const unsigned types[] = {FTR_CHUNK_PROCESS, FTR_CHUNK_MODULE, FTR_CHUNK_SITES,
                                     FTR_CHUNK_THREAD,  FTR_CHUNK_EVENTS, FTR_CHUNK_THREAD,
                                     FTR_CHUNK_END};
    uint64_t prev_off = 0;
    for (unsigned c = 0; c < sizeof(types) / sizeof(types[0]); c++) {
        cr_assert_eq(ftr_reader_next(r, &h, &off), FTR_OK, "chunk %u", c);
        cr_assert_eq(h.type, types[c]);
        cr_assert_eq(h.pid, 1234);
        cr_assert_gt(off, prev_off);
        prev_off = off;
        cr_assert_eq(ftr_reader_payload(r, &pl), FTR_OK);
        switch (h.type) {
        case FTR_CHUNK_PROCESS: {
            struct ftr_process_info o;
            const char *av[8];
            cr_assert_eq(ftr_dec_process(pl.data, pl.len, &o, av, 8), FTR_OK);
            cr_assert_eq(h.tid, 0);
            cr_assert_eq(o.pid, pi.pid);
            cr_assert_eq(o.ppid, pi.ppid);
            cr_assert_eq(o.session_id, pi.session_id);
            cr_assert_eq(o.start_realtime_ns, pi.start_realtime_ns);
            cr_assert_eq(o.start_tsc, pi.start_tsc);
            cr_assert_eq(o.tsc_hz, pi.tsc_hz);
            cr_assert_eq(o.tsc_calibration, pi.tsc_calibration);
            cr_assert_str_eq(o.exe, pi.exe);
            cr_assert_eq(o.argc, 4);
            cr_assert_eq((const void *)o.argv, (const void *)av);
            for (int i = 0; i < 4; i++)
                cr_assert_str_eq(o.argv[i], argv_in[i]);
            /* a smaller argv array: filled up to its capacity, argc still right */
            const char *av1[1];
            cr_assert_eq(ftr_dec_process(pl.data, pl.len, &o, av1, 1), FTR_OK);
            cr_assert_eq(o.argc, 4);
            cr_assert_str_eq(av1[0], "/usr/bin/prog");
            break;
        }
        case FTR_CHUNK_MODULE: {
            struct ftr_module_info o;
            cr_assert_eq(ftr_dec_module(pl.data, pl.len, &o), FTR_OK);
            cr_assert_eq(o.module_id, 3);
            cr_assert_eq(o.base, mi.base);
            cr_assert_eq(o.load_tsc, 55);
            cr_assert_eq(o.build_id_len, sizeof(bid));
            cr_assert_eq(memcmp(o.build_id, bid, sizeof(bid)), 0);
            cr_assert_str_eq(o.path, mi.path);
            break;
        }
        case FTR_CHUNK_SITES: {
            uint32_t mid = 0;
            size_t cnt = 0;
            cr_assert_eq(ftr_dec_sites(pl.data, pl.len, &mid, NULL, 0, &cnt), FTR_OK);
            cr_assert_eq(mid, 3);
            cr_assert_eq(cnt, 4);
            struct ftr_site_info o[4];
            cr_assert_eq(ftr_dec_sites(pl.data, pl.len, &mid, o, 4, &cnt), FTR_OK);
            for (int i = 0; i < 4; i++) {
                cr_assert_eq(o[i].site, si[i].site);
                cr_assert_eq(o[i].addr, si[i].addr);
                cr_assert_eq(o[i].func, si[i].func);
                if (si[i].name)
                    cr_assert_str_eq(o[i].name, si[i].name);
                else
                    cr_assert_null(o[i].name);
            }
            break;
        }
        case FTR_CHUNK_THREAD: {
            struct ftr_thread_info o;
            const struct ftr_thread_info *in = c == 3 ? &ti : &ti2;
            cr_assert_eq(ftr_dec_thread(pl.data, pl.len, &o), FTR_OK);
            cr_assert_eq(h.tid, in->tid);
            cr_assert_eq(o.tid, in->tid);
            cr_assert_eq(o.what, in->what);
            cr_assert_eq(o.tsc, in->tsc);
            if (in->name)
                cr_assert_str_eq(o.name, in->name);
            else
                cr_assert_null(o.name);
            break;
        }
        case FTR_CHUNK_EVENTS: {
            cr_assert_eq(h.tid, 1240);
            cr_assert_eq(h.tsc_first, 100);
            cr_assert_eq(h.tsc_last, 170);
            struct ftr_ev_iter it;
            struct ftr_event o;
            cr_assert_eq(ftr_dec_events_begin(&h, pl.data, pl.len, &it), FTR_OK);
            cr_assert_eq(ftr_dec_events_next(&it, &o), 1);
            cr_assert(o.tsc == 100 && o.site == 1 && o.kind == FTR_EV_ENTRY && o.arg == 0);
            cr_assert_eq(ftr_dec_events_next(&it, &o), 1);
            cr_assert(o.tsc == 150 && o.site == FTR_SP_LOST && o.kind == FTR_EV_SPECIAL &&
                      o.arg == 17);
            cr_assert_eq(ftr_dec_events_next(&it, &o), 1);
            cr_assert(o.tsc == 170 && o.site == 1 && o.kind == FTR_EV_EXIT);
            cr_assert_eq(ftr_dec_events_next(&it, &o), 0);
            break;
        }
        case FTR_CHUNK_END: {
            struct ftr_end_info o;
            cr_assert_eq(ftr_dec_end(pl.data, pl.len, &o), FTR_OK);
            cr_assert_eq(memcmp(&o, &ei, sizeof(o)), 0);
            break;
        }
        }
        if (h.type != FTR_CHUNK_EVENTS) cr_assert(h.tsc_first == 0 && h.tsc_last == 0);
    }
    cr_assert_eq(ftr_reader_next(r, &h, &off), FTR_E_EOF);
    cr_assert_eq(ftr_reader_next(r, &h, &off), FTR_E_EOF);
    struct ftr_damage d;
    ftr_reader_damage(r, &d);
    cr_assert(d.skipped_bytes == 0 && d.bad_chunks == 0 && d.truncated == 0);

    /* seek back to the SITES chunk (third) and read on from there */
    cr_assert_eq(ftr_reader_seek(r, FTR_FILE_HEADER_SIZE), FTR_OK);
    cr_assert_eq(ftr_reader_next(r, &h, &off), FTR_OK);
    cr_assert_eq(h.type, FTR_CHUNK_PROCESS);
    cr_assert_eq(ftr_reader_next(r, &h, &off), FTR_OK); /* module, payload never read */
    cr_assert_eq(ftr_reader_next(r, &h, &off), FTR_OK);
    cr_assert_eq(h.type, FTR_CHUNK_SITES);
    uint64_t sites_off = off;
    while (ftr_reader_next(r, &h, &off) == FTR_OK) {
    }
    cr_assert_eq(ftr_reader_seek(r, sites_off), FTR_OK);
    cr_assert_eq(ftr_reader_next(r, &h, &off), FTR_OK);
    cr_assert_eq(h.type, FTR_CHUNK_SITES);
    cr_assert_eq(off, sites_off);
    cr_assert_eq(ftr_reader_payload(r, &pl), FTR_OK);
    cr_assert_eq(ftr_reader_payload(r, &pl), FTR_OK); /* twice is fine */
    size_t cnt;
    cr_assert_eq(ftr_dec_sites(pl.data, pl.len, NULL, NULL, 0, &cnt), FTR_OK);
    cr_assert_eq(cnt, 4);

    ftr_reader_close(r);
    ftr_buf_free(&pl);
    ftr_buf_free(&f);
    ftr_enc_free(e);
}

Test(format, empty_metadata_and_set_level)
{
    struct ftr_enc *e = enc_new();
    cr_assert_eq(ftr_enc_set_level(e, -5), FTR_OK);
    struct ftr_buf f = {0}, pl = {0};
    struct ftr_process_info pi = {0};
    struct ftr_module_info mi = {0};
    cr_assert_eq(ftr_enc_file_header(&f), FTR_OK);
    cr_assert_eq(ftr_enc_process(e, &pi, &f), FTR_OK);
    cr_assert_eq(ftr_enc_set_level(e, 19), FTR_OK);
    cr_assert_eq(ftr_enc_module(e, 9, &mi, &f), FTR_OK);
    cr_assert_eq(ftr_enc_sites(e, 9, 1, NULL, 0, &f), FTR_OK);
    const char *path = write_tmp(f.data, f.len);
    struct ftr_reader *r;
    struct ftr_chunk_hdr h;
    cr_assert_eq(ftr_reader_open(path, &r), FTR_OK);
    cr_assert_eq(ftr_reader_next(r, &h, NULL), FTR_OK);
    cr_assert_eq(ftr_reader_payload(r, &pl), FTR_OK);
    struct ftr_process_info o;
    cr_assert_eq(ftr_dec_process(pl.data, pl.len, &o, NULL, 0), FTR_OK);
    cr_assert(o.argc == 0 && o.exe == NULL && o.pid == 0);
    cr_assert_eq(ftr_reader_next(r, &h, NULL), FTR_OK);
    cr_assert_eq(ftr_reader_payload(r, &pl), FTR_OK);
    struct ftr_module_info m;
    cr_assert_eq(ftr_dec_module(pl.data, pl.len, &m), FTR_OK);
    cr_assert(m.path == NULL && m.build_id == NULL && m.build_id_len == 0);
    cr_assert_eq(ftr_reader_next(r, &h, NULL), FTR_OK);
    cr_assert_eq(ftr_reader_payload(r, &pl), FTR_OK);
    size_t cnt = 99;
    uint32_t mid;
    cr_assert_eq(ftr_dec_sites(pl.data, pl.len, &mid, NULL, 0, &cnt), FTR_OK);
    cr_assert(cnt == 0 && mid == 1);
    cr_assert_eq(ftr_reader_next(r, &h, NULL), FTR_E_EOF);
    ftr_reader_close(r);
    ftr_buf_free(&pl);
    ftr_buf_free(&f);
    ftr_enc_free(e);
}

/* Hand-made TLV payloads: unknown tags skipped, strings must carry their NUL. */
Test(format, tlv_forward_compat_and_strictness)
{
    uint8_t p[64];
    size_t n = 0;
    ftr_wr_le16(p + n, 1000); /* unknown tag */
    ftr_wr_le32(p + n + 2, 3);
    memcpy(p + n + 6, "xyz", 3);
    n += 9;
    ftr_wr_le16(p + n, 1); /* THR_TID */
    ftr_wr_le32(p + n + 2, 4);
    ftr_wr_le32(p + n + 6, 4242);
    n += 10;
    ftr_wr_le16(p + n, 4); /* THR_NAME */
    ftr_wr_le32(p + n + 2, 3);
    memcpy(p + n + 6, "ab", 3);
    n += 9;
    struct ftr_thread_info ti;
    cr_assert_eq(ftr_dec_thread(p, n, &ti), FTR_OK);
    cr_assert_eq(ti.tid, 4242);
    cr_assert_str_eq(ti.name, "ab");
    p[n - 1] = 'c'; /* no NUL */
    cr_assert_eq(ftr_dec_thread(p, n, &ti), FTR_E_CORRUPT);
    cr_assert_eq(ftr_dec_thread(p, n - 1, &ti), FTR_E_CORRUPT); /* cut TLV */
    ftr_wr_le32(p + 9 + 2, 3);                                  /* u32 with len 3 */
    cr_assert_eq(ftr_dec_thread(p, 9 + 9, &ti), FTR_E_CORRUPT);
    cr_assert_eq(ftr_dec_thread(p, 0, &ti), FTR_OK);
}

/* ---------------------------------------------------------------- events */

static void events_roundtrip(const struct ftr_rec *in, size_t n, const struct ftr_event *want,
                             size_t nwant, size_t *file_bytes)
{
    struct ftr_enc *e = enc_new();
    struct ftr_buf f = {0}, pl = {0};
    cr_assert_eq(ftr_enc_file_header(&f), FTR_OK);
    cr_assert_eq(ftr_enc_events(e, 1, 2, in, n, &f), FTR_OK);
    /* the encoder's own counts: every event it kept, and of them the entries */
    uint64_t events, calls, want_calls = 0;
    ftr_enc_last_counts(e, &events, &calls);
    for (size_t i = 0; i < nwant; i++)
        want_calls += want[i].kind == FTR_EV_ENTRY;
    cr_assert_eq(events, nwant);
    cr_assert_eq(calls, want_calls);
    if (file_bytes) *file_bytes = f.len - FTR_FILE_HEADER_SIZE;
    const char *path = write_tmp(f.data, f.len);
    struct ftr_reader *r;
    struct ftr_chunk_hdr h;
    cr_assert_eq(ftr_reader_open(path, &r), FTR_OK);
    if (nwant == 0) {
        cr_assert_eq(ftr_reader_next(r, &h, NULL), FTR_E_EOF);
    } else {
        cr_assert_eq(ftr_reader_next(r, &h, NULL), FTR_OK);
        cr_assert_eq(h.type, FTR_CHUNK_EVENTS);
        cr_assert_eq(h.tid, 2);
        cr_assert_eq(h.tsc_first, want[0].tsc);
        cr_assert_eq(h.tsc_last, want[nwant - 1].tsc);
        cr_assert_eq(ftr_reader_payload(r, &pl), FTR_OK);
        struct ftr_ev_iter it;
        struct ftr_event ev;
        cr_assert_eq(ftr_dec_events_begin(&h, pl.data, pl.len, &it), FTR_OK);
        for (size_t i = 0; i < nwant; i++) {
            cr_assert_eq(ftr_dec_events_next(&it, &ev), 1, "event %zu", i);
            cr_assert_eq(ev.tsc, want[i].tsc, "event %zu", i);
            cr_assert_eq(ev.site, want[i].site, "event %zu", i);
            cr_assert_eq(ev.kind, want[i].kind, "event %zu", i);
            cr_assert_eq(ev.arg, want[i].arg, "event %zu", i);
        }
        cr_assert_eq(ftr_dec_events_next(&it, &ev), 0);
        cr_assert_eq(ftr_reader_next(r, &h, NULL), FTR_E_EOF);
    }
    ftr_reader_close(r);
    ftr_buf_free(&pl);
    ftr_buf_free(&f);
    ftr_enc_free(e);
}

Test(format, events_specials_empty_slots_clamp_large_deltas)
{
    const uint64_t big = 1ull << 40;
    struct ftr_rec in[] = {
        {0, 0, 0}, /* leading empty slot */
        {1000, ftr_rec_head(5, FTR_EV_ENTRY), 0},
        {0, 0, 0},                               /* empty slot */
        {990, ftr_rec_head(6, FTR_EV_ENTRY), 0}, /* tsc goes back: clamped to 1000 */
        {1100, ftr_rec_head(FTR_SP_OVERRUN, FTR_EV_SPECIAL), 0xffffffffu},
        {1100, ftr_rec_head(FTR_SP_LOST, FTR_EV_SPECIAL), 0}, /* special with subtype 0 */
        {1100 + big, ftr_rec_head(6, FTR_EV_UNWIND), 0},      /* delta > 2^32 */
        {UINT64_MAX, ftr_rec_head(FTR_SITE_MAX, FTR_EV_EXIT), 0},
        {5, ftr_rec_head(FTR_SITE_MAX, FTR_EV_ENTRY), 0}, /* clamped to UINT64_MAX */
        {0, 0, 0},
        {0, 0, 0}, /* trailing empty slots */
    };
    struct ftr_event want[] = {
        {1000, 5, FTR_EV_ENTRY, 0},
        {1000, 6, FTR_EV_ENTRY, 0},
        {1100, FTR_SP_OVERRUN, FTR_EV_SPECIAL, 0xffffffffu},
        {1100, FTR_SP_LOST, FTR_EV_SPECIAL, 0},
        {1100 + big, 6, FTR_EV_UNWIND, 0},
        {UINT64_MAX, FTR_SITE_MAX, FTR_EV_EXIT, 0},
        {UINT64_MAX, FTR_SITE_MAX, FTR_EV_ENTRY, 0},
    };
    events_roundtrip(in, sizeof(in) / sizeof(in[0]), want, sizeof(want) / sizeof(want[0]), NULL);
}

Test(format, events_all_empty_appends_nothing)
{
    struct ftr_rec in[4] = {0};
    struct ftr_enc *e = enc_new();
    struct ftr_buf f = {0};
    cr_assert_eq(ftr_enc_events(e, 1, 2, in, 4, &f), FTR_OK);
    cr_assert_eq(ftr_enc_events(e, 1, 2, in, 0, &f), FTR_OK);
    cr_assert_eq(f.len, 0);
    ftr_buf_free(&f);
    ftr_enc_free(e);
    events_roundtrip(in, 4, NULL, 0, NULL);
}

Test(format, events_many_random)
{
    enum { N = 100000 };
    struct ftr_rec *in = calloc(N, sizeof(*in));
    struct ftr_event *want = calloc(N, sizeof(*want));
    size_t nw = 0;
    uint64_t tsc = 1ull << 50, prev = 0;
    for (size_t i = 0; i < N; i++) {
        unsigned sel = rnd() % 100;
        if (sel < 3) continue; /* empty slot */
        uint64_t shift = rnd() % 4 == 0 ? rnd() % 40 : 8;
        tsc += rnd() % (1ull << shift);
        uint64_t t = sel < 5 ? tsc - rnd() % 1000 : tsc; /* some go backwards */
        uint32_t site = sel < 10 ? FTR_SITE_MAX - (uint32_t)(rnd() % 3) : 1 + rnd() % 5000;
        unsigned kind = rnd() % 4;
        uint32_t arg = 0;
        if (kind == FTR_EV_SPECIAL) {
            site = rnd() % 4;
            arg = (uint32_t)rnd();
        }
        in[i] = (struct ftr_rec){t, ftr_rec_head(site, kind), arg};
        if (in[i].head == 0) continue; /* site 0 entry: an empty slot by definition */
        uint64_t eff = nw && t < prev ? prev : t;
        want[nw++] = (struct ftr_event){eff, site, (uint8_t)kind, arg};
        prev = eff;
    }
    size_t bytes;
    events_roundtrip(in, N, want, nw, &bytes);
    cr_log_info("100k random events: %zu bytes, %.2f bytes/event", bytes, (double)bytes / nw);
    free(in);
    free(want);
}

/* A fib(n)-like call tree: entry/exit of a few sites, 60-250 cycle deltas. */
static size_t fib_pattern(struct ftr_rec *r, size_t cap)
{
    size_t n = 0;
    uint64_t tsc = 1000000;
    uint32_t stack[64];
    int depth = 0, want_depth = 20;
    while (n < cap) {
        tsc += 60 + rnd() % 64 + (rnd() % 16 == 0 ? rnd() % 128 : 0);
        if (depth < want_depth && (depth == 0 || rnd() % 2)) {
            stack[depth] = depth < 2 ? (uint32_t)(10 + depth) : 100 + (uint32_t)(rnd() % 2);
            r[n++] = (struct ftr_rec){tsc, ftr_rec_head(stack[depth++], FTR_EV_ENTRY), 0};
        } else {
            r[n++] = (struct ftr_rec){tsc, ftr_rec_head(stack[--depth], FTR_EV_EXIT), 0};
        }
    }
    return n;
}

Test(format, events_fib_like_size)
{
    enum { N = 1 << 16 }; /* 16 chunks of 4096 records = 64 KiB each */
    struct ftr_rec *in = calloc(N, sizeof(*in));
    fib_pattern(in, N);
    static const int levels[] = {-5, -1, 1, 3};
    for (size_t li = 0; li < sizeof(levels) / sizeof(levels[0]); li++) {
        int level = levels[li];
        struct ftr_enc *e = ftr_enc_new(level);
        struct ftr_buf f = {0};
        for (size_t i = 0; i < N; i += 4096)
            cr_assert_eq(ftr_enc_events(e, 1, 1, in + i, 4096, &f), FTR_OK);
        cr_log_info("fib-like, zstd level %d: %.3f bytes/event (incl. chunk headers)", level,
                    (double)f.len / N);
        cr_assert_lt(f.len, (size_t)N * 4); /* generous: expect about 1 */
        ftr_buf_free(&f);
        ftr_enc_free(e);
    }
    free(in);
}

/* ---------------------------------------------------------------- damage */

Test(format, open_errors)
{
    struct ftr_reader *r = (void *)1;
    cr_assert_eq(ftr_reader_open("/nonexistent/ftr", &r), FTR_E_IO);
    cr_assert_eq(errno, ENOENT);
    cr_assert_null(r);
    cr_assert_eq(ftr_reader_open(write_tmp("", 0), &r), FTR_E_EMPTY);
    cr_assert_eq(ftr_reader_open(write_tmp("hello world, this is text\n", 26), &r),
                 FTR_E_NOT_TRACE);
    cr_assert_eq(ftr_reader_open(write_tmp("FTR", 3), &r), FTR_E_TRUNCATED);
    cr_assert_eq(ftr_reader_open(write_tmp("XTR", 3), &r), FTR_E_NOT_TRACE);
    uint8_t hdr[16];
    struct ftr_buf b = {0};
    ftr_enc_file_header(&b);
    memcpy(hdr, b.data, 16);
    ftr_buf_free(&b);
    cr_assert_eq(ftr_reader_open(write_tmp(hdr, 12), &r), FTR_E_TRUNCATED);
    ftr_wr_le16(hdr + 8, FTR_FORMAT_MAJOR + 1);
    cr_assert_eq(ftr_reader_open(write_tmp(hdr, 16), &r), FTR_E_VERSION);
    ftr_wr_le16(hdr + 8, FTR_FORMAT_MAJOR);
    ftr_wr_le16(hdr + 10, FTR_FORMAT_MINOR + 7); /* newer minor: fine */
    cr_assert_eq(ftr_reader_open(write_tmp(hdr, 16), &r), FTR_OK);
    struct ftr_chunk_hdr h;
    cr_assert_eq(ftr_reader_next(r, &h, NULL), FTR_E_EOF);
    ftr_reader_close(r);
}

Test(format, truncated_in_header)
{
    struct ftr_buf f = {0};
    size_t off[3];
    build_events_file(&f, 3, off);
    for (size_t cut = off[2] + 1; cut < off[2] + FTR_CHUNK_HEADER_SIZE; cut += 7) {
        uint32_t tids[4];
        int n;
        struct ftr_damage d;
        cr_assert_eq(read_all(write_tmp(f.data, cut), tids, &n, &d), FTR_E_TRUNCATED, "%zu", cut);
        cr_assert_eq(n, 2);
        cr_assert(tids[0] == 100 && tids[1] == 101);
        cr_assert_eq(d.truncated, 1);
        cr_assert_eq(d.bad_chunks, 0);
    }
    ftr_buf_free(&f);
}

Test(format, truncated_in_payload)
{
    struct ftr_buf f = {0};
    size_t off[3];
    build_events_file(&f, 3, off);
    size_t cut = off[2] + FTR_CHUNK_HEADER_SIZE + (f.len - off[2] - FTR_CHUNK_HEADER_SIZE) / 2;
    uint32_t tids[4];
    int n;
    struct ftr_damage d;
    cr_assert_eq(read_all(write_tmp(f.data, cut), tids, &n, &d), FTR_E_TRUNCATED);
    cr_assert_eq(n, 2);
    cr_assert(tids[0] == 100 && tids[1] == 101);
    cr_assert(d.truncated == 1 && d.bad_chunks == 0 && d.skipped_bytes == 0);
    /* a cut exactly at a chunk boundary is a clean end */
    cr_assert_eq(read_all(write_tmp(f.data, off[2]), tids, &n, &d), FTR_E_EOF);
    cr_assert(n == 2 && d.truncated == 0);
    ftr_buf_free(&f);
}

Test(format, corrupt_payload_counted_and_skipped)
{
    struct ftr_buf f = {0};
    size_t off[3];
    build_events_file(&f, 3, off);
    size_t mid = off[1] + FTR_CHUNK_HEADER_SIZE + (off[2] - off[1] - FTR_CHUNK_HEADER_SIZE) / 2;
    f.data[mid] ^= 0x55;
    f.data[mid + 1] ^= 0xff;
    uint32_t tids[4];
    int n;
    struct ftr_damage d;
    cr_assert_eq(read_all(write_tmp(f.data, f.len), tids, &n, &d), FTR_E_EOF);
    cr_assert_eq(n, 2);
    cr_assert(tids[0] == 100 && tids[1] == 102);
    cr_assert_eq(d.bad_chunks, 1);
    cr_assert_eq(d.skipped_bytes, 0);
    cr_assert_eq(d.truncated, 0);
    ftr_buf_free(&f);
}

Test(format, corrupt_header_resync)
{
    struct ftr_buf f = {0};
    size_t off[3];
    build_events_file(&f, 3, off);
    for (int field = 0; field < 3; field++) {
        struct ftr_buf g = {0};
        ftr_buf_append(&g, f.data, f.len);
        /* damage the magic, a checked field (tid) or the check itself of the middle chunk */
        static const int at[] = {0, 13, 38};
        g.data[off[1] + at[field]] ^= 0x20;
        uint32_t tids[4];
        int n;
        struct ftr_damage d;
        cr_assert_eq(read_all(write_tmp(g.data, g.len), tids, &n, &d), FTR_E_EOF);
        cr_assert_eq(n, 2, "field %d", field);
        cr_assert(tids[0] == 100 && tids[1] == 102);
        cr_assert_eq(d.skipped_bytes, off[2] - off[1]);
        cr_assert_eq(d.bad_chunks, 0);
        ftr_buf_free(&g);
    }
    /* garbage inserted between chunks, some of it looking like a chunk magic */
    struct ftr_buf g = {0};
    ftr_buf_append(&g, f.data, off[2]);
    static const char junk[] = "FCHKFCHjunkFCHK-and-more-junk-FC";
    ftr_buf_append(&g, junk, sizeof(junk) - 1);
    ftr_buf_append(&g, f.data + off[2], f.len - off[2]);
    ftr_buf_append(&g, "xyz", 3); /* trailing junk, not a magic prefix */
    uint32_t tids[4];
    int n;
    struct ftr_damage d;
    cr_assert_eq(read_all(write_tmp(g.data, g.len), tids, &n, &d), FTR_E_EOF);
    cr_assert_eq(n, 3);
    cr_assert_eq(tids[2], 102);
    cr_assert_eq(d.skipped_bytes, sizeof(junk) - 1 + 3);
    cr_assert_eq(d.truncated, 0);
    ftr_buf_free(&g);
    ftr_buf_free(&f);
}

Test(format, resync_over_large_garbage)
{
    /* more garbage than the reader's window: 1 MiB of random bytes between two chunks */
    struct ftr_buf f = {0}, g = {0};
    size_t off[2];
    build_events_file(&f, 2, off);
    ftr_buf_append(&g, f.data, off[1]);
    for (int i = 0; i < (1 << 20); i++) {
        uint8_t b = (uint8_t)rnd();
        ftr_buf_append(&g, &b, 1);
    }
    ftr_buf_append(&g, f.data + off[1], f.len - off[1]);
    uint32_t tids[4];
    int n;
    struct ftr_damage d;
    cr_assert_eq(read_all(write_tmp(g.data, g.len), tids, &n, &d), FTR_E_EOF);
    cr_assert_eq(n, 2);
    cr_assert_eq(d.skipped_bytes, 1 << 20);
    ftr_buf_free(&g);
    ftr_buf_free(&f);
}

/* Serves n bytes through a fresh FIFO from a child process, in 100-byte pieces; *child is its pid.
 * @return the FIFO's path (fifo_done() removes it). */
static char fifo_dir[32], fifo_path[64];
static const char *fifo_serve(const void *p, size_t n, pid_t *child)
{
    strcpy(fifo_dir, "/tmp/ftr_fifo_XXXXXX");
    cr_assert_not_null(mkdtemp(fifo_dir));
    snprintf(fifo_path, sizeof(fifo_path), "%s/fifo", fifo_dir);
    cr_assert_eq(mkfifo(fifo_path, 0600), 0);
    *child = fork();
    if (*child == 0) {
        alarm(20); /* never outlive a failed test, blocked in open() */
        int fd = open(fifo_path, O_WRONLY);
        for (size_t i = 0; i < n; i += 100) /* in small pieces */
            if (write(fd, (const uint8_t *)p + i, n - i < 100 ? n - i : 100) < 0) _exit(1);
        _exit(0);
    }
    return fifo_path;
}

static void fifo_done(pid_t child)
{
    int st;
    waitpid(child, &st, 0);
    unlink(fifo_path);
    rmdir(fifo_dir);
}

Test(format, read_from_pipe)
{
    struct ftr_buf f = {0};
    build_events_file(&f, 5, NULL);
    pid_t child;
    const char *fifo = fifo_serve(f.data, f.len, &child);
    uint32_t tids[8];
    int n;
    struct ftr_damage d;
    cr_assert_eq(read_all(fifo, tids, &n, &d), FTR_E_EOF);
    cr_assert_eq(n, 5);
    cr_assert_eq(tids[4], 104);
    fifo_done(child);
    ftr_buf_free(&f);
}

/* ---------------------------------------------------------------- resynchronisation */
/*
 * A session of two processes (pids 7 and 8) appending whole chunks to one file, interleaved:
 * PROCESS, EVENTS of various sizes (chunk 5 larger than the reader's 64 KiB window, 4 and 7
 * tiny), END. Every hostile edit below must cost exactly the chunks it touches.
 */
#define MP_N 12
#define HDR FTR_CHUNK_HEADER_SIZE
struct mp {
    struct ftr_buf f;
    size_t off[MP_N + 1], len[MP_N];
    uint32_t pid[MP_N], tid[MP_N];
    int nev[MP_N]; /* events of an EVENTS chunk; -1 for PROCESS and END */
};

static void mp_build(struct mp *m)
{
    static const int nev[MP_N] = {-1, -1, 300, 40, 3, 30000, 200, 2, 500, 120, -1, -1};
    struct ftr_enc *e = enc_new();
    memset(m, 0, sizeof(*m));
    cr_assert_eq(ftr_enc_file_header(&m->f), FTR_OK);
    uint64_t tsc = 1000;
    for (int c = 0; c < MP_N; c++) {
        uint32_t pid = 7 + (c & 1);
        m->off[c] = m->f.len;
        m->pid[c] = pid;
        m->nev[c] = nev[c];
        if (c < 2) {
            const char *av[] = {"/bin/mp"};
            struct ftr_process_info pi = {.pid = pid, .argc = 1, .argv = av, .exe = av[0]};
            cr_assert_eq(ftr_enc_process(e, &pi, &m->f), FTR_OK);
        } else if (nev[c] < 0) {
            struct ftr_end_info ei = {.tsc = tsc, .how = FTR_END_EXIT, .calls = (uint64_t)c};
            cr_assert_eq(ftr_enc_end(e, pid, &ei, &m->f), FTR_OK);
        } else {
            struct ftr_rec *r = calloc((size_t)nev[c], sizeof(*r));
            for (int j = 0; j < nev[c]; j++)
                r[j] = (struct ftr_rec){tsc += 1 + rnd() % 5000,
                                        ftr_rec_head(1 + (uint32_t)(rnd() % 60000), j & 1), 0};
            m->tid[c] = pid * 100 + (uint32_t)c;
            cr_assert_eq(ftr_enc_events(e, pid, m->tid[c], r, (size_t)nev[c], &m->f), FTR_OK);
            free(r);
        }
        m->len[c] = m->f.len - m->off[c];
    }
    m->off[MP_N] = m->f.len;
    ftr_enc_free(e);
    cr_assert_gt(m->len[5], 70000, "chunk 5 must not fit the reader's window");
}

struct seen {
    uint64_t off;
    uint32_t pid, tid;
    int nev;
};

/* Reads every chunk of path and decodes its payload (EVENTS to the last event); chunks whose
 * payload does not decode are left out (the reader counts them). With seek, then seeks back to
 * every chunk returned and checks that it reads the same again, without new damage. */
static int mp_read(const char *path, int seek, struct seen *s, int *n, struct ftr_damage *d)
{
    struct ftr_reader *r;
    cr_assert_eq(ftr_reader_open(path, &r), FTR_OK);
    struct ftr_buf pl = {0};
    struct ftr_chunk_hdr h;
    uint64_t off;
    int rc;
    *n = 0;
    while ((rc = ftr_reader_next(r, &h, &off)) == FTR_OK) {
        cr_assert_lt(*n, 4 * MP_N);
        if (ftr_reader_payload(r, &pl) != FTR_OK) continue;
        struct seen *e = &s[(*n)++];
        *e = (struct seen){off, h.pid, h.tid, -1};
        if (h.type == FTR_CHUNK_EVENTS) {
            struct ftr_ev_iter it;
            struct ftr_event ev;
            int k;
            cr_assert_eq(ftr_dec_events_begin(&h, pl.data, pl.len, &it), FTR_OK);
            for (e->nev = 0; (k = ftr_dec_events_next(&it, &ev)) == 1;)
                e->nev++;
            cr_assert_eq(k, 0);
        } else if (h.type == FTR_CHUNK_PROCESS) {
            struct ftr_process_info pi;
            const char *av[2];
            cr_assert_eq(ftr_dec_process(pl.data, pl.len, &pi, av, 2), FTR_OK);
            cr_assert_eq(pi.pid, h.pid);
        } else {
            struct ftr_end_info ei;
            cr_assert_eq(h.type, FTR_CHUNK_END);
            cr_assert_eq(ftr_dec_end(pl.data, pl.len, &ei), FTR_OK);
        }
    }
    cr_assert_eq(ftr_reader_next(r, &h, &off), FTR_E_EOF); /* and it stays there */
    ftr_reader_damage(r, d);
    for (int i = 0; seek && i < *n; i++) {
        cr_assert_eq(ftr_reader_seek(r, s[i].off), FTR_OK);
        cr_assert_eq(ftr_reader_next(r, &h, &off), FTR_OK);
        cr_assert(off == s[i].off && h.pid == s[i].pid && h.tid == s[i].tid);
        cr_assert_eq(ftr_reader_payload(r, &pl), FTR_OK);
    }
    struct ftr_damage d2;
    ftr_reader_damage(r, &d2);
    cr_assert_eq(memcmp(&d2, d, sizeof(d2)), 0, "seeking back to good chunks adds no damage");
    ftr_reader_close(r);
    ftr_buf_free(&pl);
    return rc;
}

/* Checks that exactly the chunks of m not in the bit mask lost were read, whole and in order. */
static void mp_expect(const struct mp *m, const struct seen *s, int n, unsigned lost,
                      const char *what)
{
    int k = 0;
    for (int c = 0; c < MP_N; c++) {
        if (lost >> c & 1) continue;
        cr_assert_lt(k, n, "%s: chunk %d missing", what, c);
        cr_assert(s[k].pid == m->pid[c] && s[k].tid == m->tid[c], "%s: chunk %d", what, c);
        cr_assert_eq(s[k].nev, m->nev[c], "%s: chunk %d", what, c);
        k++;
    }
    cr_assert_eq(k, n, "%s: %d chunks read, %d expected", what, n, k);
}

/* g = m's file with its bytes [a, b) replaced by the n bytes at p */
static void mp_edit(const struct mp *m, struct ftr_buf *g, size_t a, size_t b, const void *p,
                    size_t n)
{
    g->len = 0;
    cr_assert_eq(ftr_buf_append(g, m->f.data, a), FTR_OK);
    cr_assert_eq(ftr_buf_append(g, p, n), FTR_OK);
    cr_assert_eq(ftr_buf_append(g, m->f.data + b, m->f.len - b), FTR_OK);
}

/* Reads g (a regular file, then again through a pipe when pipe is set) and checks the chunks
 * read (all of m's but lost), the status rc and the damage: skip bytes skipped in one run at
 * skip_off (when skip), of which nchunks chunks with a valid header. */
static void mp_check(const struct mp *m, const struct ftr_buf *g, unsigned lost, int rc,
                     uint64_t skip, uint64_t skip_off, uint64_t nchunks, int pipe, const char *what)
{
    struct seen s[4 * MP_N];
    int n;
    struct ftr_damage d;
    for (int how = 0; how <= pipe; how++) {
        pid_t child = 0;
        const char *path = how ? fifo_serve(g->data, g->len, &child) : write_tmp(g->data, g->len);
        cr_assert_eq(mp_read(path, !how, s, &n, &d), rc, "%s", what);
        if (how) fifo_done(child);
        mp_expect(m, s, n, lost, what);
        cr_assert_eq(d.skipped_bytes, skip, "%s: skipped %llu", what,
                     (unsigned long long)d.skipped_bytes);
        cr_assert_eq(d.skipped_chunks, nchunks, "%s", what);
        cr_assert_eq(d.skipped_runs, skip ? 1 : 0, "%s", what);
        cr_assert_eq(d.first_skip_off, skip ? skip_off : 0, "%s", what);
        cr_assert_eq(d.first_skip_len, skip, "%s", what);
        cr_assert(d.last_skip_off == d.first_skip_off && d.last_skip_len == skip, "%s", what);
        cr_assert_eq(d.truncated, rc == FTR_E_TRUNCATED, "%s", what);
    }
}

Test(format, resync_chunk_cut_short_in_multiprocess_file)
{
    /* the issue: a writer killed in the middle of a chunk, other processes' chunks after it */
    struct mp m;
    mp_build(&m);
    struct ftr_buf g = {0};
    char what[64];
    static const int victims[] = {0, 2, 3, 4, 5, 7, 8, 10};
    for (size_t v = 0; v < sizeof(victims) / sizeof(victims[0]); v++) {
        int c = victims[v];
        size_t step = m.len[c] > 2000 ? m.len[c] / 97 : 1; /* every cut of the small chunks */
        for (size_t keep = 1; keep < m.len[c]; keep += step) {
            snprintf(what, sizeof(what), "chunk %d cut to %zu bytes", c, keep);
            mp_edit(&m, &g, m.off[c] + keep, m.off[c + 1], NULL, 0);
            mp_check(&m, &g, 1u << c, FTR_E_EOF, keep, m.off[c], keep >= HDR, 0, what);
        }
        /* the case: the second half dropped, through a pipe too */
        size_t keep = HDR + (m.len[c] - HDR) / 2;
        snprintf(what, sizeof(what), "chunk %d halved", c);
        mp_edit(&m, &g, m.off[c] + keep, m.off[c + 1], NULL, 0);
        mp_check(&m, &g, 1u << c, FTR_E_EOF, keep, m.off[c], 1, 1, what);
    }
    /* the last chunk cut: the file ends inside it */
    size_t keep = HDR + (m.len[MP_N - 1] - HDR) / 2;
    mp_edit(&m, &g, m.off[MP_N - 1] + keep, m.f.len, NULL, 0);
    mp_check(&m, &g, 1u << (MP_N - 1), FTR_E_TRUNCATED, 0, 0, 0, 1, "last chunk cut");
    struct seen s[4 * MP_N];
    int n;
    struct ftr_damage d;
    mp_read(write_tmp(g.data, g.len), 1, s, &n, &d);
    cr_assert_eq(d.truncated_off, m.off[MP_N - 1]);
    ftr_buf_free(&g);
    ftr_buf_free(&m.f);
}

Test(format, resync_cut_chunk_whose_size_lands_on_a_header)
{
    /* chunk c cut by exactly the length of the k chunks after it: its size field then ends
     * right on the header of chunk c+k+1 (or at the end of the file), swallowing k headers */
    struct mp m;
    mp_build(&m);
    struct ftr_buf g = {0};
    static const int cases[][2] = {{2, 1}, {2, 2}, {6, 1}, {8, 1}, {9, 2}, {5, 3}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int c = cases[i][0], k = cases[i][1];
        size_t follow = m.off[c + k + 1] - m.off[c + 1];
        cr_assert_gt(m.len[c], follow + HDR);
        size_t keep = m.len[c] - follow;
        char what[64];
        snprintf(what, sizeof(what), "chunk %d less %d chunks", c, k);
        mp_edit(&m, &g, m.off[c] + keep, m.off[c + 1], NULL, 0);
        mp_check(&m, &g, 1u << c, FTR_E_EOF, keep, m.off[c], 1, 1, what);
    }
    ftr_buf_free(&g);
    ftr_buf_free(&m.f);
}

/* An FNV-1a-checked chunk header (docs/format.md), written here independently of the library. */
static void put_hdr(uint8_t *p, unsigned type, uint32_t pid, uint32_t tid, uint32_t size)
{
    memset(p, 0, HDR);
    ftr_wr_le32(p, FTR_CHUNK_MAGIC);
    ftr_wr_le16(p + 4, (uint16_t)type);
    ftr_wr_le32(p + 8, pid);
    ftr_wr_le32(p + 12, tid);
    ftr_wr_le32(p + 16, size);
    uint32_t h = 0x811c9dc5u; /* over everything before it (seq at 36 stays 0) */
    for (int i = 0; i < HDR - 4; i++)
        h = (h ^ p[i]) * 0x01000193u;
    ftr_wr_le32(p + HDR - 4, h);
}

Test(format, resync_garbage_and_phantom_headers)
{
    struct mp m;
    mp_build(&m);
    struct ftr_buf g = {0};
    uint8_t junk[800 + HDR];
    for (size_t i = 0; i < sizeof(junk); i++)
        junk[i] = (uint8_t)rnd();
    memcpy(junk + 100, "FCHKFCHK", 8); /* magics without a valid header */
    static const int at[] = {0, 1, 4, 5, 6, MP_N - 1, MP_N};
    for (size_t i = 0; i < sizeof(at) / sizeof(at[0]); i++) {
        size_t o = m.off[at[i]];
        char what[64];
        snprintf(what, sizeof(what), "junk before chunk %d", at[i]);
        junk[sizeof(junk) - 1] = 'x'; /* not a magic prefix, should it end the file */
        mp_edit(&m, &g, o, o, junk, 800);
        mp_check(&m, &g, 0, FTR_E_EOF, 800, o, 0, at[i] == 5, what);
        /* a valid header without its payload: its size swallows the following chunks */
        put_hdr(junk + 800 - HDR, FTR_CHUNK_EVENTS, 8, 9, (uint32_t)m.len[5]);
        snprintf(what, sizeof(what), "phantom header before chunk %d", at[i]);
        mp_edit(&m, &g, o, o, junk, 800);
        if (at[i] < MP_N)
            mp_check(&m, &g, 0, FTR_E_EOF, 800, o, 1, at[i] == 5, what);
        else /* at the very end, it is a chunk the file ends inside */
            mp_check(&m, &g, 0, FTR_E_TRUNCATED, 800 - HDR, o, 0, 0, what);
        /* ... or whose size runs past the end of the file */
        put_hdr(junk + 800 - HDR, FTR_CHUNK_END, 8, 0, 1u << 20);
        snprintf(what, sizeof(what), "past-EOF phantom before chunk %d", at[i]);
        mp_edit(&m, &g, o, o, junk, 800);
        if (at[i] < MP_N)
            mp_check(&m, &g, 0, FTR_E_EOF, 800, o, 1, at[i] == 5, what);
        else
            mp_check(&m, &g, 0, FTR_E_TRUNCATED, 800 - HDR, o, 0, 0, what);
        memcpy(junk + 800 - HDR, junk + 800, HDR); /* random again */
    }
    ftr_buf_free(&g);
    ftr_buf_free(&m.f);
}

Test(format, resync_size_field_past_eof_or_too_small)
{
    struct mp m;
    mp_build(&m);
    struct ftr_buf g = {0};
    struct {
        int c;
        int64_t delta; /* added to payload_size; INT64_MAX: the largest valid size */
    } cases[] = {{5, INT64_MAX}, {5, 1000}, {5, 1},  {5, -1},  {5, -30000}, {3, -1},
                 {3, -100},      {2, 70},   {8, 20}, {0, -10}, {10, 5},     {11, -1}};
    for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
        int c = cases[i].c;
        uint32_t size = (uint32_t)(m.len[c] - HDR);
        size = cases[i].delta == INT64_MAX ? FTR_CHUNK_MAX_PAYLOAD
                                           : (uint32_t)((int64_t)size + cases[i].delta);
        char what[64];
        snprintf(what, sizeof(what), "chunk %d size %u", c, size);
        mp_edit(&m, &g, 0, 0, NULL, 0);
        put_hdr(g.data + m.off[c],
                c < 2          ? FTR_CHUNK_PROCESS
                : m.nev[c] < 0 ? FTR_CHUNK_END
                               : FTR_CHUNK_EVENTS,
                m.pid[c], m.tid[c], size);
        mp_check(&m, &g, 1u << c, FTR_E_EOF, m.len[c], m.off[c], 1, c == 5, what);
    }
    /* the last chunk's size past the end of the file: the file ends inside that chunk */
    mp_edit(&m, &g, 0, 0, NULL, 0);
    put_hdr(g.data + m.off[MP_N - 1], FTR_CHUNK_END, m.pid[MP_N - 1], 0, 1u << 20);
    mp_check(&m, &g, 1u << (MP_N - 1), FTR_E_TRUNCATED, 0, 0, 0, 1, "last chunk too long");
    ftr_buf_free(&g);
    ftr_buf_free(&m.f);
}

Test(format, resync_over_zero_runs)
{
    /* a crash can leave holes: the file's size was extended, the data never written */
    struct mp m;
    mp_build(&m);
    struct ftr_buf g = {0};
    static uint8_t zeros[200000];
    size_t tail = (64 << 10) + 5; /* more than the reader's window */
    mp_edit(&m, &g, m.off[7], m.off[7], zeros, 4096);
    mp_check(&m, &g, 0, FTR_E_EOF, 4096, m.off[7], 0, 1, "4 KiB of zeros between chunks");
    mp_edit(&m, &g, m.f.len, m.f.len, zeros, tail);
    mp_check(&m, &g, 0, FTR_E_EOF, tail, m.f.len, 0, 1, "zeros at the end");
    size_t keep = HDR + 37;
    mp_edit(&m, &g, m.off[8] + keep, m.off[9], zeros, 10000);
    mp_check(&m, &g, 1u << 8, FTR_E_EOF, keep + 10000, m.off[8], 1, 1, "a cut, then zeros");
    /* zeros over the second half of a chunk, its length unchanged: its header and size hold,
     * so the reader returns it, and its payload is then found corrupt (bad_chunks) */
    size_t half = (m.len[5] - HDR) / 2;
    cr_assert_leq(half, sizeof(zeros));
    mp_edit(&m, &g, m.off[6] - half, m.off[6], zeros, half);
    mp_check(&m, &g, 1u << 5, FTR_E_EOF, 0, 0, 0, 1, "a chunk's tail zeroed");
    struct seen s[4 * MP_N];
    int n;
    struct ftr_damage d;
    mp_read(write_tmp(g.data, g.len), 1, s, &n, &d);
    cr_assert_eq(d.bad_chunks, 1);
    ftr_buf_free(&g);
    ftr_buf_free(&m.f);
}

Test(format, resync_random_edits_cost_only_the_chunks_touched)
{
    struct mp m;
    mp_build(&m);
    struct ftr_buf g = {0};
    uint8_t *junk = malloc(200000);
    for (int round = 0; round < 400; round++) {
        /* delete, overwrite (same length) or insert at a random place of the chunks */
        int op = round % 3;
        size_t a = FTR_FILE_HEADER_SIZE + rnd() % (m.f.len - FTR_FILE_HEADER_SIZE);
        size_t span = rnd() % 4 ? 1 + rnd() % 3000 : 1 + rnd() % 150000;
        size_t b = op == 2 ? a : a + span < m.f.len ? a + span : m.f.len;
        size_t n = op == 0 ? 0 : op == 1 ? b - a : span;
        for (size_t i = 0; i < n; i++)
            junk[i] = op == 1 ? m.f.data[a + i] ^ (uint8_t)(1 + rnd() % 255)
                              : (round & 4 ? 0 : (uint8_t)rnd());
        mp_edit(&m, &g, a, b, junk, n);
        unsigned lost = 0;
        for (int c = 0; c < MP_N; c++) /* touched: an edit inside it, or overlapping it */
            if (op == 2 ? a > m.off[c] && a < m.off[c + 1] : a < m.off[c + 1] && b > m.off[c])
                lost |= 1u << c;
        struct seen s[4 * MP_N];
        int k;
        struct ftr_damage d;
        char what[80];
        snprintf(what, sizeof(what), "round %d: op %d [%zu, %zu) %zu bytes", round, op, a, b, n);
        int rc = mp_read(write_tmp(g.data, g.len), 1, s, &k, &d);
        cr_assert(rc == FTR_E_EOF || rc == FTR_E_TRUNCATED, "%s", what);
        mp_expect(&m, s, k, lost, what);
    }
    free(junk);
    ftr_buf_free(&g);
    ftr_buf_free(&m.f);
}

/* ---------------------------------------------------------------- decoders vs garbage */

static void feed_decoders(const uint8_t *p, size_t n)
{
    struct ftr_process_info pi;
    struct ftr_module_info mi;
    struct ftr_thread_info ti;
    struct ftr_end_info ei;
    const char *argv[4];
    struct ftr_site_info s[8];
    size_t cnt;
    uint32_t mid;
    (void)ftr_dec_process(p, n, &pi, argv, 4);
    (void)ftr_dec_module(p, n, &mi);
    (void)ftr_dec_thread(p, n, &ti);
    (void)ftr_dec_end(p, n, &ei);
    if (ftr_dec_sites(p, n, &mid, s, 8, &cnt) == FTR_OK)
        for (size_t i = 0; i < cnt && i < 8; i++)
            if (s[i].name) (void)strlen(s[i].name);
    if (ftr_dec_process(p, n, &pi, argv, 4) == FTR_OK) {
        for (size_t i = 0; i < pi.argc && i < 4; i++)
            (void)strlen(argv[i]);
        if (pi.exe) (void)strlen(pi.exe);
    }
    struct ftr_chunk_hdr h = {.type = FTR_CHUNK_EVENTS, .tsc_first = rnd() % 1000};
    struct ftr_ev_iter it;
    struct ftr_event ev;
    if (ftr_dec_events_begin(&h, p, n, &it) == FTR_OK) {
        int k, guard = 0;
        while ((k = ftr_dec_events_next(&it, &ev)) == 1)
            cr_assert_lt(guard++, (int)n);
        cr_assert(k == 0 || k == -FTR_E_CORRUPT);
    }
}

Test(format, decoders_survive_garbage)
{
    /* random buffers, each in an exactly sized allocation so ASan sees any overread */
    for (int round = 0; round < 20000; round++) {
        size_t n = rnd() % 200;
        uint8_t *p = malloc(n ? n : 1);
        for (size_t i = 0; i < n; i++)
            p[i] = (uint8_t)rnd();
        if (n >= 8 && round % 2) { /* plausible lengths make it deeper into the parsers */
            ftr_wr_le32(p, (uint32_t)(rnd() % 64));
            ftr_wr_le32(p + 4, (uint32_t)(rnd() % (n - 7)));
        }
        if (n >= 6 && round % 3 == 0) {
            ftr_wr_le16(p, (uint16_t)(rnd() % 12));
            ftr_wr_le32(p + 2, (uint32_t)(rnd() % (n - 5)));
        }
        feed_decoders(p, n);
        free(p);
    }
    /* valid payloads, cut and bit-flipped */
    struct ftr_enc *e = enc_new();
    struct ftr_buf f = {0}, pl = {0};
    const char *av[] = {"a", "bb"};
    struct ftr_process_info pi = {.pid = 1, .argc = 2, .argv = av, .exe = "/x"};
    struct ftr_site_info si[3] = {{1, 2, 3, "f"}, {2, 3, 4, NULL}, {3, 4, 5, "g"}};
    struct ftr_rec ev[40];
    for (int i = 0; i < 40; i++)
        ev[i] = (struct ftr_rec){(uint64_t)i * 1000000007u, ftr_rec_head(i + 1, i & 3), i};
    ftr_enc_file_header(&f);
    ftr_enc_process(e, &pi, &f);
    ftr_enc_sites(e, 1, 1, si, 3, &f);
    ftr_enc_events(e, 1, 1, ev, 40, &f);
    struct ftr_reader *r;
    cr_assert_eq(ftr_reader_open(write_tmp(f.data, f.len), &r), FTR_OK);
    struct ftr_chunk_hdr h;
    while (ftr_reader_next(r, &h, NULL) == FTR_OK) {
        cr_assert_eq(ftr_reader_payload(r, &pl), FTR_OK);
        for (size_t cut = 0; cut <= pl.len; cut++) {
            uint8_t *p = malloc(cut ? cut : 1);
            memcpy(p, pl.data, cut);
            feed_decoders(p, cut);
            if (cut) {
                for (int k = 0; k < 8; k++) {
                    size_t at = rnd() % cut;
                    uint8_t old = p[at];
                    p[at] ^= (uint8_t)(1 + rnd() % 255);
                    feed_decoders(p, cut);
                    p[at] = old;
                }
            }
            free(p);
        }
        if (h.type == FTR_CHUNK_EVENTS) { /* a cut events payload is detected as corrupt */
            struct ftr_ev_iter it;
            struct ftr_event o;
            cr_assert_eq(ftr_dec_events_begin(&h, pl.data, pl.len - 1, &it), FTR_OK);
            int k;
            while ((k = ftr_dec_events_next(&it, &o)) == 1) {
            }
            cr_assert_eq(k, -FTR_E_CORRUPT);
        }
    }
    ftr_reader_close(r);
    ftr_buf_free(&pl);
    ftr_buf_free(&f);
    ftr_enc_free(e);
}

Test(format, reader_survives_random_damage)
{
    struct ftr_buf f = {0}, pl = {0};
    build_events_file(&f, 6, NULL);
    for (int round = 0; round < 300; round++) {
        struct ftr_buf g = {0};
        ftr_buf_append(&g, f.data, f.len);
        int flips = 1 + rnd() % 6;
        for (int k = 0; k < flips; k++)
            g.data[FTR_FILE_HEADER_SIZE + rnd() % (g.len - FTR_FILE_HEADER_SIZE)] ^=
                (uint8_t)(1 + rnd() % 255);
        size_t len = rnd() % 4 ? g.len : FTR_FILE_HEADER_SIZE + rnd() % (g.len - 15);
        struct ftr_reader *r;
        cr_assert_eq(ftr_reader_open(write_tmp(g.data, len), &r), FTR_OK);
        struct ftr_chunk_hdr h;
        int rc, guard = 0;
        while ((rc = ftr_reader_next(r, &h, NULL)) == FTR_OK) {
            cr_assert_lt(guard++, 100);
            if (ftr_reader_payload(r, &pl) != FTR_OK) continue;
            struct ftr_ev_iter it;
            struct ftr_event ev;
            if (ftr_dec_events_begin(&h, pl.data, pl.len, &it) == FTR_OK)
                while (ftr_dec_events_next(&it, &ev) == 1) {
                }
        }
        cr_assert(rc == FTR_E_EOF || rc == FTR_E_TRUNCATED, "rc %d", rc);
        ftr_reader_close(r);
        ftr_buf_free(&g);
    }
    ftr_buf_free(&pl);
    ftr_buf_free(&f);
}

Test(format, limits_and_misuse)
{
    struct ftr_enc *e = enc_new();
    struct ftr_buf f = {0};
    /* r[0] is valid, so the encoder checks the size before reading any further record */
    struct ftr_rec one = {1, ftr_rec_head(1, FTR_EV_ENTRY), 0};
    cr_assert_eq(ftr_enc_events(e, 1, 1, &one, (size_t)FTR_CHUNK_MAX_RAW, &f), FTR_E_TOO_BIG);
    cr_assert_eq(f.len, 0);
    cr_assert_eq(ftr_enc_events(e, 1, 1, &one, 1, &f), FTR_OK);
    cr_assert_eq(ftr_enc_set_level(e, 1), FTR_OK);
    ftr_buf_free(&f);
    ftr_enc_free(e);
    ftr_enc_free(NULL);
    ftr_reader_close(NULL);

    build_events_file(&f, 1, NULL);
    struct ftr_reader *r;
    struct ftr_buf pl = {0};
    struct ftr_chunk_hdr h;
    cr_assert_eq(ftr_reader_open(write_tmp(f.data, f.len), &r), FTR_OK);
    cr_assert_eq(ftr_reader_payload(r, &pl), FTR_E_IO); /* no chunk yet */
    cr_assert_eq(ftr_reader_next(r, &h, NULL), FTR_OK);
    cr_assert_eq(ftr_reader_next(r, &h, NULL), FTR_E_EOF);
    cr_assert_eq(ftr_reader_payload(r, &pl), FTR_E_IO); /* past the end */
    ftr_reader_close(r);
    ftr_buf_free(&f);
}

/* A VALUES record and its payload slots: one event whose 12 bytes per slot come back raw
 * (ftr_ev_iter.vals); a list the array cuts off, and payload slots without their VALUES (a
 * list a jump cut short: its VALUES head never written), are left out. */
Test(events, values_lists)
{
    const uint32_t vh = ftr_rec_head(FTR_SP_VALUES, FTR_EV_SPECIAL);
    const struct ftr_rec in[] = {
        {100, ftr_rec_head(5, FTR_EV_ENTRY), 0},
        {100, vh, 5u | 2u << 24},
        {0x0807060504030201ull, 0, 0x0c0b0a09u},
        {0x14131211100f0e0dull, 0, 0x18171615u},
        {0, 0, 0},          /* a list cut short: its VALUES never written ... */
        {0xffffull, 0, 7u}, /* ... and its payload */
        {110, ftr_rec_head(5, FTR_EV_EXIT), 0},
        {120, vh, 5u | 3u << 24}, /* three slots announced, one left: left out */
        {0x1ull, 0, 0},
    };
    const struct ftr_event want[] = {
        {100, 5, FTR_EV_ENTRY, 0},
        {100, FTR_SP_VALUES, FTR_EV_SPECIAL, 5u | 2u << 24},
        {110, 5, FTR_EV_EXIT, 0},
    };
    events_roundtrip(in, sizeof in / sizeof *in, want, 3, NULL);
    /* and the bytes */
    struct ftr_enc *e = enc_new();
    struct ftr_buf f = {0}, pl = {0};
    cr_assert_eq(ftr_enc_file_header(&f), FTR_OK);
    cr_assert_eq(ftr_enc_events(e, 1, 2, in, sizeof in / sizeof *in, &f), FTR_OK);
    const char *path = write_tmp(f.data, f.len);
    struct ftr_reader *r;
    struct ftr_chunk_hdr h;
    cr_assert_eq(ftr_reader_open(path, &r), FTR_OK);
    cr_assert_eq(ftr_reader_next(r, &h, NULL), FTR_OK);
    cr_assert_eq(ftr_reader_payload(r, &pl), FTR_OK);
    struct ftr_ev_iter it;
    struct ftr_event ev;
    cr_assert_eq(ftr_dec_events_begin(&h, pl.data, pl.len, &it), FTR_OK);
    cr_assert_eq(ftr_dec_events_next(&it, &ev), 1);
    cr_assert_eq(ftr_dec_events_next(&it, &ev), 1);
    cr_assert_eq(it.vals_len, 24);
    for (unsigned i = 0; i < 24; i++)
        cr_assert_eq(it.vals[i], i + 1, "byte %u", i);
    ftr_reader_close(r);
    ftr_buf_free(&f);
    ftr_buf_free(&pl);
    ftr_enc_free(e);
    unlink(path);
}
