/*
 * test_report_deep.c - ftrace-report on hostile depth: a thread that nests millions of calls
 * (a few KiB of trace) must not make any view use memory beyond the depth cap
 * (FRP_DEPTH_MAX), nor the graph write output that grows with the square of the depth.
 * The memory test renders every view in a child process under an address-space limit (not
 * under the sanitizers, whose shadow memory needs no such limit) into a sink that counts
 * the bytes and fails beyond a bound.
 */
#define _GNU_SOURCE
#include "test_report_fixture.h"

#include <sys/resource.h>
#include <sys/wait.h>

TestSuite(deep, .fini = fx_cleanup);

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define FX_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(memory_sanitizer)
#define FX_SANITIZED 1
#endif
#endif
#ifndef FX_SANITIZED
#define FX_SANITIZED 0
#endif

#define BATCH 65536

/* A trace of pid 4242, thread 4242: main { mid { mid { ... n calls of mid ... } } }, entries
 * at tsc 1000 + i (or all at 1000 when flat); with exits, they come back at tsc 3000000 + i
 * (or all at 5000000 when flat), else the calls stay open (no end record). */
static const char *deep_trace(uint32_t n, int exits, int flat)
{
    struct tb b;
    tb_init(&b);
    tb_process(&b, 4242, 1, 1000, "./deep");
    tb_module(&b, 4242, 1, "/bin/prog", 0x400000, NULL, 0);
    tb_sites(&b, 4242, 1, 1, fx_names, 5, 0x401000);
    struct ftr_rec *r = malloc(BATCH * sizeof *r);
    cr_assert_not_null(r);
    uint64_t total = (uint64_t)n + 1, k = 0;
    for (int pass = 0; pass < (exits ? 2 : 1); pass++) {
        for (uint64_t i = 0; i < total;) {
            size_t m = 0;
            for (; m < BATCH && i < total; m++, i++, k++) {
                uint64_t d = pass ? total - 1 - i : i; /* depth of the call: 0 is main */
                uint32_t site = d ? MID : MAIN;
                uint64_t tsc = pass ? (flat ? 5000000 : 3000000 + k) : (flat ? 1000 : 1000 + k);
                r[m] =
                    (struct ftr_rec){tsc, ftr_rec_head(site, pass ? FTR_EV_EXIT : FTR_EV_ENTRY), 0};
            }
            cr_assert_eq(ftr_enc_events(b.e, 4242, 4242, r, m, &b.f), FTR_OK);
        }
    }
    free(r);
    if (exits) tb_end(&b, 4242, 6000000, total);
    tb_done(&b);
    const char *path = fx_write(b.f.data, b.f.len);
    free(b.f.data);
    return path;
}

/* ---- a FILE that counts what is written to it, and fails beyond a limit ---- */
struct counter {
    size_t n, limit;
};

static ssize_t count_write(void *c, const char *buf, size_t size)
{
    struct counter *k = c;
    (void)buf;
    k->n += size;
    if (k->n > k->limit) {
        errno = EFBIG;
        return -1;
    }
    return (ssize_t)size;
}

/* View v of the trace at path written to a counter of limit bytes. @return the render's
 * result; *written: the bytes written */
static int render_counted(const char *path, enum frp_view v, const struct frp_opts *o, size_t limit,
                          size_t *written, struct frp_stats *st)
{
    struct frp_report *r;
    int rc = frp_report_open(path, &r);
    if (rc) return rc;
    if (frp_report_names(r, FRP_DEMANGLE_SIMPLE, 0)) {
        frp_report_close(r);
        return FTR_E_NOMEM;
    }
    struct counter k = {0, limit};
    FILE *f = fopencookie(&k, "w", (cookie_io_functions_t){.write = count_write});
    if (!f) {
        frp_report_close(r);
        return FTR_E_NOMEM;
    }
    rc = frp_render(r, v, o, f, st);
    if (fclose(f) && rc == FTR_OK) rc = FTR_E_IO;
    frp_report_close(r);
    *written = k.n;
    return rc;
}

