/*
 * ftrace_report.c - ftrace-report: shows a trace file written by ftrace-run.
 *
 * Exit status: 0 shown (possibly with a note on damage), 1 bad input or I/O error,
 * 2 bad usage.
 */
#include "report_lib.h"
#include "tty.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#ifdef FRP_HAVE_FILTER
#include "ftr_filter.h"
#endif

#define PROG "ftrace-report"

enum {
    OPT_CHROME = 256,
    OPT_TID,
    OPT_PID,
    OPT_SUMMARY,
    OPT_FOLDED,
    OPT_CALLGRAPH,
    OPT_FLAME,
    OPT_INFO,
    OPT_FILTER,
    OPT_MAX_DEPTH,
    OPT_THRESHOLD,
    OPT_TIME_RANGE,
    OPT_ABSTIME,
    OPT_NO_LEAF,
    OPT_NO_ARGS,
    OPT_NO_LIBCALL,
    OPT_MODULE,
    OPT_SORT,
    OPT_PER_THREAD,
    OPT_DEMANGLE,
    OPT_NO_DEMANGLE,
    OPT_SRCLINE,
    OPT_COLOR,
    OPT_NO_PAGER,
    OPT_TITLE,
    OPT_WAIT,
};

static const struct option options[] = {
    {"chrome", no_argument, NULL, OPT_CHROME},
    {"summary", no_argument, NULL, OPT_SUMMARY},
    {"folded", no_argument, NULL, OPT_FOLDED},
    {"callgraph", required_argument, NULL, OPT_CALLGRAPH},
    {"flamegraph", required_argument, NULL, OPT_FLAME},
    {"info", no_argument, NULL, OPT_INFO},
    {"tid", required_argument, NULL, OPT_TID},
    {"pid", required_argument, NULL, OPT_PID},
    {"filter", required_argument, NULL, OPT_FILTER},
    {"max-depth", required_argument, NULL, OPT_MAX_DEPTH},
    {"threshold", required_argument, NULL, OPT_THRESHOLD},
    {"time-range", required_argument, NULL, OPT_TIME_RANGE},
    {"abstime", no_argument, NULL, OPT_ABSTIME},
    {"no-leaf-compact", no_argument, NULL, OPT_NO_LEAF},
    {"no-args", no_argument, NULL, OPT_NO_ARGS},
    {"no-libcall", no_argument, NULL, OPT_NO_LIBCALL},
    {"module", no_argument, NULL, OPT_MODULE},
    {"show-module", no_argument, NULL, OPT_MODULE},
    {"sort", required_argument, NULL, OPT_SORT},
    {"per-thread", no_argument, NULL, OPT_PER_THREAD},
    {"demangle", required_argument, NULL, OPT_DEMANGLE},
    {"no-demangle", no_argument, NULL, OPT_NO_DEMANGLE},
    {"srcline", no_argument, NULL, OPT_SRCLINE},
    {"color", required_argument, NULL, OPT_COLOR},
    {"colour", required_argument, NULL, OPT_COLOR},
    {"no-pager", no_argument, NULL, OPT_NO_PAGER},
    {"title", required_argument, NULL, OPT_TITLE},
    {"wait", no_argument, NULL, OPT_WAIT},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void usage(void)
{
    fputs("Usage: " PROG " [VIEW] [OPTIONS] [FILE]\n"
          "Shows the function calls that ftrace-run recorded in FILE (default: ftrace.ftr;\n"
          "'-': standard input).\n"
          "\n"
          "Views (one at most; the function graph by default):\n"
          "  (default)             the function graph: one line per call, entry or return, of\n"
          "                        every thread in time order, with the time each call took\n"
          "  --summary             one row per function: total, self time, calls, average,\n"
          "                        min, max\n"
          "  --callgraph=F         the merged call graph under function F (a name or a glob),\n"
          "                        with the paths that called it\n"
          "  --folded              folded stacks with self times in ns (flamegraph.pl, inferno,\n"
          "                        speedscope)\n"
          "  --flamegraph=OUT.svg  an interactive SVG flame graph ('-': stdout)\n"
          "  --chrome              Chrome Trace Event JSON, for the Perfetto UI\n"
          "                        (ui.perfetto.dev) or chrome://tracing\n"
          "  --info                the trace's header: processes, threads, modules, clocks\n"
          "\n"
          "What to show (every view):\n"
          "  --tid=TID[,TID...]    only these threads\n"
          "  --pid=PID             only this process\n"
          "  --filter=EXPR         only the functions EXPR selects, as if only they had been\n"
          "                        traced (the grammar of ftrace-run --filter: f*,-g,lib:h)\n"
          "  --max-depth=N         only calls nested at most N deep\n"
          "  --threshold=TIME      hide calls shorter than TIME (e.g. 10us, 1.5ms, 2s) and what\n"
          "                        they called\n"
          "  --time-range=START-END  only what happened between START and END after the start\n"
          "                        of its process (e.g. 10ms-2s, 500us-, -1s)\n"
          "\n"
          "How:\n"
          "  --abstime             graph: a column with the wall-clock time of each line\n"
          "  --no-leaf-compact     graph: print calls without callees as 'f() {' and '}' too\n"
          "  --no-args             leave out recorded arguments and return values\n"
          "  --no-libcall          leave out library calls, as if they had not been traced\n"
          "  --show-module, --module  name functions name@module (e.g. open_db@libfoo.so)\n"
          "  --srcline             the source file:line of each function (from the DWARF of\n"
          "                        the binaries when present and of the recorded build-id)\n"
          "  --demangle=simple|full|no  C++ names: without parameters (default), complete, raw\n"
          "  --no-demangle         same as --demangle=no\n"
          "  --sort=KEY            summary: order by total (default), self, calls, avg or max\n"
          "  --per-thread          summary: a table per thread; folded, flame graph: a root\n"
          "                        frame per thread\n"
          "  --title=TEXT          flame graph: its title (default: the command line)\n"
          "  --color=WHEN          colours: auto (default: on a terminal, unless NO_COLOR is\n"
          "                        set), always, never\n"
          "  --no-pager            do not page the output on a terminal (else: $PAGER or less)\n"
          "  --wait                first wait until no process of the traced program writes\n"
          "                        FILE any more (a daemon may go on after ftrace-run returned;\n"
          "                        without --wait, the report says so and shows what is there)\n"
          "  -h, --help            show this help and exit\n"
          "\n"
          "Duration markers: + > 10 us, ! > 100 us, # > 1 ms, * > 10 ms, @ > 100 ms, $ > 1 s\n"
          "Exit status: 0 done, 1 unreadable trace file or I/O error, 2 bad usage.\n",
          stdout);
}

static int usage_error(const char *fmt, const char *what)
{
    fprintf(stderr, PROG ": ");
    fprintf(stderr, fmt, what);
    fprintf(stderr, " (see --help)\n");
    return 2;
}

static int parse_id(const char *s, const char *end, uint32_t *out)
{
    if (s == end || end - s > 10) return -1;
    uint64_t v = 0;
    for (const char *p = s; p < end; p++) {
        if (*p < '0' || *p > '9') return -1;
        v = v * 10 + (uint64_t)(*p - '0');
    }
    if (v == 0 || v > UINT32_MAX) return -1;
    *out = (uint32_t)v;
    return 0;
}

/* "1,2,3" -> tids; @return the count, or -1 on a bad list */
static long parse_tids(const char *s, uint32_t **tids, size_t *ntids)
{
    for (;;) {
        const char *comma = strchr(s, ',');
        const char *end = comma ? comma : s + strlen(s);
        uint32_t v;
        if (parse_id(s, end, &v)) return -1;
        uint32_t *t = realloc(*tids, (*ntids + 1) * sizeof *t);
        if (!t) return -1;
        *tids = t;
        t[(*ntids)++] = v;
        if (!comma) return (long)*ntids;
        s = comma + 1;
    }
}

/* The option getopt_long refused, for the message. */
static int bad_option(char **argv, int c)
{
    if (c == ':') return usage_error("option '%s' needs a value", argv[optind - 1]);
    for (const struct option *o = options; o->name; o++) {
        if (optopt != o->val || o->has_arg != no_argument) continue;
        char name[64];
        snprintf(name, sizeof name, "--%s", o->name);
        return usage_error("option '%s' takes no value", name);
    }
    if (optopt > 0 && optopt < 256) {
        char name[3] = {'-', (char)optopt, 0};
        return usage_error("unknown option '%s'", name);
    }
    char name[128];
    snprintf(name, sizeof name, "%s", argv[optind - 1]);
    name[strcspn(name, "=")] = 0;
    return usage_error("unknown option '%s'", name);
}

static int check_tids(struct frp_report *r, const char *path, long pid, const uint32_t *tids,
                      size_t ntids)
{
    int found_any = 0;
    for (size_t k = 0; k < ntids; k++) {
        int found = 0;
        for (uint32_t i = 0; i < r->nthreads && !found; i++)
            found = r->threads[i]->tid == tids[k] &&
                    (pid < 0 || r->threads[i]->proc->pid == (uint64_t)pid);
        if (!found)
            fprintf(stderr, PROG ": %s: no thread %u%s\n", path, tids[k],
                    pid < 0 ? "" : " in that process");
        found_any |= found;
    }
    return found_any;
}

/* The directory of the report's temporary files */
static const char *tmp_dir(void)
{
    const char *dir = getenv("TMPDIR");
    return dir && *dir ? dir : "/tmp";
}

/* Writes p[0..n) to fd whole. @return 0, or -1 with errno */
static int write_all(int fd, const char *p, size_t n)
{
    while (n) {
        ssize_t k = write(fd, p, n);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) {
            if (k == 0) errno = EIO;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

/* The report reads the file twice (tables, then events): a pipe is first copied to an unlinked
 * temporary file, read through /proc/self/fd. @return the fd (kept open), or -1 with errno when
 * reading path failed, -2 when making or writing the copy did. */
static int spool(const char *path, char *proc_path, size_t n)
{
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/ftrace-report-XXXXXX", tmp_dir());
    int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0) return -1;
    int out = mkstemp(tmp);
    if (out < 0) {
        int e = errno;
        close(in);
        errno = e;
        return -2;
    }
    unlink(tmp);
    static char buf[1 << 16];
    ssize_t got;
    while ((got = read(in, buf, sizeof buf)) != 0) {
        if (got < 0 && errno == EINTR) continue;
        int rc = got < 0 ? -1 : write_all(out, buf, (size_t)got) ? -2 : 0;
        if (rc == 0) continue;
        int e = errno;
        close(in);
        close(out);
        errno = e;
        return rc;
    }
    close(in);
    snprintf(proc_path, n, "/proc/self/fd/%d", out);
    return out;
}

/* "START-END", either side may be empty. @return 0 or -1 */
static int parse_range(const char *s, struct frp_opts *o)
{
    const char *dash = strchr(s, '-');
    if (!dash) return -1;
    const char *end = s + strlen(s);
    o->range_lo_ns = 0;
    o->range_hi_ns = UINT64_MAX;
    if (dash > s && frp_parse_duration(s, dash, &o->range_lo_ns)) return -1;
    if (dash + 1 < end && frp_parse_duration(dash + 1, end, &o->range_hi_ns)) return -1;
    if (o->range_hi_ns < o->range_lo_ns) return -1;
    o->has_range = 1;
    return 0;
}

struct cli {
    enum frp_view view;
    int nviews;
    const char *flame_out;
    long pid;
    uint32_t *tids;
    size_t ntids;
    const char *filter;
    enum frp_demangle demangle;
    int show_module;
    enum tty_when color;
    int no_pager;
    int wait;
    struct frp_opts o;
};

static int set_view(struct cli *c, enum frp_view v, const char *name)
{
    if (c->nviews++ && c->view != v)
        return usage_error("%s: only one view at a time (--summary, --callgraph, --folded, "
                           "--flamegraph, --chrome, --info)",
                           name);
    c->view = v;
    return 0;
}

/* @return -1 parsed, else the exit status */
static int parse_args(int argc, char **argv, struct cli *c)
{
    int ch;
    opterr = 0;
    while ((ch = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        int rc = 0;
        switch (ch) {
        case OPT_CHROME:
            rc = set_view(c, FRP_CHROME, "--chrome");
            break;
        case OPT_SUMMARY:
            rc = set_view(c, FRP_SUMMARY, "--summary");
            break;
        case OPT_FOLDED:
            rc = set_view(c, FRP_FOLDED, "--folded");
            break;
        case OPT_INFO:
            rc = set_view(c, FRP_INFO, "--info");
            break;
        case OPT_CALLGRAPH:
            rc = set_view(c, FRP_CALLGRAPH, "--callgraph");
            if (!*optarg) return usage_error("%s needs a function name", "--callgraph");
            c->o.callgraph = optarg;
            break;
        case OPT_FLAME:
            rc = set_view(c, FRP_FLAME, "--flamegraph");
            if (!*optarg) return usage_error("%s needs a file name", "--flamegraph");
            c->flame_out = optarg;
            break;
        case OPT_TID:
            if (parse_tids(optarg, &c->tids, &c->ntids) < 0)
                return usage_error("bad value for --tid: '%s' (expected TID[,TID...])", optarg);
            break;
        case OPT_PID: {
            uint32_t v;
            if (parse_id(optarg, optarg + strlen(optarg), &v))
                return usage_error("bad value for --pid: '%s'", optarg);
            c->pid = v;
            break;
        }
        case OPT_FILTER:
#ifndef FRP_HAVE_FILTER
            return usage_error("%s: not available in this build (no filter module)", "--filter");
#endif
            c->filter = optarg;
            break;
        case OPT_MAX_DEPTH: {
            uint32_t v;
            if (parse_id(optarg, optarg + strlen(optarg), &v))
                return usage_error("bad value for --max-depth: '%s' (expected a number >= 1)",
                                   optarg);
            c->o.max_depth = v;
            break;
        }
        case OPT_THRESHOLD:
            if (frp_parse_duration(optarg, optarg + strlen(optarg), &c->o.threshold_ns))
                return usage_error("bad value for --threshold: '%s' (expected a time such as "
                                   "10us, 1.5ms, 2s)",
                                   optarg);
            break;
        case OPT_TIME_RANGE:
            if (parse_range(optarg, &c->o))
                return usage_error("bad value for --time-range: '%s' (expected START-END, "
                                   "times such as 10ms-2s, 500us-, -1s)",
                                   optarg);
            break;
        case OPT_ABSTIME:
            c->o.abstime = 1;
            break;
        case OPT_NO_LEAF:
            c->o.no_leaf_compact = 1;
            break;
        case OPT_NO_ARGS:
            c->o.no_values = 1;
            break;
        case OPT_NO_LIBCALL:
            c->o.no_libcall = 1;
            break;
        case OPT_MODULE:
            c->show_module = 1;
            break;
        case OPT_SORT: {
            static const char *const keys[] = {"total", "self", "calls", "avg", "max"};
            int k = -1;
            for (int i = 0; i < 5 && k < 0; i++)
                if (strcmp(optarg, keys[i]) == 0) k = i;
            if (k < 0)
                return usage_error("bad value for --sort: '%s' (expected total, self, calls, "
                                   "avg or max)",
                                   optarg);
            c->o.sort = (enum frp_sort)k;
            break;
        }
        case OPT_PER_THREAD:
            c->o.per_thread = 1;
            break;
        case OPT_DEMANGLE:
            if (strcmp(optarg, "simple") == 0)
                c->demangle = FRP_DEMANGLE_SIMPLE;
            else if (strcmp(optarg, "full") == 0)
                c->demangle = FRP_DEMANGLE_FULL;
            else if (strcmp(optarg, "no") == 0 || strcmp(optarg, "none") == 0)
                c->demangle = FRP_DEMANGLE_NONE;
            else
                return usage_error("bad value for --demangle: '%s' (expected simple, full or no)",
                                   optarg);
            break;
        case OPT_NO_DEMANGLE:
            c->demangle = FRP_DEMANGLE_NONE;
            break;
        case OPT_SRCLINE:
            c->o.srcline = 1;
            break;
        case OPT_COLOR:
            if (strcmp(optarg, "auto") == 0)
                c->color = TTY_AUTO;
            else if (strcmp(optarg, "always") == 0)
                c->color = TTY_ALWAYS;
            else if (strcmp(optarg, "never") == 0)
                c->color = TTY_NEVER;
            else
                return usage_error("bad value for --color: '%s' (expected auto, always or never)",
                                   optarg);
            break;
        case OPT_NO_PAGER:
            c->no_pager = 1;
            break;
        case OPT_TITLE:
            c->o.title = optarg;
            break;
        case OPT_WAIT:
            c->wait = 1;
            break;
        case 'h':
            usage();
            return 0;
        default:
            return bad_option(argv, ch);
        }
        if (rc) return rc;
    }
    if (argc - optind > 1) return usage_error("too many arguments: '%s'", argv[optind + 1]);
    if (c->view != FRP_SUMMARY && c->o.sort != FRP_SORT_TOTAL)
        return usage_error("%s applies to --summary only", "--sort");
    return -1;
}

/* The view, with the pager when it goes to a terminal. Views that compute everything before
 * writing (all but the graph and Chrome JSON) are written to a temporary file first, so that
 * progress shows on the terminal while they compute and the pager starts with the result. */
static int render(struct frp_report *r, struct cli *c, FILE *out, struct frp_stats *st)
{
    int streaming = c->view == FRP_GRAPH || c->view == FRP_CHROME;
    int page = out == stdout && !c->no_pager && isatty(STDOUT_FILENO);
    if (!page) return frp_render(r, c->view, &c->o, out, st);
    if (streaming || c->view == FRP_INFO) {
        tty_pager_start();
        return frp_render(r, c->view, &c->o, out, st);
    }
    FILE *tmp = tmpfile();
    if (!tmp) return frp_render(r, c->view, &c->o, out, st);
    int rc = frp_render(r, c->view, &c->o, tmp, st);
    tty_progress_clear();
    if (rc == FTR_OK || rc == FTR_E_EMPTY) {
        tty_pager_start();
        rewind(tmp);
        char buf[1 << 16];
        size_t n;
        while ((n = fread(buf, 1, sizeof buf, tmp)) > 0)
            if (fwrite(buf, 1, n, stdout) != n) break;
        if (fflush(stdout) != 0 || ferror(stdout)) {
            st->write_errno = errno ? errno : EIO;
            rc = FTR_E_IO;
        }
    }
    fclose(tmp);
    return rc;
}

#ifdef FRP_HAVE_FILTER
/* "; did you mean: a, b?" with the trace's names nearest to a filter that matched nothing. */
static void suggest(struct frp_report *r, const struct ftr_filter *f)
{
    const char **names = NULL, *best[5];
    size_t n = 0, cap = 0;
    for (uint32_t i = 0; i < r->nprocs; i++) {
        struct frp_process *p = r->procs[i];
        for (uint32_t s = 1; p->selected && s < p->nsites; s++) {
            if (!p->meta[s].raw || frp_grow((void **)&names, &cap, n + 1, sizeof *names)) continue;
            names[n++] = frp_site_name(r, p, s).s;
        }
    }
    size_t k = ftr_filter_nearest(f, names, n, best, 5);
    for (size_t i = 0; i < k; i++)
        fprintf(stderr, "%s%s", i ? ", " : "; did you mean: ", best[i]);
    fprintf(stderr, "%s\n", k ? "?" : "");
    free(names);
}
#endif

/* A process of the traced program may still be writing the file (a daemon's child goes on
 * after ftrace-run returned): each writer holds a lock on it until its END is written
 * (formats/ftr_lock.c). Says so in one line, or with --wait waits for every writer first. */
static void check_writers(const struct cli *c, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    uint32_t pid;
    if (fd < 0) return; /* the report says why it cannot read it */
    if (c->wait)
        ftr_lock_wait(fd);
    else if (ftr_lock_holder(fd, &pid) > 0)
        fprintf(stderr,
                PROG ": %s is still being written by process %u: the report may lack its end; "
                     "--wait waits for it\n",
                path, pid);
    close(fd);
}

static int run(struct cli *c, const char *path)
{
    struct frp_report *r;
    struct stat sb;
    char spooled[64];
    const char *open_path = path;
    int spool_fd = -1, rc = FTR_OK;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) {
        if ((spool_fd = spool(path, spooled, sizeof spooled)) == -2) {
            fprintf(stderr, PROG ": cannot copy %s to a temporary file in %s: %s\n", path,
                    tmp_dir(), strerror(errno));
            return 1;
        }
        if (spool_fd < 0) rc = FTR_E_IO;
        open_path = spooled;
    } else {
        check_writers(c, path);
    }
    if (rc == FTR_OK) rc = frp_report_open(open_path, &r);
    if (rc) {
        const char *why = rc == FTR_E_IO ? strerror(errno) : ftr_strerror(rc);
        const char *more =
            rc == FTR_E_CORRUPT || rc == FTR_E_TRUNCATED ? " (nothing readable)" : "";
        fprintf(stderr, PROG ": %s: %s%s\n", path, why, more);
        if (spool_fd >= 0) close(spool_fd);
        return 1;
    }
    int status = 0;
    if (c->pid >= 0 || c->ntids) {
        if (c->ntids && !check_tids(r, path, c->pid, c->tids, c->ntids)) {
            status = 1;
        } else if (frp_report_select(r, c->pid, c->tids, c->ntids) == 0) {
            fprintf(stderr, PROG ": %s: no process %ld\n", path, c->pid);
            status = 1;
        }
    }
    if (!status && frp_report_names(r, c->demangle, c->show_module)) {
        fprintf(stderr, PROG ": %s\n", ftr_strerror(FTR_E_NOMEM));
        status = 1;
    }
#ifdef FRP_HAVE_FILTER
    if (!status && c->o.filter && frp_filter_count(r, c->o.filter) == 0) {
        fprintf(stderr, PROG ": %s: no function matches the filter '%s'", path, c->filter);
        suggest(r, c->o.filter);
        status = 1;
    }
#endif
    if (status) {
        frp_report_close(r);
        if (spool_fd >= 0) close(spool_fd);
        return status;
    }

    FILE *out = stdout;
    if (c->view == FRP_FLAME && strcmp(c->flame_out, "-") != 0) {
        out = fopen(c->flame_out, "w");
        if (!out) {
            fprintf(stderr, PROG ": %s: %s\n", c->flame_out, strerror(errno));
            frp_report_close(r);
            if (spool_fd >= 0) close(spool_fd);
            return 1;
        }
    }
    if (out == stdout) {
        static char outbuf[1 << 16];
        setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
    }
    c->o.color = tty_color(c->color, fileno(out));
    /* progress, but never into the lines of a view that streams to a terminal or a pipe
     * (likely a pager) */
    struct stat so;
    int streaming = c->view == FRP_GRAPH || c->view == FRP_CHROME;
    int to_term = isatty(fileno(out)) || (fstat(fileno(out), &so) == 0 && S_ISFIFO(so.st_mode));
    tty_progress_init(!(streaming && to_term));
    c->o.progress = tty_progress;
    const char *dest = out == stdout ? "output" : c->flame_out;
    struct frp_stats st = {0};
    rc = render(r, c, out, &st);
    tty_progress_clear();
    if (out != stdout && fclose(out) != 0 && rc == FTR_OK) {
        st.write_errno = errno;
        rc = FTR_E_IO;
    }
    if (rc == FTR_E_EMPTY && c->view == FRP_CALLGRAPH) {
        fprintf(stderr, PROG ": %s: no call of '%s' in the trace\n", path, c->o.callgraph);
        status = 1;
    } else if (rc == FTR_E_IO && st.write_errno == EPIPE && tty_pager_running()) {
        status = 0; /* the pager was quit before the end */
    } else if (rc && st.write_errno) {
        /* that alone: the notes on the trace would be of an output not written */
        fprintf(stderr, PROG ": cannot write %s: %s\n", dest, strerror(st.write_errno));
        status = 1;
    } else if (rc) {
        fprintf(stderr, PROG ": %s: %s\n", path,
                rc == FTR_E_IO ? strerror(errno) : ftr_strerror(rc));
        status = 1;
    }
    if (!st.write_errno) {
        if (c->o.srcline) frp_names_warnings(r, stderr);
        char note[512];
        if (frp_report_note(r, &st, note, sizeof note)) fprintf(stderr, PROG ": %s\n", note);
    }
    if (c->view == FRP_FLAME && out != stdout && !status)
        fprintf(stderr, PROG ": flame graph written to %s\n", c->flame_out);
    frp_report_close(r);
    if (spool_fd >= 0) close(spool_fd);
    return status;
}

int main(int argc, char **argv)
{
    struct cli c = {.view = FRP_GRAPH, .pid = -1};
    int status = parse_args(argc, argv, &c);
    if (status >= 0) {
        free(c.tids);
        return status;
    }
    const char *path = optind < argc ? argv[optind] : "ftrace.ftr";
    if (strcmp(path, "-") == 0) path = "/dev/stdin";
#ifdef FRP_HAVE_FILTER
    struct ftr_filter *filter = NULL;
    if (c.filter) {
        char err[256];
        filter = ftr_filter_parse(c.filter, err, sizeof err);
        if (!filter) {
            free(c.tids);
            return usage_error("--filter: %s", err);
        }
        c.o.filter = filter;
    }
#endif
    status = run(&c, path);
#ifdef FRP_HAVE_FILTER
    ftr_filter_free(filter);
#endif
    free(c.tids);
    fflush(stdout);
    tty_pager_wait();
    return status;
}
