/*
 * ftrace_report.c - ftrace-report: shows a trace file written by ftrace-run.
 *
 * Exit status: 0 shown (possibly with a note on damage), 1 bad input or I/O error,
 * 2 bad usage.
 */
#include "report.h"

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define PROG "ftrace-report"

enum { OPT_CHROME = 256, OPT_TID, OPT_PID };

static const struct option options[] = {
    {"chrome", no_argument, NULL, OPT_CHROME},
    {"tid", required_argument, NULL, OPT_TID},
    {"pid", required_argument, NULL, OPT_PID},
    {"help", no_argument, NULL, 'h'},
    {NULL, 0, NULL, 0},
};

static void usage(void)
{
    fputs("Usage: " PROG " [OPTIONS] [FILE]\n"
          "Shows the function calls that ftrace-run recorded in FILE (default: ftrace.ftr).\n"
          "\n"
          "By default, prints the calls as a function graph: one line per call, entry or\n"
          "return, of every thread in time order, with the time each call took.\n"
          "\n"
          "Options:\n"
          "  --chrome            write Chrome Trace Event JSON instead, for chrome://tracing\n"
          "                      or the Perfetto UI (ui.perfetto.dev)\n"
          "  --tid=TID[,TID...]  show only these threads\n"
          "  --pid=PID           show only this process\n"
          "  -h, --help          show this help and exit\n"
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
    int known = optopt == OPT_CHROME || optopt == 'h';
    if (c == ':') {
        const char *a = argv[optind - 1];
        return usage_error("option '%s' needs a value", a);
    }
    if (known) {
        char name[64];
        snprintf(name, sizeof name, "--%s", optopt == 'h' ? "help" : "chrome");
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

/* The report reads the file twice (tables, then events): a pipe is first copied to an unlinked
 * temporary file, read through /proc/self/fd. @return the fd (kept open), or -1 with errno. */
static int spool(const char *path, char *proc_path, size_t n)
{
    const char *dir = getenv("TMPDIR");
    char tmp[PATH_MAX];
    snprintf(tmp, sizeof tmp, "%s/ftrace-report-XXXXXX", dir && *dir ? dir : "/tmp");
    int in = open(path, O_RDONLY | O_CLOEXEC);
    if (in < 0) return -1;
    int out = mkstemp(tmp);
    if (out < 0) {
        int e = errno;
        close(in);
        errno = e;
        return -1;
    }
    unlink(tmp);
    static char buf[1 << 16];
    ssize_t got;
    while ((got = read(in, buf, sizeof buf)) != 0) {
        if (got < 0 && errno == EINTR) continue;
        if (got < 0 || write(out, buf, (size_t)got) != got) {
            int e = errno ? errno : EIO;
            close(in);
            close(out);
            errno = e;
            return -1;
        }
    }
    close(in);
    snprintf(proc_path, n, "/proc/self/fd/%d", out);
    return out;
}

int main(int argc, char **argv)
{
    int chrome = 0;
    long pid = -1;
    uint32_t *tids = NULL;
    size_t ntids = 0;
    int c;

    opterr = 0;
    while ((c = getopt_long(argc, argv, ":h", options, NULL)) != -1) {
        switch (c) {
        case OPT_CHROME:
            chrome = 1;
            break;
        case OPT_TID:
            if (parse_tids(optarg, &tids, &ntids) < 0) {
                free(tids);
                return usage_error("bad value for --tid: '%s' (expected TID[,TID...])", optarg);
            }
            break;
        case OPT_PID: {
            uint32_t v;
            if (parse_id(optarg, optarg + strlen(optarg), &v)) {
                free(tids);
                return usage_error("bad value for --pid: '%s'", optarg);
            }
            pid = v;
            break;
        }
        case 'h':
            usage();
            free(tids);
            return 0;
        default:
            free(tids);
            return bad_option(argv, c);
        }
    }
    if (argc - optind > 1) {
        free(tids);
        return usage_error("too many arguments: '%s'", argv[optind + 1]);
    }
    const char *path = optind < argc ? argv[optind] : "ftrace.ftr";

    struct frp_report *r;
    struct stat sb;
    char spooled[64];
    const char *open_path = path;
    int spool_fd = -1, rc = FTR_OK;
    if (stat(path, &sb) == 0 && !S_ISREG(sb.st_mode) && !S_ISDIR(sb.st_mode)) {
        if ((spool_fd = spool(path, spooled, sizeof spooled)) < 0) rc = FTR_E_IO;
        open_path = spooled;
    }
    if (rc == FTR_OK) rc = frp_report_open(open_path, &r);
    if (rc) {
        const char *why = rc == FTR_E_IO ? strerror(errno) : ftr_strerror(rc);
        const char *more =
            rc == FTR_E_CORRUPT || rc == FTR_E_TRUNCATED ? " (nothing readable)" : "";
        fprintf(stderr, PROG ": %s: %s%s\n", path, why, more);
        free(tids);
        if (spool_fd >= 0) close(spool_fd);
        return 1;
    }
    int status = 0;
    if (pid >= 0 || ntids) {
        if (ntids && !check_tids(r, path, pid, tids, ntids)) {
            status = 1;
        } else if (frp_report_select(r, pid, tids, ntids) == 0) {
            fprintf(stderr, PROG ": %s: no process %ld\n", path, pid);
            status = 1;
        }
    }
    free(tids);
    if (status) {
        frp_report_close(r);
        if (spool_fd >= 0) close(spool_fd);
        return status;
    }

    static char outbuf[1 << 16];
    setvbuf(stdout, outbuf, _IOFBF, sizeof outbuf);
    struct frp_stats st = {0};
    rc = chrome ? frp_render_chrome(r, stdout, &st) : frp_render_graph(r, stdout, &st);
    if (rc) {
        if (st.write_errno)
            fprintf(stderr, PROG ": write error: %s\n", strerror(st.write_errno));
        else
            fprintf(stderr, PROG ": %s: %s\n", path,
                    rc == FTR_E_IO ? strerror(errno) : ftr_strerror(rc));
        status = 1;
    }
    char note[512];
    if (frp_report_note(r, &st, note, sizeof note)) fprintf(stderr, PROG ": %s\n", note);
    frp_report_close(r);
    if (spool_fd >= 0) close(spool_fd);
    return status;
}
