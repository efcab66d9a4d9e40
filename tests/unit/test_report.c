/*
 * test_report.c - unit tests of the report library (cli/report/): duration column, graph rendering
 * (fed by hand), and the whole pipeline on trace files built with the ftr_enc_* API.
 */
#include <criterion/criterion.h>
#include <criterion/logging.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "report_lib.h"

/* ---------------------------------------------------------------- helpers */

static char tmp_path[64];

static void cleanup_tmp(void)
{
    if (tmp_path[0]) unlink(tmp_path);
    tmp_path[0] = 0;
}
TestSuite(report, .fini = cleanup_tmp);

static const char *write_tmp(const void *p, size_t n)
{
    cleanup_tmp();
    strcpy(tmp_path, "/tmp/ftr_report_XXXXXX");
    int fd = mkstemp(tmp_path);
    cr_assert(fd >= 0, "mkstemp: %s", strerror(errno));
    cr_assert_eq(write(fd, p, n), (ssize_t)n);
    close(fd);
    return tmp_path;
}

static char *dur(uint64_t ns)
{
    static char buf[FRP_DURATION_MAX + 1];
    buf[frp_fmt_duration(buf, ns)] = 0;
    return buf;
}

/* A hand-made process (1 tick = 1 ns) with two threads, fed to a renderer event by event. */
static struct frp_name names[] = {{"?", 1},   {"main", 4},   {"leaf", 4},
                                  {"mid", 3}, {"xpread", 6}, {"worker", 6}};
static struct frp_process proc = {
    .pid = 4242, .ns_per_tick = 1.0, .cmdline = "./prog", .nthreads = 2, .sites = names};
static struct frp_thread threads[] = {{.idx = 0, .tid = 4242, .proc = &proc},
                                      {.idx = 1, .tid = 4243, .proc = &proc}};

struct tev {
    int th;
    int kind;
    uint32_t site;
    uint64_t tsc;
    uint64_t arg;
};
#define E(th, site, tsc)                                                                           \
    {                                                                                              \
        th, FTR_EV_ENTRY, site, tsc, 0                                                             \
    }
#define X(th, site, tsc)                                                                           \
    {                                                                                              \
        th, FTR_EV_EXIT, site, tsc, 0                                                              \
    }
#define U(th, site, tsc)                                                                           \
    {                                                                                              \
        th, FTR_EV_UNWIND, site, tsc, 0                                                            \
    }
#define LOST(th, tsc, n)                                                                           \
    {                                                                                              \
        th, FTR_EV_SPECIAL, FTR_SP_LOST, tsc, n                                                    \
    }

/* Renders evs (in merge order) as the merge would feed them; returns the text (free it). */
static char *render(const struct tev *evs, size_t n, struct frp_stats *st)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    struct frp_graph *g = frp_graph_new(f);
    cr_assert_not_null(g);
    struct ftr_event evbuf[64];
    cr_assert(n <= 64);
    for (size_t i = 0; i < n; i++)
        evbuf[i] = (struct ftr_event){evs[i].tsc, evs[i].site, (uint8_t)evs[i].kind, evs[i].arg};
    for (size_t i = 0; i < n; i++) {
        struct frp_item it = {.ev = evbuf[i], .thread = &threads[evs[i].th]};
        for (size_t k = i + 1; k < n && !it.next; k++)
            if (evs[k].th == evs[i].th) it.next = &evbuf[k];
        if (evs[i].kind == FTR_EV_ENTRY) it.name = names[evs[i].site];
        frp_graph_event(g, &it);
    }
    cr_assert_eq(frp_graph_finish(g), 0);
    if (st) *st = *frp_graph_stats(g);
    frp_graph_free(g);
    fclose(f);
    return text;
}

static void expect_text(const char *got, const char *want)
{
    if (strcmp(got, want) != 0) cr_log_error("got:\n%s\nwant:\n%s", got, want);
    cr_assert_str_eq(got, want);
}

/* ---------------------------------------------------------------- duration column */

Test(report, duration_format)
{
    cr_assert_str_eq(dur(0), "     0.000 us  |");
    cr_assert_str_eq(dur(318), "     0.318 us  |");
    cr_assert_str_eq(dur(1402), "     1.402 us  |");
    cr_assert_str_eq(dur(12206), " +  12.206 us  |");
    cr_assert_str_eq(dur(164724), " ! 164.724 us  |");
    cr_assert_str_eq(dur(1234567), " # 1234.567 us  |");
    cr_assert_str_eq(dur(12345678901ull), " $ 12345678.901 us  |");
    cr_assert_eq(strlen(dur(999999)), 16);
    char tmp[24];
    *frp_fmt_u64(tmp, 18446744073709551615ull) = 0;
    cr_assert_str_eq(tmp, "18446744073709551615");
    cr_assert(strlen(dur(UINT64_MAX)) <= FRP_DURATION_MAX);
}

