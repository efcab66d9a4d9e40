/*
 * test_report_input.c - ftrace-report on bad input (truncated, corrupt in the middle, another
 * format, empty, a newer version, an older one; calls nested deeper than it keeps), the order of
 * a thread's pieces, its number parsing, and the command line: exit statuses, messages, colours,
 * the pager (under a pseudo-terminal).
 */
#define _GNU_SOURCE
#include "test_report_fixture.h"

#include <fcntl.h>
#include <limits.h>
#include <pty.h>
#include <sys/wait.h>

TestSuite(input, .fini = fx_cleanup);

/* ---------------------------------------------------------------- numbers */

Test(input, parse_duration)
{
    static const struct {
        const char *s;
        uint64_t ns;
    } ok[] = {
        {"10us", 10000}, {"1.5ms", 1500000}, {"2s", 2000000000ull}, {"300ns", 300},
        {"0", 0},        {"0.25us", 250},    {".5s", 500000000},    {"1.0000000009s", 1000000000}};
    for (size_t i = 0; i < sizeof ok / sizeof *ok; i++) {
        uint64_t v = 7;
        cr_assert_eq(frp_parse_duration(ok[i].s, ok[i].s + strlen(ok[i].s), &v), 0, "%s", ok[i].s);
        cr_assert_eq(v, ok[i].ns, "%s: %llu", ok[i].s, (unsigned long long)v);
    }
    static const char *const bad[] = {
        "", "10", "us", "1.5", "10 us", "-1ms", "1e3us", "5m", "99999999999999999999s"};
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        uint64_t v;
        cr_assert_eq(frp_parse_duration(bad[i], bad[i] + strlen(bad[i]), &v), -1, "%s", bad[i]);
    }
}

Test(input, fmt_time)
{
    char b[40];
    frp_fmt_time(b, 0);
    cr_assert_str_eq(b, "       0 ns");
    frp_fmt_time(b, 999);
    cr_assert_str_eq(b, "     999 ns");
    frp_fmt_time(b, 1000);
    cr_assert_str_eq(b, "   1.000 us");
    frp_fmt_time(b, 12206);
    cr_assert_str_eq(b, "  12.206 us");
    frp_fmt_time(b, 999999999);
    cr_assert_str_eq(b, " 999.999 ms");
    frp_fmt_time(b, 3000000000ull);
    cr_assert_str_eq(b, "   3.000  s");
    cr_assert_eq(frp_ns_to_ticks(1000, 1e9 / 3e9), 3000);
    cr_assert_eq(frp_ns_to_ticks(1, 0.4), 3); /* rounded up */
}

/* ---------------------------------------------------------------- bad files */

static size_t chunk_offset(const struct ftr_buf *f, int type, int nth)
{
    const char *path = fx_write(f->data, f->len);
    struct ftr_reader *rd;
    cr_assert_eq(ftr_reader_open(path, &rd), FTR_OK);
    struct ftr_chunk_hdr h;
    uint64_t off, found = 0;
    while (ftr_reader_next(rd, &h, &off) == FTR_OK)
        if (h.type == type && nth-- == 0) {
            found = off;
            break;
        }
    ftr_reader_close(rd);
    cr_assert(found);
    return found;
}

static char *graph_and_note(const void *p, size_t n, char *note, size_t note_len)
{
    const char *path = fx_write(p, n);
    struct frp_report *r;
    int rc = frp_report_open(path, &r);
    cr_assert_eq(rc, FTR_OK, "%s", ftr_strerror(rc));
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct frp_stats st;
    cr_assert_eq(frp_render(r, FRP_GRAPH, NULL, f, &st), FTR_OK);
    fclose(f);
    frp_report_note(r, &st, note, note_len);
    frp_report_close(r);
    return text;
}

Test(input, truncated_inside_events_keeps_the_start)
{
    struct tb b;
    fx_example(&b);
    /* cut in the middle of the main thread's second EVENTS chunk */
    size_t off = chunk_offset(&b.f, FTR_CHUNK_EVENTS, 2);
    char note[256];
    char *text = graph_and_note(b.f.data, off + FTR_CHUNK_HEADER_SIZE + 3, note, sizeof note);
    cr_assert_not_null(strstr(text, "  4242)               |      leaf() {\n"), "%s", text);
    cr_assert_not_null(strstr(text, "  4243)     3.800 us  |  } /* worker */\n"), "%s", text);
    cr_assert_null(strstr(text, "xpread"));
    cr_assert_str_eq(note, "trace truncated (the program was killed?)");
    free(text);
    ftr_buf_free(&b.f);
}

