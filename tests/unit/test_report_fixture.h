/*
 * test_report_fixture.h - trace files built with the ftr_enc_* API for the report's unit tests
 * (test_report_views.c, test_report_names.c, test_report_input.c).
 */
#ifndef TEST_REPORT_FIXTURE_H
#define TEST_REPORT_FIXTURE_H

#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report_lib.h"

static char fx_path[64];

static void fx_cleanup(void)
{
    if (fx_path[0]) unlink(fx_path);
    fx_path[0] = 0;
}

/* Writes p[0..n) to a temporary file (removed by fx_cleanup). */
static const char *fx_write(const void *p, size_t n)
{
    fx_cleanup();
    strcpy(fx_path, "/tmp/ftr_rptv_XXXXXX");
    int fd = mkstemp(fx_path);
    cr_assert(fd >= 0, "mkstemp: %s", strerror(errno));
    cr_assert_eq(write(fd, p, n), (ssize_t)n);
    close(fd);
    return fx_path;
}

__attribute__((unused)) static void fx_expect(const char *got, const char *want)
{
    if (strcmp(got, want) != 0) cr_log_error("got:\n%s\nwant:\n%s", got, want);
    cr_assert_str_eq(got, want);
}

struct tev {
    int kind;
    uint32_t site;
    uint64_t tsc;
    uint64_t arg;
};
#define E(site, tsc)                                                                               \
    {                                                                                              \
        FTR_EV_ENTRY, site, tsc, 0                                                                 \
    }
#define X(site, tsc)                                                                               \
    {                                                                                              \
        FTR_EV_EXIT, site, tsc, 0                                                                  \
    }
#define U(site, tsc)                                                                               \
    {                                                                                              \
        FTR_EV_UNWIND, site, tsc, 0                                                                \
    }
#define LOST(tsc, n)                                                                               \
    {                                                                                              \
        FTR_EV_SPECIAL, FTR_SP_LOST, tsc, n                                                        \
    }

struct tb {
    struct ftr_enc *e;
    struct ftr_buf f;
};

static void tb_init(struct tb *b)
{
    memset(b, 0, sizeof *b);
    b->e = ftr_enc_new(1);
    cr_assert_not_null(b->e);
    cr_assert_eq(ftr_enc_file_header(&b->f), FTR_OK);
}

/* A process whose clock runs at 1 GHz (1 tick = 1 ns). */
static void tb_process(struct tb *b, uint32_t pid, uint32_t ppid, uint64_t start_tsc,
                       const char *cmd)
{
    const char *argv[] = {cmd};
    struct ftr_process_info pi = {.pid = pid,
                                  .ppid = ppid,
                                  .start_tsc = start_tsc,
                                  .start_realtime_ns = 1700000000123456789ull,
                                  .tsc_hz = 1000000000,
                                  .tsc_calibration = FTR_TSC_CAL_MEASURED,
                                  .argc = 1,
                                  .argv = argv,
                                  .exe = "/bin/prog"};
    cr_assert_eq(ftr_enc_process(b->e, &pi, &b->f), FTR_OK);
}

static void tb_module(struct tb *b, uint32_t pid, uint32_t id, const char *path, uint64_t base,
                      const uint8_t *build_id, uint32_t build_id_len)
{
    struct ftr_module_info mi = {.module_id = id,
                                 .base = base,
                                 .path = path,
                                 .build_id = build_id,
                                 .build_id_len = build_id_len};
    cr_assert_eq(ftr_enc_module(b->e, pid, &mi, &b->f), FTR_OK);
}

/* Sites first..first+n-1 named names[0..n) in module mod, functions at func0 + 16 * i. */
static void tb_sites(struct tb *b, uint32_t pid, uint32_t mod, uint32_t first,
                     const char *const *names, uint32_t n, uint64_t func0)
{
    struct ftr_site_info s[32];
    cr_assert(n <= 32);
    for (uint32_t i = 0; i < n; i++)
        s[i] = (struct ftr_site_info){first + i, func0 + 16 * i, func0 + 16 * i, names[i]};
    cr_assert_eq(ftr_enc_sites(b->e, pid, mod, s, n, &b->f), FTR_OK);
}