Test(report, duration_markers_strictly_greater)
{
    static const struct {
        uint64_t ns;
        char mark;
    } cases[] = {
        {0, ' '},         {10000, ' '},      {10001, '+'},      {100000, '+'},     {100001, '!'},
        {1000000, '!'},   {1000001, '#'},    {10000000, '#'},   {10000001, '*'},   {100000000, '*'},
        {100000001, '@'}, {1000000000, '@'}, {1000000001, '$'}, {UINT64_MAX, '$'},
    };
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        cr_assert_eq(frp_duration_marker(cases[i].ns), cases[i].mark, "%llu ns",
                     (unsigned long long)cases[i].ns);
        cr_assert_eq(dur(cases[i].ns)[1], cases[i].mark);
    }
    cr_assert_str_eq(dur(10000), "    10.000 us  |"); /* exactly 10 us: no '+' */
    cr_assert_str_eq(dur(10001), " +  10.001 us  |");
}

Test(report, ticks_to_ns)
{
    cr_assert_eq(frp_ticks_to_ns(12345, 1.0), 12345);
    cr_assert_eq(frp_ticks_to_ns(30000, 1e9 / 3e9), 10000); /* 3 GHz */
    cr_assert_eq(frp_ticks_to_ns(3, 1e9 / 2e9), 2);         /* 1.5 rounds up */
    cr_assert_eq(frp_ticks_to_ns(UINT64_MAX, 2.0), UINT64_MAX);
}

/* ---------------------------------------------------------------- graph, fed by hand */

Test(report, graph_leaf_nesting_closing)
{
    static const struct tev evs[] = {
        E(0, 1, 1000), E(0, 2, 1100), X(0, 2, 1418),  E(0, 3, 1500),  E(0, 2, 1600),
        X(0, 2, 1720), X(0, 3, 2902), X(0, 1, 13206), E(0, 4, 20000), X(0, 4, 184724),
    };
    struct frp_stats st;
    char *out = render(evs, sizeof evs / sizeof *evs, &st);
    expect_text(out, "  4242)               |  main() {\n"
                     "  4242)     0.318 us  |    leaf();\n"
                     "  4242)               |    mid() {\n"
                     "  4242)     0.120 us  |      leaf();\n"
                     "  4242)     1.402 us  |    } /* mid */\n"
                     "  4242) +  12.206 us  |  } /* main */\n"
                     "  4242) ! 164.724 us  |  xpread();\n");
    cr_assert_eq(st.events, 10);
    cr_assert_eq(st.unmatched, 0);
    cr_assert_eq(st.mismatched, 0);
    free(out);
}

Test(report, graph_open_calls_stay_open)
{
    static const struct tev evs[] = {E(0, 1, 0), E(0, 3, 10), E(0, 2, 20)};
    char *out = render(evs, 3, NULL);
    expect_text(out, "  4242)               |  main() {\n"
                     "  4242)               |    mid() {\n"
                     "  4242)               |      leaf() {\n");
    free(out);
}

Test(report, graph_unwind)
{
    static const struct tev evs[] = {E(0, 1, 0),    E(0, 3, 100),  E(0, 2, 200),
                                     U(0, 2, 5300), U(0, 3, 5300), X(0, 1, 6000)};
    char *out = render(evs, 6, NULL);
    expect_text(out, "  4242)               |  main() {\n"
                     "  4242)               |    mid() {\n"
                     "  4242)               |      leaf() {\n"
                     "  4242)     5.100 us  |      } /* leaf (unwound) */\n"
                     "  4242)     5.200 us  |    } /* mid (unwound) */\n"
                     "  4242)     6.000 us  |  } /* main */\n");
    free(out);
}