Test(input, corrupt_frame_in_the_middle)
{
    struct tb b;
    fx_example(&b);
    size_t off = chunk_offset(&b.f, FTR_CHUNK_EVENTS, 0); /* the main thread's first chunk */
    b.f.data[off + FTR_CHUNK_HEADER_SIZE + 9] ^= 0x5a;
    char note[256];
    char *text = graph_and_note(b.f.data, b.f.len, note, sizeof note);
    /* what follows is still shown; the second chunk's exits have no entries */
    cr_assert_not_null(strstr(text, "  4243)     3.800 us  |  } /* worker */\n"), "%s", text);
    cr_assert_not_null(strstr(text, "  4242) ! 164.724 us  |  xpread();\n"), "%s", text);
    cr_assert_str_eq(note, "skipped 1 corrupt chunk; skipped 3 unmatched exits");
    free(text);
    ftr_buf_free(&b.f);
}

Test(input, garbage_between_chunks)
{
    struct tb b;
    fx_example(&b);
    size_t off = chunk_offset(&b.f, FTR_CHUNK_EVENTS, 1);
    struct ftr_buf g = {0};
    ftr_buf_append(&g, b.f.data, off);
    static const char junk[] = "#### not a chunk ####";
    ftr_buf_append(&g, junk, sizeof junk - 1);
    ftr_buf_append(&g, b.f.data + off, b.f.len - off);
    char note[256];
    char *text = graph_and_note(g.data, g.len, note, sizeof note);
    cr_assert_not_null(strstr(text, "  4242) ! 164.724 us  |  xpread();\n"));
    cr_assert_str_eq(note, "skipped 21 damaged bytes");
    free(text);
    ftr_buf_free(&g);
    ftr_buf_free(&b.f);
}

Test(input, unreadable_files)
{
    struct frp_report *r;
    cr_assert_eq(frp_report_open(fx_write("", 0), &r), FTR_E_EMPTY);
    static const uint8_t elf[] = {0x7f, 'E', 'L', 'F', 2, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0};
    cr_assert_eq(frp_report_open(fx_write(elf, sizeof elf), &r), FTR_E_NOT_TRACE);
    cr_assert_eq(frp_report_open(fx_write("FTRACE\x1a", 7), &r), FTR_E_TRUNCATED);
    struct tb b;
    fx_example(&b);
    b.f.data[8] = FTR_FORMAT_MAJOR + 1; /* a newer major */
    cr_assert_eq(frp_report_open(fx_write(b.f.data, b.f.len), &r), FTR_E_VERSION);
    b.f.data[8] = FTR_FORMAT_MAJOR;
    b.f.data[10] = 9; /* minor 9: compatible */
    cr_assert_eq(frp_report_open(fx_write(b.f.data, b.f.len), &r), FTR_OK);
    cr_assert_eq(r->version_minor, 9);
    frp_report_close(r);
    /* only the file header and damage: nothing readable */
    cr_assert_eq(frp_report_open(fx_write(b.f.data, FTR_FILE_HEADER_SIZE + 30), &r),
                 FTR_E_TRUNCATED);
    ftr_buf_free(&b.f);
}

/* ---------------------------------------------------------------- nested deeper than kept */

#define SP(sub, tsc, n)                                                                            \
    {                                                                                              \
        FTR_EV_SPECIAL, sub, tsc, n                                                                \
    }