/* The address space in use now, in bytes. */
static size_t vm_size(void)
{
    FILE *f = fopen("/proc/self/statm", "r");
    cr_assert_not_null(f);
    unsigned long pages = 0;
    cr_assert_eq(fscanf(f, "%lu", &pages), 1);
    fclose(f);
    return pages * (size_t)sysconf(_SC_PAGESIZE);
}

#define MEM_LIMIT (256u << 20) /* more address space the child may take */
#define OUT_LIMIT (64u << 20)  /* bytes of output */

/* Renders view v of path in a child limited to MEM_LIMIT more address space. @return the
 * child's exit status: 0 done, 1 the render failed (its result in *rc), 2 killed */
static int render_limited(const char *path, enum frp_view v, const struct frp_opts *o, int *rc,
                          size_t *written)
{
    int fd[2];
    cr_assert_eq(pipe(fd), 0);
    fflush(NULL);
    pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        close(fd[0]);
        if (!FX_SANITIZED) {
            size_t lim = vm_size() + MEM_LIMIT;
            struct rlimit rl = {lim, lim};
            if (setrlimit(RLIMIT_AS, &rl)) _exit(3);
        }
        size_t n = 0;
        struct frp_stats st;
        int got = render_counted(path, v, o, OUT_LIMIT, &n, &st);
        uint64_t out[2] = {(uint64_t)got, n};
        if (write(fd[1], out, sizeof out) != (ssize_t)sizeof out) _exit(4);
        _exit(got == FTR_OK ? 0 : 1);
    }
    close(fd[1]);
    uint64_t out[2] = {UINT64_MAX, 0};
    ssize_t got = read(fd[0], out, sizeof out);
    close(fd[0]);
    int status;
    cr_assert_eq(waitpid(pid, &status, 0), pid);
    *rc = got == (ssize_t)sizeof out ? (int)out[0] : -1;
    *written = (size_t)out[1];
    return WIFEXITED(status) ? WEXITSTATUS(status) : 2;
}

/* Millions of nested entries that never return (the trace had 60 million in one
 * chunk of 4.7 KB): every view keeps at most FRP_DEPTH_MAX frames per thread. */
Test(deep, every_view_bounded)
{
    uint32_t n = FX_SANITIZED ? 300000 : 8000000;
    const char *path = deep_trace(n, 0, 0);
    static const struct {
        enum frp_view v;
        const char *name;
    } views[] = {{FRP_GRAPH, "graph"},   {FRP_SUMMARY, "summary"},     {FRP_FOLDED, "folded"},
                 {FRP_CHROME, "chrome"}, {FRP_CALLGRAPH, "callgraph"}, {FRP_FLAME, "flame"}};
    for (size_t i = 0; i < sizeof views / sizeof *views; i++) {
        struct frp_opts o = {.callgraph = "mid"};
        int rc;
        size_t written;
        int st = render_limited(path, views[i].v, &o, &rc, &written);
        cr_expect_eq(st, 0, "%s: child status %d, render: %s, %zu bytes written", views[i].name, st,
                     rc >= 0 ? ftr_strerror(rc) : "?", written);
        cr_log_info("%s: %zu bytes", views[i].name, written);
    }
    /* and through the shaper too */
    struct frp_opts o = {.max_depth = 100000000};
    int rc;
    size_t written;
    int st = render_limited(path, FRP_SUMMARY, &o, &rc, &written);
    cr_expect_eq(st, 0, "shaped summary: child status %d, render: %s", st,
                 rc >= 0 ? ftr_strerror(rc) : "?");
}

/* A 20000-deep chain: the graph's lines stay narrow (the indentation stops growing at
 * FRP_GRAPH_INDENT_MAX levels, a "[depth N]" marker beyond), so its size follows the calls. */