Test(report, graph_unmatched_and_mismatched_exits)
{
    static const struct tev evs[] = {X(0, 3, 0),  U(0, 2, 5),  E(0, 1, 10), E(0, 2, 20),
                                     X(0, 3, 40), X(0, 1, 50), X(0, 1, 60)};
    struct frp_stats st;
    char *out = render(evs, 7, &st);
    expect_text(out, "  4242)               |  main() {\n"
                     "  4242)               |    leaf() {\n"
                     "  4242)     0.020 us  |    } /* leaf */\n"
                     "  4242)     0.040 us  |  } /* main */\n");
    cr_assert_eq(st.unmatched, 3);
    cr_assert_eq(st.mismatched, 1);
    free(out);
}

Test(report, graph_two_threads_interleaved_and_lost)
{
    static const struct tev evs[] = {
        E(0, 1, 1000), E(0, 2, 1100), E(1, 5, 1200),  LOST(1, 1300, 123), X(0, 2, 1418),
        E(0, 3, 1500), X(1, 5, 5000), X(0, 3, 12000), X(0, 1, 13206),     LOST(0, 14000, 1),
    };
    struct frp_stats st;
    char *out = render(evs, sizeof evs / sizeof *evs, &st);
    expect_text(out, "  4242)               |  main() {\n"
                     "  4242)     0.318 us  |    leaf();\n"
                     "  4243)               |  worker() {\n"
                     "  4243)               |    /* lost 123 events */\n"
                     "  4242) +  10.500 us  |    mid();\n" /* its exit is its thread's next */
                     "  4243)     3.800 us  |  } /* worker */\n"
                     "  4242) +  12.206 us  |  } /* main */\n"
                     "  4242)               |  /* lost 1 event */\n");
    cr_assert_eq(st.lost, 124);
    free(out);
}

Test(report, graph_leaf_needs_own_exit_next)
{
    /* entry followed by a lost marker, then its exit: not a leaf */
    static const struct tev evs[] = {E(0, 2, 0), LOST(0, 1, 7), X(0, 2, 2000)};
    char *out = render(evs, 3, NULL);
    expect_text(out, "  4242)               |  leaf() {\n"
                     "  4242)               |    /* lost 7 events */\n"
                     "  4242)     2.000 us  |  } /* leaf */\n");
    free(out);
}

Test(report, graph_deep_lines_say_their_depth)
{
    /* main nested 66 deep, the last a leaf: 64 levels indented, then "[depth N] " */
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct frp_graph *g = frp_graph_new(f);
    struct ftr_event evs[132];
    for (uint32_t i = 0; i < 132; i++)
        evs[i] = (struct ftr_event){1000 + 100 * i, 1, i < 66 ? FTR_EV_ENTRY : FTR_EV_EXIT, 0};
    for (uint32_t i = 0; i < 132; i++) {
        struct frp_item it = {.ev = evs[i], .thread = &threads[0], .next = &evs[i + 1]};
        if (i == 131) it.next = NULL;
        if (i < 66) it.name = names[1];
        frp_graph_event(g, &it);
    }
    cr_assert_eq(frp_graph_finish(g), 0);
    frp_graph_free(g);
    fclose(f);
    char ind[200];
    memset(ind, ' ', sizeof ind);
    char want[512];
    snprintf(want, sizeof want, "\n  4242)               |%.*smain() {\n", 2 + 2 * 63, ind);
    cr_assert_not_null(strstr(text, want), "%s", want);
    snprintf(want, sizeof want, "\n  4242)               |%.*s[depth 65] main() {\n", 130, ind);
    cr_assert_not_null(strstr(text, want), "%s", want);
    snprintf(want, sizeof want, "\n  4242)     0.100 us  |%.*s[depth 66] main();\n", 130, ind);
    cr_assert_not_null(strstr(text, want), "%s", want);
    snprintf(want, sizeof want, "\n  4242)     0.300 us  |%.*s[depth 65] } /* main */\n", 130, ind);
    cr_assert_not_null(strstr(text, want), "%s", want);
    snprintf(want, sizeof want, "\n  4242)     0.500 us  |%.*s} /* main */\n", 2 + 2 * 63, ind);
    cr_assert_not_null(strstr(text, want), "%s", want);
    /* no line longer than the 64th level's with its mark */
    for (const char *l = text, *e; (e = strchr(l, '\n')); l = e + 1)
        cr_assert_leq(e - l, 23 + 130 + 11 + 14, "%.*s", (int)(e - l), l);
    free(text);
}