/* View v of one thread's events evs, the report keeping depth_max levels; its note in note. */
static char *deep_view(const struct tev *evs, size_t n, uint32_t depth_max, enum frp_view v,
                       char *note, size_t note_len)
{
    struct tb b;
    tb_init(&b);
    tb_process(&b, 4242, 1, 1000, "./prog");
    tb_module(&b, 4242, 1, "/bin/prog", 0x400000, NULL, 0);
    tb_sites(&b, 4242, 1, 1, fx_names, 5, 0x401000);
    tb_events(&b, 4242, 4242, evs, n);
    tb_end(&b, 4242, 200000, 6);
    tb_done(&b);
    const char *path = fx_write(b.f.data, b.f.len);
    ftr_buf_free(&b.f);
    struct frp_report *r;
    cr_assert_eq(frp_report_open(path, &r), FTR_OK);
    cr_assert_eq(frp_report_names(r, FRP_DEMANGLE_SIMPLE, 0), FTR_OK);
    cr_assert_eq(r->depth_max, FTR_DEPTH_MAX);
    r->depth_max = depth_max;
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct frp_stats st;
    cr_assert_eq(frp_render(r, v, NULL, f, &st), FTR_OK);
    fclose(f);
    frp_report_note(r, &st, note, note_len);
    frp_report_close(r);
    return text;
}

#define GRAPH_HEAD                                                                                 \
    "# ftrace-run: ./prog  pid 4242  1 thread  6 calls\n"                                          \
    "#  TID      DURATION          FUNCTION CALLS\n"                                               \
    "#  |        |   |             |   |   |   |\n"

Test(input, calls_nested_deeper_than_kept_are_counted)
{
    /* two stretches deeper than 2 levels: leaf { leaf }, then leaf */
    static const struct tev evs[] = {E(MAIN, 1000), E(MID, 1100),  E(LEAF, 1200), E(LEAF, 1300),
                                     X(LEAF, 1400), X(LEAF, 1500), E(LEAF, 1600), X(LEAF, 1700),
                                     X(MID, 1800),  X(MAIN, 1900)};
    char note[256];
    char *text = deep_view(evs, 10, 2, FRP_GRAPH, note, sizeof note);
    fx_expect(text, GRAPH_HEAD "  4242)               |  main() {\n"
                               "  4242)               |    mid() {\n"
                               "  4242)               |      /* 2 calls nested deeper than 2 not "
                               "shown */\n"
                               "  4242)               |      /* 1 call nested deeper than 2 not "
                               "shown */\n"
                               "  4242)     0.700 us  |    } /* mid */\n"
                               "  4242)     0.900 us  |  } /* main */\n");
    cr_assert_str_eq(note, "skipped 3 calls nested deeper than 2");
    free(text);
    text = deep_view(evs, 10, 2, FRP_SUMMARY, note, sizeof note);
    cr_assert_not_null(strstr(text, "# 2 functions, 2 calls\n"), "%s", text);
    cr_assert_null(strstr(text, "leaf"), "%s", text);
    free(text);
    text = deep_view(evs, 10, 2, FRP_CHROME, note, sizeof note);
    cr_assert_not_null(strstr(text, "\"name\":\"2 calls nested deeper than 2 not shown\"}"), "%s",
                       text);
    free(text);
    text = deep_view(evs, 10, 3, FRP_FOLDED, note, sizeof note);
    fx_expect(text, "main 200\nmain;mid 300\nmain;mid;leaf 400\n");
    cr_assert_str_eq(note, "skipped 1 call nested deeper than 3");
    free(text);
    /* the whole trace when it nests no deeper than kept */
    text = deep_view(evs, 10, 4, FRP_FOLDED, note, sizeof note);
    fx_expect(text, "main 200\nmain;mid 300\nmain;mid;leaf 300\nmain;mid;leaf;leaf 100\n");
    cr_assert_str_eq(note, "");
    free(text);
}

Test(input, thread_ending_deeper_than_kept)
{
    static const struct tev evs[] = {E(MAIN, 1000), E(MID, 1100), E(LEAF, 1200), E(LEAF, 1300)};
    char note[256];
    char *text = deep_view(evs, 4, 1, FRP_GRAPH, note, sizeof note);
    fx_expect(text, GRAPH_HEAD "  4242)               |  main() {\n"
                               "  4242)               |    /* 3 calls nested deeper than 1 not "
                               "shown */\n");
    cr_assert_str_eq(note, "skipped 3 calls nested deeper than 1");
    free(text);
}