static void tb_events(struct tb *b, uint32_t pid, uint32_t tid, const struct tev *evs, size_t n)
{
    struct ftr_rec r[128];
    cr_assert(n <= 128);
    for (size_t i = 0; i < n; i++)
        r[i] = (struct ftr_rec){evs[i].tsc, ftr_rec_head(evs[i].site, (unsigned)evs[i].kind),
                                (uint32_t)evs[i].arg};
    cr_assert_eq(ftr_enc_events(b->e, pid, tid, r, n, &b->f), FTR_OK);
}

__attribute__((unused)) static void tb_thread(struct tb *b, uint32_t pid, uint32_t tid,
                                              const char *name)
{
    struct ftr_thread_info ti = {.tid = tid, .what = 1, .tsc = 0, .name = name};
    cr_assert_eq(ftr_enc_thread(b->e, pid, &ti, &b->f), FTR_OK);
}

static void tb_end(struct tb *b, uint32_t pid, uint64_t tsc, uint64_t calls)
{
    struct ftr_end_info ei = {.tsc = tsc,
                              .how = FTR_END_EXIT,
                              .calls = calls,
                              .events = 2 * calls,
                              .sites = 5,
                              .patched = 5};
    cr_assert_eq(ftr_enc_end(b->e, pid, &ei, &b->f), FTR_OK);
}

static void tb_done(struct tb *b)
{
    ftr_enc_free(b->e);
    b->e = NULL;
}

static const char *const fx_names[] = {"main", "leaf", "mid", "xpread", "worker"};
enum { MAIN = 1, LEAF, MID, XPREAD, WORKER };

/* Two threads of pid 4242; the main one's stream split over two chunks:
 *   main 1000..13206 { leaf 1100..1418; mid 1500..2902 { leaf 1600..1720 } }
 *   xpread 20000..184724
 *   worker 1200..5000 (thread 4243, "worker 1"), 123 events lost at 1300 */
static void fx_example(struct tb *b)
{
    static const struct tev c1[] = {E(MAIN, 1000), E(LEAF, 1100), X(LEAF, 1418), E(MID, 1500),
                                    E(LEAF, 1600)};
    static const struct tev c2[] = {X(LEAF, 1720), X(MID, 2902), X(MAIN, 13206), E(XPREAD, 20000),
                                    X(XPREAD, 184724)};
    static const struct tev w[] = {E(WORKER, 1200), LOST(1300, 123), X(WORKER, 5000)};
    tb_init(b);
    tb_process(b, 4242, 1, 1000, "./prog");
    tb_module(b, 4242, 1, "/bin/prog", 0x400000, NULL, 0);
    tb_sites(b, 4242, 1, 1, fx_names, 5, 0x401000);
    tb_thread(b, 4242, 4243, "worker 1");
    tb_events(b, 4242, 4242, c1, 5);
    tb_events(b, 4242, 4243, w, 3);
    tb_events(b, 4242, 4242, c2, 5);
    tb_end(b, 4242, 200000, 6);
    tb_done(b);
}

/* The text of view v of the trace at path, with options o (NULL: defaults). */
__attribute__((unused)) static char *fx_render(const char *path, enum frp_view v,
                                               const struct frp_opts *o, int *rc,
                                               struct frp_stats *st)
{
    struct frp_report *r;
    cr_assert_eq(frp_report_open(path, &r), FTR_OK);
    cr_assert_eq(frp_report_names(r, FRP_DEMANGLE_SIMPLE, 0), FTR_OK);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    struct frp_stats s;
    int got = frp_render(r, v, o, f, &s);
    fclose(f);
    if (rc)
        *rc = got;
    else
        cr_assert_eq(got, FTR_OK, "frp_render: %s", ftr_strerror(got));
    if (st) *st = s;
    frp_report_close(r);
    return text;
}

#endif