Test(report, graph_header)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct frp_graph *g = frp_graph_new(f);
    struct frp_process p = proc;
    p.has_end = 1;
    p.end.calls = 1234567;
    p.cmdline = "./prog arg1 arg2";
    p.nthreads = 3;
    frp_graph_header(g, &p);
    p.has_end = 0;
    p.nthreads = 1;
    frp_graph_header(g, &p);
    cr_assert_eq(frp_graph_finish(g), 0);
    frp_graph_free(g);
    fclose(f);
    expect_text(text,
                "# ftrace-run: ./prog arg1 arg2  pid 4242  3 threads  1234567 calls\n"
                "#  TID      DURATION          FUNCTION CALLS\n"
                "#  |        |   |             |   |   |   |\n"
                "\n"
                "# ftrace-run: ./prog arg1 arg2  pid 4242  1 thread  ? calls (no end record)\n"
                "#  TID      DURATION          FUNCTION CALLS\n"
                "#  |        |   |             |   |   |   |\n");
    free(text);
}

Test(report, json_escape)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct frp_out o;
    cr_assert_eq(frp_out_init(&o, f, 8), FTR_OK); /* tiny buffer: exercise the slow paths */
    static const char s[] = "a\"b\\c\nd\x01"
                            "e operator<<(int)";
    frp_json_escape(&o, s, sizeof s - 1);
    frp_out_spaces(&o, 3);
    frp_out_free(&o);
    fclose(f);
    cr_assert_str_eq(text, "a\\\"b\\\\c\\nd\\u0001e operator<<(int)   ");
    free(text);
}

Test(report, sanitize_names)
{
    char s[] = "a\nb\xff\xc3\xa9\xe2\x82\xac\xed\xa0\x80z\xf0\x9f\x98\x80\xc3";
    frp_sanitize(s, sizeof s - 1);
    cr_assert_str_eq(s, "a?b?\xc3\xa9\xe2\x82\xac???z\xf0\x9f\x98\x80?");
}

/* ---------------------------------------------------------------- pipeline on real files */

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

static void tb_process(struct tb *b, uint32_t pid, uint32_t ppid, uint64_t start_tsc,
                       const char *const *argv, uint32_t argc)
{
    struct ftr_process_info pi = {.pid = pid,
                                  .ppid = ppid,
                                  .start_tsc = start_tsc,
                                  .tsc_hz = 1000000000,
                                  .argc = argc,
                                  .argv = argv,
                                  .exe = "/bin/prog"};
    cr_assert_eq(ftr_enc_process(b->e, &pi, &b->f), FTR_OK);
}

static void tb_sites(struct tb *b, uint32_t pid)
{
    struct ftr_site_info s[5];
    for (uint32_t i = 0; i < 5; i++)
        s[i] = (struct ftr_site_info){i + 1, 0x1000 + i, 0x1000 + i, names[i + 1].s};
    cr_assert_eq(ftr_enc_sites(b->e, pid, 1, s, 5, &b->f), FTR_OK);
}

static void tb_events(struct tb *b, uint32_t pid, uint32_t tid, const struct tev *evs, size_t n)
{
    struct ftr_rec r[64];
    for (size_t i = 0; i < n; i++)
        r[i] = (struct ftr_rec){evs[i].tsc, ftr_rec_head(evs[i].site, (unsigned)evs[i].kind),
                                (uint32_t)evs[i].arg};
    cr_assert_eq(ftr_enc_events(b->e, pid, tid, r, n, &b->f), FTR_OK);
}

static void tb_end(struct tb *b, uint32_t pid, uint64_t calls)
{
    struct ftr_end_info ei = {.tsc = 200000, .how = FTR_END_EXIT, .calls = calls};
    cr_assert_eq(ftr_enc_end(b->e, pid, &ei, &b->f), FTR_OK);
}

static void tb_done(struct tb *b)
{
    ftr_enc_free(b->e);
    b->e = NULL;
}

/* The example of the brief: two threads, the main one's stream split over two chunks right
 * between a leaf's entry and exit. */
static void build_example(struct tb *b)
{
    static const char *const argv[] = {"./prog", "arg1", "arg2"};
    static const struct tev c1[] = {E(0, 1, 1000), E(0, 2, 1100), X(0, 2, 1418), E(0, 3, 1500),
                                    E(0, 2, 1600)};
    static const struct tev c2[] = {X(0, 2, 1720), X(0, 3, 2902), X(0, 1, 13206), E(0, 4, 20000),
                                    X(0, 4, 184724)};
    static const struct tev w[] = {E(1, 5, 1200), LOST(1, 1300, 123), X(1, 5, 5000)};
    tb_init(b);
    tb_process(b, 4242, 1, 1000, argv, 3);
    tb_sites(b, 4242);
    struct ftr_thread_info ti = {.tid = 4243, .what = 1, .tsc = 1200, .name = "worker \"1\""};
    cr_assert_eq(ftr_enc_thread(b->e, 4242, &ti, &b->f), FTR_OK);
    tb_events(b, 4242, 4242, c1, 5);
    tb_events(b, 4242, 4243, w, 3);
    tb_events(b, 4242, 4242, c2, 5);
    tb_end(b, 4242, 6);
    tb_done(b);
}