Test(input, counted_specials_count_the_calls_kept)
{
    /* 2 frames resumed, the second deeper than kept: the later mid is a call of its own */
    static const struct tev evs[] = {E(MAIN, 1000), SP(FTR_SP_RESUMED, 1100, 2),
                                     E(MID, 1100),  E(LEAF, 1100),
                                     X(LEAF, 1200), X(MID, 1300),
                                     E(MID, 1400),  X(MID, 1500),
                                     X(MAIN, 1600)};
    char note[256];
    char *text = deep_view(evs, 9, 2, FRP_GRAPH, note, sizeof note);
    fx_expect(text, GRAPH_HEAD "  4242)               |  main() {\n"
                               "  4242)               |    mid() { /* resumed */\n"
                               "  4242)               |      /* 1 call nested deeper than 2 not "
                               "shown */\n"
                               "  4242)     0.200 us  |    } /* mid */\n"
                               "  4242)     0.100 us  |    mid();\n"
                               "  4242)     0.600 us  |  } /* main */\n");
    free(text);
}

/* ---------------------------------------------------------------- the command line */

static char report_bin[PATH_MAX];

static void find_bin(void)
{
    char self[PATH_MAX - 32];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    cr_assert(n > 0);
    self[n] = 0;
    char *slash = strrchr(self, '/');
    *slash = 0;
    snprintf(report_bin, sizeof report_bin, "%s/../ftrace-report", self);
    if (access(report_bin, X_OK) != 0) cr_skip_test("%s not built", report_bin);
}

struct run {
    int status;
    char out[65536], err[4096];
};

/* Runs ftrace-report with args (NULL-terminated) and env additions, stdout/stderr to pipes. */
static void run(struct run *res, const char *const *args, const char *const *env)
{
    char outp[] = "/tmp/ftr_cli_out_XXXXXX", errp[] = "/tmp/ftr_cli_err_XXXXXX";
    int of = mkstemp(outp), ef = mkstemp(errp);
    cr_assert(of >= 0 && ef >= 0);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(of, 1);
        dup2(ef, 2);
        for (const char *const *e = env; e && *e; e++)
            putenv((char *)*e);
        const char *argv[32] = {report_bin};
        for (int i = 0; args[i] && i < 30; i++)
            argv[i + 1] = args[i];
        execv(report_bin, (char **)argv);
        _exit(99);
    }
    int st;
    waitpid(pid, &st, 0);
    res->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    ssize_t n = pread(of, res->out, sizeof res->out - 1, 0);
    res->out[n > 0 ? n : 0] = 0;
    n = pread(ef, res->err, sizeof res->err - 1, 0);
    res->err[n > 0 ? n : 0] = 0;
    close(of);
    close(ef);
    unlink(outp);
    unlink(errp);
}

static const char *example_file(void)
{
    struct tb b;
    fx_example(&b);
    const char *path = fx_write(b.f.data, b.f.len);
    ftr_buf_free(&b.f);
    return path;
}

Test(input, cli_exit_statuses)
{
    find_bin();
    struct run r;
    const char *path = example_file();
    run(&r, (const char *[]){path, NULL}, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.out, "  4242) ! 164.724 us  |  xpread();\n"));
    cr_assert_str_eq(r.err, "");

    static const char *const usage[][4] = {
        {"--bogus", NULL},
        {"--threshold=10", NULL},
        {"--summary", "--chrome", NULL},
        {"--sort=calls", NULL},
        {"--time-range=2ms-1ms", NULL},
        {"--max-depth=0", NULL},
        {"--color=sometimes", NULL},
        {"--summary=x", NULL},
        {"--demangle=weird", NULL},
        {"--tid", NULL},
        {"a", "b", NULL},
        {"--sort=size", "--summary", NULL},
    };
    for (size_t i = 0; i < sizeof usage / sizeof *usage; i++) {
        run(&r, usage[i], NULL);
        cr_assert_eq(r.status, 2, "%s: %d %s", usage[i][0], r.status, r.err);
        cr_assert_not_null(strstr(r.err, "(see --help)\n"), "%s: %s", usage[i][0], r.err);
    }
    run(&r, (const char *[]){"--help", NULL}, NULL);
    cr_assert_eq(r.status, 0);
    cr_assert_not_null(strstr(r.out, "--flamegraph=OUT.svg"));

    run(&r, (const char *[]){"/nonexistent.ftr", NULL}, NULL);
    cr_assert_eq(r.status, 1);
    cr_assert_str_eq(r.err, "ftrace-report: /nonexistent.ftr: No such file or directory\n");
    run(&r, (const char *[]){fx_write("", 0), NULL}, NULL);
    cr_assert_eq(r.status, 1);
    cr_assert_not_null(strstr(r.err, ": empty trace file\n"), "%s", r.err);
    run(&r, (const char *[]){fx_write("GIF89a......", 12), NULL}, NULL);
    cr_assert_eq(r.status, 1);
    cr_assert_not_null(strstr(r.err, ": not an ftrace-run trace file\n"), "%s", r.err);

    path = example_file();
    run(&r, (const char *[]){"--callgraph=nosuch", path, NULL}, NULL);
    cr_assert_eq(r.status, 1);
    cr_assert_not_null(strstr(r.err, ": no call of 'nosuch' in the trace\n"), "%s", r.err);
    run(&r, (const char *[]){"--tid=77", path, NULL}, NULL);
    cr_assert_eq(r.status, 1);
    cr_assert_not_null(strstr(r.err, ": no thread 77\n"), "%s", r.err);