Test(deep, graph_linear)
{
    const uint32_t n = 20000;
    const char *path = deep_trace(n, 1, 0);
    size_t written = 0;
    struct frp_stats st;
    int rc = render_counted(path, FRP_GRAPH, NULL, OUT_LIMIT, &written, &st);
    cr_assert_eq(rc, FTR_OK, "%s, %zu bytes", ftr_strerror(rc), written);
    /* two lines per call kept, each at most about 300 bytes wide */
    cr_assert_leq(written, (size_t)2 * FRP_DEPTH_MAX * 300 + 4096, "%zu bytes", written);
    cr_assert_eq(st.deep, n + 1 - FRP_DEPTH_MAX, "%llu", (unsigned long long)st.deep);
}

/* The graph's lines around the indentation cap, and the line that says what was cut. */
Test(deep, graph_text)
{
    const char *path = deep_trace(FRP_DEPTH_MAX + 9, 1, 0);
    struct frp_stats st;
    char *g = fx_render(path, FRP_GRAPH, NULL, NULL, &st);
    char want[512];
    /* the last call with its own indentation: depth FRP_GRAPH_INDENT_MAX */
    snprintf(want, sizeof want, "\n  4242)               |  %*smid() {\n",
             2 * (FRP_GRAPH_INDENT_MAX - 1), "");
    cr_assert_not_null(strstr(g, want), "no line:\n%s", want);
    /* the next one level further, and marked: every line deeper has that indentation */
    snprintf(want, sizeof want, "\n  4242)               |  %*s[depth %u] mid() {\n",
             2 * FRP_GRAPH_INDENT_MAX, "", FRP_GRAPH_INDENT_MAX + 1);
    cr_assert_not_null(strstr(g, want), "no line:\n%s", want);
    /* the innermost call kept has callees cut: it opens and closes */
    snprintf(want, sizeof want, "[depth %u] mid() {\n", FRP_DEPTH_MAX);
    cr_assert_not_null(strstr(g, want), "no line:\n%s", want);
    snprintf(want, sizeof want,
             "[depth %u] /* 10 calls nested deeper than %u levels not shown */\n",
             FRP_DEPTH_MAX + 1, FRP_DEPTH_MAX);
    cr_assert_not_null(strstr(g, want), "no line:\n%s", want);
    cr_assert_null(strstr(g, "[depth 4097] mid"));
    cr_assert_eq(st.deep, 10);
    /* the note on stderr */
    struct frp_report *r;
    cr_assert_eq(frp_report_open(path, &r), FTR_OK);
    char note[256];
    frp_report_note(r, &st, note, sizeof note);
    frp_report_close(r);
    snprintf(want, sizeof want, "10 calls nested deeper than %u levels not shown", FRP_DEPTH_MAX);
    cr_assert_not_null(strstr(note, want), "note: %s", note);
    free(g);
}

/* The summary counts the calls it kept; the time of the cut ones is their caller's self time. */
Test(deep, summary_counts)
{
    const char *path = deep_trace(5000, 1, 1);
    struct frp_stats st;
    char *s = fx_render(path, FRP_SUMMARY, NULL, NULL, &st);
    char want[256];
    snprintf(want, sizeof want, "# 2 functions, %u calls\n", FRP_DEPTH_MAX);
    cr_assert_not_null(strstr(s, want), "%s", s);
    snprintf(want, sizeof want, "     4.999 ms     4.999 ms  %10u", FRP_DEPTH_MAX - 1);
    cr_assert_not_null(strstr(s, want), "%s", s);
    cr_assert_eq(st.deep, 5001 - FRP_DEPTH_MAX);
    free(s);
}

/* Folded stacks: the cut calls fold into the deepest stack kept. */
Test(deep, folded_folds)
{
    const char *path = deep_trace(5000, 1, 1);
    struct frp_stats st;
    char *s = fx_render(path, FRP_FOLDED, NULL, NULL, &st);
    size_t len = strlen(s), frames = 1;
    for (size_t i = 0; i < len; i++)
        frames += s[i] == ';';
    cr_assert_eq(frames, FRP_DEPTH_MAX, "%zu frames", frames);
    cr_assert_eq(strncmp(s, "main;mid;mid;", 13), 0);
    cr_assert_str_eq(s + len - 13, ";mid 4999000\n");
    cr_assert_eq(st.deep, 5001 - FRP_DEPTH_MAX);
    free(s);
}