static const char example_graph[] = "# ftrace-run: ./prog arg1 arg2  pid 4242  2 threads  6 calls\n"
                                    "#  TID      DURATION          FUNCTION CALLS\n"
                                    "#  |        |   |             |   |   |   |\n"
                                    "  4242)               |  main() {\n"
                                    "  4242)     0.318 us  |    leaf();\n"
                                    "  4243)               |  worker() {\n"
                                    "  4243)               |    /* lost 123 events */\n"
                                    "  4242)               |    mid() {\n"
                                    "  4242)     0.120 us  |      leaf();\n"
                                    "  4242)     1.402 us  |    } /* mid */\n"
                                    "  4243)     3.800 us  |  } /* worker */\n"
                                    "  4242) +  12.206 us  |  } /* main */\n"
                                    "  4242) ! 164.724 us  |  xpread();\n";

static char *report_graph(const char *path, long pid, const uint32_t *tids, size_t ntids,
                          struct frp_stats *st, char *note, size_t note_len)
{
    struct frp_report *r;
    cr_assert_eq(frp_report_open(path, &r), FTR_OK);
    if (pid >= 0 || ntids) frp_report_select(r, pid, tids, ntids);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct frp_stats s;
    cr_assert_eq(frp_render(r, FRP_GRAPH, NULL, f, &s), FTR_OK);
    fclose(f);
    if (st) *st = s;
    if (note) frp_report_note(r, &s, note, note_len);
    frp_report_close(r);
    return text;
}

Test(report, pipeline_graph_exact)
{
    struct tb b;
    build_example(&b);
    const char *path = write_tmp(b.f.data, b.f.len);
    char note[256];
    char *text = report_graph(path, -1, NULL, 0, NULL, note, sizeof note);
    expect_text(text, example_graph);
    cr_assert_str_eq(note, "");
    free(text);
    ftr_buf_free(&b.f);
}

Test(report, pipeline_tables)
{
    struct tb b;
    build_example(&b);
    const char *path = write_tmp(b.f.data, b.f.len);
    struct frp_report *r;
    cr_assert_eq(frp_report_open(path, &r), FTR_OK);
    cr_assert_eq(r->nprocs, 1);
    cr_assert_eq(r->nthreads, 2);
    cr_assert_eq(r->nchunks, 3);
    struct frp_process *p = r->procs[0];
    cr_assert(p->has_info && p->has_end);
    cr_assert_str_eq(p->cmdline, "./prog arg1 arg2");
    cr_assert_str_eq(p->exe, "/bin/prog");
    cr_assert_eq(p->end.calls, 6);
    cr_assert_eq(r->base_tsc, 1000);
    cr_assert_str_eq(frp_site_name(r, p, 3).s, "mid");
    cr_assert_str_eq(frp_site_name(r, p, 77).s, "<site 77>");
    cr_assert_eq(frp_site_name(r, p, 77).len, 9);
    struct frp_thread *t = r->threads[0]->tid == 4243 ? r->threads[0] : r->threads[1];
    cr_assert_str_eq(t->name, "worker \"1\"");
    cr_assert_eq(t->nchunks, 1);
    frp_report_close(r);
    ftr_buf_free(&b.f);
}

Test(report, pipeline_tid_filter)
{
    struct tb b;
    build_example(&b);
    const char *path = write_tmp(b.f.data, b.f.len);
    uint32_t tid = 4243;
    char *text = report_graph(path, -1, &tid, 1, NULL, NULL, 0);
    expect_text(text, "# ftrace-run: ./prog arg1 arg2  pid 4242  2 threads  6 calls\n"
                      "#  TID      DURATION          FUNCTION CALLS\n"
                      "#  |        |   |             |   |   |   |\n"
                      "  4243)               |  worker() {\n"
                      "  4243)               |    /* lost 123 events */\n"
                      "  4243)     3.800 us  |  } /* worker */\n");
    free(text);
    struct frp_report *r;
    cr_assert_eq(frp_report_open(path, &r), FTR_OK);
    cr_assert_eq(frp_report_select(r, 999, NULL, 0), 0);
    cr_assert_eq(frp_report_select(r, 4242, NULL, 0), 1);
    cr_assert_eq(frp_report_select(r, -1, (uint32_t[]){1}, 1), 0);
    frp_report_close(r);
    ftr_buf_free(&b.f);
}