#ifdef FRP_HAVE_FILTER
    run(&r, (const char *[]){"--filter=wroker", path, NULL}, NULL);
    cr_assert_eq(r.status, 1);
    cr_assert_not_null(strstr(r.err, "no function matches the filter 'wroker'; did you mean: "
                                     "worker?\n"),
                       "%s", r.err);
    run(&r, (const char *[]){"--filter=@(", path, NULL}, NULL);
    cr_assert_eq(r.status, 2, "%s", r.err);
#endif
}

Test(input, cli_truncated_file_reports_with_a_note)
{
    find_bin();
    struct tb b;
    fx_example(&b);
    size_t off = chunk_offset(&b.f, FTR_CHUNK_EVENTS, 2);
    const char *path = fx_write(b.f.data, off + 50);
    ftr_buf_free(&b.f);
    struct run r;
    run(&r, (const char *[]){"--summary", path, NULL}, NULL);
    cr_assert_eq(r.status, 0, "%s", r.err);
    cr_assert_not_null(strstr(r.out, "  worker\n"));
    cr_assert_str_eq(r.err, "ftrace-report: trace truncated (the program was killed?)\n");
}

Test(input, cli_colors)
{
    find_bin();
    const char *path = example_file();
    struct run r;
    run(&r, (const char *[]){path, NULL}, NULL); /* not a terminal: none */
    cr_assert_null(strchr(r.out, '\033'));
    run(&r, (const char *[]){"--color=always", path, NULL}, NULL);
    cr_assert_not_null(strstr(r.out, "\033[33m! 164.724 us\033[0m"));
    run(&r, (const char *[]){"--color=always", path, NULL}, (const char *[]){"NO_COLOR=1", NULL});
    cr_assert_not_null(strchr(r.out, '\033')); /* the option wins */
}

/* Under a pseudo-terminal: colours on, the output through $PAGER; NO_COLOR; --no-pager. */
static void on_pty(const char *const *args, const char *const *env, char *out, size_t n,
                   int *status)
{
    int master;
    pid_t pid = forkpty(&master, NULL, NULL, NULL);
    cr_assert(pid >= 0);
    if (pid == 0) {
        for (const char *const *e = env; e && *e; e++)
            putenv((char *)*e);
        const char *argv[16] = {report_bin};
        for (int i = 0; args[i] && i < 14; i++)
            argv[i + 1] = args[i];
        execv(report_bin, (char **)argv);
        _exit(99);
    }
    size_t len = 0;
    for (;;) {
        ssize_t got = read(master, out + len, n - 1 - len);
        if (got <= 0) break; /* EIO once the child is gone */
        len += (size_t)got;
    }
    out[len] = 0;
    int st;
    waitpid(pid, &st, 0);
    *status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    close(master);
}