Test(report, pipeline_chrome_json)
{
    struct tb b;
    build_example(&b);
    const char *path = write_tmp(b.f.data, b.f.len);
    struct frp_report *r;
    cr_assert_eq(frp_report_open(path, &r), FTR_OK);
    char json_path[] = "/tmp/ftr_report_json_XXXXXX";
    int fd = mkstemp(json_path);
    cr_assert(fd >= 0);
    FILE *f = fdopen(fd, "w");
    struct frp_stats st;
    cr_assert_eq(frp_render(r, FRP_CHROME, NULL, f, &st), FTR_OK);
    fclose(f);
    frp_report_close(r);

    char cmd[256];
    snprintf(cmd, sizeof cmd, "python3 -m json.tool %s > /dev/null", json_path);
    int rc = system(cmd);
    FILE *in = fopen(json_path, "r");
    char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, in);
    text[n] = 0;
    fclose(in);
    unlink(json_path);
    cr_assert_eq(rc, 0, "json.tool rejected:\n%s", text);
    cr_assert(strncmp(text, "{\"traceEvents\":[\n", 17) == 0);
    cr_assert_not_null(strstr(text,
                              "{\"ph\":\"M\",\"pid\":4242,\"tid\":4242,\"name\":\"process_name\","
                              "\"args\":{\"name\":\"./prog arg1 arg2\"}}"));
    cr_assert_not_null(strstr(text, "\"name\":\"thread_name\",\"args\":{\"name\":\"worker "
                                    "\\\"1\\\"\"}}"));
    cr_assert_not_null(
        strstr(text, "{\"ph\":\"B\",\"pid\":4242,\"tid\":4242,\"ts\":0.000,\"name\":\"main\"}"));
    cr_assert_not_null(strstr(
        text, "{\"ph\":\"E\",\"pid\":4242,\"tid\":4242,\"ts\":183.724,\"name\":\"xpread\"}"));
    cr_assert_not_null(strstr(text, "{\"ph\":\"i\",\"pid\":4242,\"tid\":4243,\"ts\":0.300,"
                                    "\"s\":\"t\",\"name\":\"lost 123 events\"}"));
    cr_assert(strcmp(text + n - 4, "\n]}\n") == 0);
    cr_assert_eq(st.events, 13);
    cr_assert_eq(st.lost, 123);
    ftr_buf_free(&b.f);
}

Test(report, pipeline_truncated_keeps_what_is_readable)
{
    struct tb b;
    build_example(&b);
    /* cut inside the END chunk: every EVENTS chunk stays readable */
    size_t cut = b.f.len - 20;
    const char *path = write_tmp(b.f.data, cut);
    char note[256];
    struct frp_stats st;
    char *text = report_graph(path, -1, NULL, 0, &st, note, sizeof note);
    cr_assert_not_null(strstr(text, "# ftrace-run: ./prog arg1 arg2  pid 4242  2 threads  "
                                    "? calls (no end record)\n"));
    cr_assert_not_null(strstr(text, "  4242)               |  main() {\n"));
    cr_assert_not_null(strstr(note, "trace truncated"), "note: %s", note);
    free(text);
    ftr_buf_free(&b.f);
}

Test(report, pipeline_corrupt_chunk_skipped)
{
    struct tb b;
    build_example(&b);
    /* damage the payload of the worker's EVENTS chunk (the 5th chunk): flip bytes in it */
    struct ftr_reader *rd;
    const char *path = write_tmp(b.f.data, b.f.len);
    cr_assert_eq(ftr_reader_open(path, &rd), FTR_OK);
    struct ftr_chunk_hdr h;
    uint64_t off = 0, woff = 0;
    while (ftr_reader_next(rd, &h, &off) == FTR_OK)
        if (h.type == FTR_CHUNK_EVENTS && h.tid == 4243) woff = off;
    ftr_reader_close(rd);
    cr_assert(woff);
    b.f.data[woff + FTR_CHUNK_HEADER_SIZE + 6] ^= 0xff;
    b.f.data[woff + FTR_CHUNK_HEADER_SIZE + 7] ^= 0x55;
    path = write_tmp(b.f.data, b.f.len);
    char note[256];
    char *text = report_graph(path, -1, NULL, 0, NULL, note, sizeof note);
    cr_assert_null(strstr(text, "4243)"));
    cr_assert_not_null(strstr(text, "  4242) ! 164.724 us  |  xpread();\n"));
    cr_assert_not_null(strstr(note, "skipped 1 corrupt chunk"), "note: %s", note);
    free(text);
    ftr_buf_free(&b.f);
}