Test(input, cli_pager_and_tty)
{
    find_bin();
    const char *path = example_file();
    char paged[] = "/tmp/ftr_paged_XXXXXX";
    int fd = mkstemp(paged);
    cr_assert(fd >= 0);
    close(fd);
    char pager[128], tty[65536];
    snprintf(pager, sizeof pager, "PAGER=cat > %s", paged);
    int status;
    on_pty((const char *[]){path, NULL}, (const char *[]){pager, "NO_COLOR=", NULL}, tty,
           sizeof tty, &status);
    cr_assert_eq(status, 0, "%s", tty);
    cr_assert_null(strstr(tty, "xpread"), "not paged: %s", tty);
    FILE *f = fopen(paged, "r");
    char text[65536];
    size_t n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    cr_assert_not_null(strstr(text, "\033[33m! 164.724 us\033[0m  |  xpread();\n"), "%s", text);

    /* the summary goes through the pager too, once computed */
    on_pty((const char *[]){"--summary", path, NULL}, (const char *[]){pager, NULL}, tty,
           sizeof tty, &status);
    f = fopen(paged, "r");
    n = fread(text, 1, sizeof text - 1, f);
    text[n] = 0;
    fclose(f);
    cr_assert_not_null(strstr(text, "  xpread\n"), "%s", text);

    on_pty((const char *[]){"--no-pager", path, NULL}, (const char *[]){"NO_COLOR=1", NULL}, tty,
           sizeof tty, &status);
    cr_assert_eq(status, 0);
    cr_assert_not_null(strstr(tty, "! 164.724 us  |  xpread();"), "%s", tty);
    cr_assert_null(strchr(tty, '\033'), "coloured despite NO_COLOR: %s", tty);
    unlink(paged);
}

/* ---------------------------------------------------------------- a thread's pieces */

/* The writer flushes a thread's chunk in pieces; a piece's header seq is where its first slot
 * lies in the thread's stream. A record's time is read before its slot is taken, so a signal
 * handler's records can come before it in the slots: a piece may start earlier in time than the
 * one before it, and the writer may also emit a full chunk after a piece of the next one. */
static void tb_piece(struct tb *b, uint32_t tid, uint64_t seq, const struct tev *evs, size_t n)
{
    struct ftr_rec r[16];
    cr_assert(n <= 16);
    for (size_t i = 0; i < n; i++)
        r[i] = (struct ftr_rec){evs[i].tsc, ftr_rec_head(evs[i].site, (unsigned)evs[i].kind), 0};
    cr_assert_eq(ftr_enc_events_at(b->e, 77, tid, seq, r, n, &b->f), FTR_OK);
}

static const char *const sig_names[] = {"loop", "spin_fn", "handler", "handler_work", "a", "b"};
enum { LOOP = 1, SPIN, HANDLER, WORK, SA, SB };

static void sig_begin(struct tb *b)
{
    tb_init(b);
    tb_process(b, 77, 1, 50, "./bsignals");
    tb_module(b, 77, 1, "/bin/bsignals", 0x400000, NULL, 0);
    tb_sites(b, 77, 1, 1, sig_names, 6, 0x401000);
}

/* Every event of the trace at path in merge order, as "site@tsc " words. */
static char *merged(const char *path)
{
    struct frp_report *r;
    cr_assert_eq(frp_report_open(path, &r), FTR_OK);
    struct frp_merge *m;
    cr_assert_eq(frp_merge_open(r, NULL, &m), FTR_OK);
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct frp_item it;
    int rc;
    while ((rc = frp_merge_next(m, &it)) == 1)
        fprintf(f, "%c%u@%llu ", "EXU!"[it.ev.kind], it.ev.site, (unsigned long long)it.ev.tsc);
    cr_assert_eq(rc, 0);
    fclose(f);
    frp_merge_close(m);
    frp_report_close(r);
    return text;
}

/* bsignals usr1 as it once failed: the handler interrupted spin_fn's exit hook after its clock
 * read (250), a piece ended after the handler's entry and another before spin_fn's exit. By
 * time, the last piece (250) came before the handler's (300, 400): handler_work showed under
 * spin_fn without its handler. The file holds the pieces out of order too. */