Test(report, open_errors)
{
    struct frp_report *r = (void *)1;
    errno = 0;
    cr_assert_eq(frp_report_open("/nonexistent/ftrace.ftr", &r), FTR_E_IO);
    cr_assert_eq(errno, ENOENT);
    cr_assert_null(r);
    cr_assert_eq(frp_report_open(write_tmp("", 0), &r), FTR_E_EMPTY);
    cr_assert_eq(frp_report_open(write_tmp("hello, world\n", 13), &r), FTR_E_NOT_TRACE);
    struct ftr_buf f = {0};
    cr_assert_eq(ftr_enc_file_header(&f), FTR_OK);
    cr_assert_eq(frp_report_open(write_tmp(f.data, f.len), &r), FTR_E_EMPTY); /* header only */
    uint8_t junk[300];
    for (size_t i = 0; i < sizeof junk; i++)
        junk[i] = (uint8_t)(i * 7 + 1);
    ftr_buf_append(&f, junk, sizeof junk);
    cr_assert_eq(frp_report_open(write_tmp(f.data, f.len), &r), FTR_E_CORRUPT);
    ftr_buf_free(&f);
}

Test(report, pipeline_multi_process_and_exec)
{
    static const char *const a1[] = {"./parent"}, *const a2[] = {"./child", "it's"},
                             *const a3[] = {"./exec'd"};
    static const struct tev p1[] = {E(0, 1, 5000), X(0, 1, 6000)};
    static const struct tev p2[] = {E(0, 2, 3000), X(0, 2, 3500)};
    static const struct tev p3[] = {E(0, 3, 9000), X(0, 3, 9100)};
    struct tb b;
    tb_init(&b);
    /* the child (pid 20) started before the parent (10) wrote a thing: sections go by start */
    tb_process(&b, 10, 1, 4000, a1, 1);
    tb_sites(&b, 10);
    tb_process(&b, 20, 10, 2000, a2, 2); /* forked child: no SITES of its own, uses its parent's */
    tb_events(&b, 10, 10, p1, 2);
    tb_events(&b, 20, 20, p2, 2);
    tb_end(&b, 20, 1);
    tb_process(&b, 20, 10, 8000, a3, 1); /* pid 20 exec()ed: not its parent's code */
    tb_events(&b, 20, 20, p3, 2);
    tb_done(&b);
    const char *path = write_tmp(b.f.data, b.f.len);
    char note[256];
    char *text = report_graph(path, -1, NULL, 0, NULL, note, sizeof note);
    expect_text(text, "# ftrace-run: ./child 'it'\\''s'  pid 20  1 thread  1 call\n"
                      "#  TID      DURATION          FUNCTION CALLS\n"
                      "#  |        |   |             |   |   |   |\n"
                      "    20)     0.500 us  |  leaf();\n"
                      "\n"
                      "# ftrace-run: ./parent  pid 10  1 thread  ? calls (no end record)\n"
                      "#  TID      DURATION          FUNCTION CALLS\n"
                      "#  |        |   |             |   |   |   |\n"
                      "    10)     1.000 us  |  main();\n"
                      "\n"
                      "# ftrace-run: './exec'\\''d'  pid 20  1 thread  ? calls (no end record)\n"
                      "#  TID      DURATION          FUNCTION CALLS\n"
                      "#  |        |   |             |   |   |   |\n"
                      "    20)     0.100 us  |  <site 3>();\n");
    cr_assert_str_eq(note, "no end record for 2 processes (killed?)");
    free(text);
    ftr_buf_free(&b.f);
}

/* A daemon's parent ends inside daemon() and writes its first chunk last: the child's PROCESS
 * chunk comes first in the file, yet its parent is still the one that forked it. */