Test(input, pieces_in_slot_order_not_time_order)
{
    static const struct tev p0[] = {E(LOOP, 100), E(SPIN, 200)};
    static const struct tev p1[] = {E(HANDLER, 300)};
    static const struct tev p2[] = {E(WORK, 400), X(WORK, 500), X(HANDLER, 600)};
    static const struct tev p3[] = {X(SPIN, 250), E(SPIN, 700), X(SPIN, 800), X(LOOP, 900)};
    struct tb b;
    sig_begin(&b);
    tb_piece(&b, 78, 0, p0, 2);
    tb_piece(&b, 78, 3, p2, 3);
    tb_piece(&b, 78, 2, p1, 1);
    tb_piece(&b, 78, 6, p3, 4);
    tb_end(&b, 77, 1000, 4);
    tb_done(&b);
    const char *path = fx_write(b.f.data, b.f.len);
    char *ev = merged(path);
    /* spin_fn's exit is held back to the handler's end: a thread's time never goes back */
    fx_expect(ev, "E1@100 E2@200 E3@300 E4@400 X4@500 X3@600 X2@600 E2@700 X2@800 X1@900 ");
    free(ev);
    char *text = fx_render(path, FRP_FOLDED, NULL, NULL, NULL);
    fx_expect(text, "loop 300\n"
                    "loop;spin_fn 200\n"
                    "loop;spin_fn;handler 200\n"
                    "loop;spin_fn;handler;handler_work 100\n");
    free(text);
    ftr_buf_free(&b.f);
}

/* A tid the kernel gave to a new thread: its stream starts at seq 0 again. Each life keeps its
 * pieces in seq order, and the lives follow each other in time, whatever the file order. */
Test(input, pieces_of_a_reused_tid)
{
    static const struct tev a0[] = {E(SA, 100), X(SA, 110)}, a1[] = {E(SB, 120), X(SB, 130)};
    static const struct tev b0[] = {E(SB, 500), X(SB, 510)}, b1[] = {E(SA, 505), X(SA, 530)};
    struct tb b;
    sig_begin(&b);
    tb_piece(&b, 78, 2, b1, 2); /* the second life's second piece, written before its first */
    tb_piece(&b, 78, 2, a1, 2);
    tb_piece(&b, 78, 0, b0, 2);
    tb_piece(&b, 78, 0, a0, 2);
    tb_end(&b, 77, 1000, 4);
    tb_done(&b);
    char *ev = merged(fx_write(b.f.data, b.f.len));
    fx_expect(ev, "E5@100 X5@110 E6@120 X6@130 E6@500 X6@510 E5@510 X5@530 ");
    free(ev);
    ftr_buf_free(&b.f);
}

/* The same file in format 1 (40-byte chunk headers, no seq): read, in time order. */
static void to_format_1(struct ftr_buf *f)
{
    size_t in = FTR_FILE_HEADER_SIZE, outp = FTR_FILE_HEADER_SIZE;
    ftr_wr_le16(f->data + 8, 1);
    ftr_wr_le16(f->data + 10, 0);
    while (in < f->len) {
        uint8_t *h = f->data + in;
        uint32_t size = ftr_rd_le32(h + 16);
        memmove(f->data + outp, h, 36);
        uint32_t c = 0x811c9dc5u;
        for (int i = 0; i < 36; i++)
            c = (c ^ f->data[outp + i]) * 0x01000193u;
        ftr_wr_le32(f->data + outp + 36, c);
        memmove(f->data + outp + 40, f->data + in + FTR_CHUNK_HEADER_SIZE, size);
        in += FTR_CHUNK_HEADER_SIZE + size;
        outp += 40 + size;
    }
    f->len = outp;
}

Test(input, format_1_files_read_in_time_order)
{
    struct tb b;
    fx_example(&b);
    char *want = fx_render(fx_write(b.f.data, b.f.len), FRP_GRAPH, NULL, NULL, NULL);
    to_format_1(&b.f);
    struct frp_report *r;
    cr_assert_eq(frp_report_open(fx_write(b.f.data, b.f.len), &r), FTR_OK);
    cr_assert_eq(r->version_major, 1);
    cr_assert_eq(r->nchunks, 3);
    frp_report_close(r);
    char *got = fx_render(fx_path, FRP_GRAPH, NULL, NULL, NULL);
    fx_expect(got, want);
    free(got);
    free(want);
    ftr_buf_free(&b.f);
}