Test(report, parent_written_after_child)
{
    static const char *const a1[] = {"./parent"}, *const a2[] = {"./daemon"};
    static const struct tev p1[] = {E(0, 1, 1500), X(0, 1, 1600)};
    static const struct tev p2[] = {E(0, 2, 3000), X(0, 2, 3500)};
    struct tb b;
    tb_init(&b);
    tb_process(&b, 21, 10, 2000, a2, 1); /* the child, started after its parent */
    tb_sites(&b, 21);
    tb_events(&b, 21, 21, p2, 2);
    tb_process(&b, 10, 1, 1000, a1, 1);
    tb_sites(&b, 10);
    tb_events(&b, 10, 10, p1, 2);
    tb_done(&b);
    struct frp_report *r;
    cr_assert_eq(frp_report_open(write_tmp(b.f.data, b.f.len), &r), FTR_OK);
    cr_assert_eq(r->nprocs, 2);
    const struct frp_process *child = r->procs[0]->pid == 21 ? r->procs[0] : r->procs[1];
    const struct frp_process *parent = child == r->procs[0] ? r->procs[1] : r->procs[0];
    cr_assert_eq(child->parent, parent, "the daemon's parent is the process that forked it");
    cr_assert(!child->after_exec && !parent->after_exec);
    frp_report_close(r);
    ftr_buf_free(&b.f);
}

Test(report, pipeline_note_on_unmatched_exits)
{
    static const char *const argv[] = {"./late"};
    /* tracing began inside two calls: their exits have no entry */
    static const struct tev evs[] = {E(0, 2, 100), X(0, 2, 150), X(0, 3, 200), X(0, 1, 300)};
    struct tb b;
    tb_init(&b);
    tb_process(&b, 5, 1, 0, argv, 1);
    tb_sites(&b, 5);
    tb_events(&b, 5, 5, evs, 4);
    tb_end(&b, 5, 1);
    tb_done(&b);
    char note[256];
    struct frp_stats st;
    char *text = report_graph(write_tmp(b.f.data, b.f.len), -1, NULL, 0, &st, note, sizeof note);
    cr_assert_not_null(strstr(text, "     5)     0.050 us  |  leaf();\n"));
    cr_assert_eq(st.unmatched, 2);
    cr_assert_str_eq(note, "skipped 2 unmatched exits");
    free(text);
    ftr_buf_free(&b.f);
}

/* Many short-lived threads, chunks split everywhere: order, leaves across chunk ends, ties. */
Test(report, pipeline_many_threads_merge_order)
{
    struct tb b;
    tb_init(&b);
    static const char *const argv[] = {"./many"};
    tb_process(&b, 7, 1, 0, argv, 1);
    tb_sites(&b, 7);
    /* thread k lives in [k*100, k*100+250): overlapping neighbours; one chunk per event */
    for (uint32_t k = 0; k < 30; k++) {
        struct tev a[] = {E(0, 1, k * 100), E(0, 2, k * 100 + 50), X(0, 2, k * 100 + 100),
                          X(0, 1, k * 100 + 250)};
        for (int i = 0; i < 4; i++)
            tb_events(&b, 7, 1000 + k, &a[i], 1);
    }
    tb_done(&b);
    const char *path = write_tmp(b.f.data, b.f.len);
    struct frp_report *r;
    cr_assert_eq(frp_report_open(path, &r), FTR_OK);
    struct frp_merge *m;
    cr_assert_eq(frp_merge_open(r, NULL, &m), FTR_OK);
    struct frp_item it;
    uint64_t last = 0, n = 0, last_tid = 0;
    int rc;
    while ((rc = frp_merge_next(m, &it)) == 1) {
        cr_assert_geq(it.ev.tsc, last);
        if (it.ev.tsc == last && n) /* ties: the earlier chunk in the file first */
            cr_assert_lt(last_tid, it.thread->tid, "tie at %llu", (unsigned long long)last);
        if (it.ev.kind == FTR_EV_ENTRY && it.ev.site == 2) {
            cr_assert_not_null(it.next);
            cr_assert_eq(it.next->kind, FTR_EV_EXIT);
            cr_assert_eq(it.next->tsc, it.ev.tsc + 50);
            cr_assert_str_eq(it.name.s, "leaf");
        }
        last = it.ev.tsc;
        last_tid = it.thread->tid;
        n++;
    }
    cr_assert_eq(rc, 0);
    cr_assert_eq(n, 120);
    frp_merge_close(m);
    frp_report_close(r);
    ftr_buf_free(&b.f);
}
