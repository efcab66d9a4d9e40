/*
 * settings.c - what to trace, set from the environment at start and by ftrace-ctl later.
 *
 *  filter          which sites are calls (traced) and which are NOPs (cost nothing);
 *                  patcher/ftr_filter.h has the grammar
 *  graph functions --graph-function: only call trees under these are recorded
 *  notrace         --notrace: these functions and their subtrees are hidden
 *  max depth       --max-depth: calls deeper than this (counted in recorded frames) are not
 *  threshold       --threshold: calls shorter than this are taken back at their exit
 *  enabled         --disabled / ftrace-ctl on|off: off makes every site a NOP
 *
 * The filter and the enabled state act through the patcher (modules.c asks
 * ftr_site_wanted() for every site and rewrites what changed, live); the graph
 * knobs act in the hooks (ftr_g.* and the per-site flags), so they apply at once.
 *
 * C++ names: ftr_site_wanted() demangles a site's name once (patcher/filter.c's ftr_demangle,
 * malloc: patch time, never a hook) for the three filters; a term matches the mangled name or
 * a demangled form (ftr_filter.h). Selecting nothing is said, never silent:
 *   --graph-function / --notrace that select no function at start: one line each, with the
 *     nearest names (the filter's own line is modules.c's), after the first pass over the
 *     sites (once ftr_site_wanted() was asked for ftr_g.sites different sites);
 *   ftrace-ctl PID filter EXPR that selects no function (EXPR with including terms, none of
 *     them limited to a library that is not loaded: a later dlopen() may bring that): refused
 *     with "no function matches the filter ..." and the filter in force stays. A first pass
 *     with EXPR as a probe counts what it selects while the filter in force answers (so nothing
 *     is rewritten); only then is it put in force. The modules' lock is held across both, so
 *     no dlopen() rescan sees a filter being replaced.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "forkpage.h"
#include "ftr_env.h"
#include "ftr_filter.h"
#include "ftr_patcher.h"
#include "libcalls.h"
#include "region.h"
#include "tracer.h"
#include "values.h"

static pthread_mutex_t settings_lock FTR_FORK_PAGE =
    PTHREAD_MUTEX_INITIALIZER; /* ftrace-ctl requests */
static struct ftr_filter *filter, *graph_fns, *notrace_fns;
static char *filter_expr, *graph_expr, *notrace_expr;
static int enabled = 1;

/* What a pass over the sites saw, for the messages about filters that select nothing; only
 * touched by ftr_site_wanted() and its callers under the modules' lock. */
struct tally {
    const char **names; /* the sites' names (malloc'ed array), for the nearest ones */
    size_t n, cap;
    size_t hits[2];
    const char *module; /* the executable's path, as the sites' module */
    uint8_t *seen;      /* by site index: counted already (a pass may ask twice for a site) */
    size_t seen_bytes;
    size_t sites; /* different sites counted */
};
static const struct ftr_filter *probe; /* ftr_set_filter(): the candidate, counted in hits[0] */
static struct tally probe_tally;
static int first_pass_done;      /* start-up: the first pass over the sites is over */
static struct tally first_tally; /* hits: graph functions, notrace functions */

static void tally_add(struct tally *t, const char *name)
{
    if (t->n == t->cap) {
        size_t cap = t->cap ? 2 * t->cap : 1024;
        const char **a = realloc(t->names, cap * sizeof *a);
        if (!a) return;
        t->names = a, t->cap = cap;
    }
    t->names[t->n++] = name;
}

static void tally_free(struct tally *t)
{
    free(t->names);
    free(t->seen);
    memset(t, 0, sizeof *t);
}

/* @return 1 the first time site index is met by this tally (also when out of memory). */
static int tally_first(struct tally *t, uint32_t index)
{
    size_t byte = index / 8;
    if (byte >= t->seen_bytes) {
        size_t n = t->seen_bytes ? 2 * t->seen_bytes : 4096;
        while (n <= byte)
            n *= 2;
        uint8_t *b = realloc(t->seen, n);
        if (!b) { /* out of memory: counted, perhaps twice */
            t->sites++;
            return 1;
        }
        memset(b + t->seen_bytes, 0, n - t->seen_bytes);
        t->seen = b, t->seen_bytes = n;
    }
    uint8_t bit = (uint8_t)(1u << (index % 8));
    if (t->seen[byte] & bit) return 0;
    t->seen[byte] |= bit;
    t->sites++;
    return 1;
}

/* The display name of a site's name: a C++ name demangled (without parameters), into buf. */
static const char *display_name(const char *name, char *buf, size_t len)
{
    char *d = ftr_demangle(name, FTR_DEMANGLE_NAME);
    if (!d) return name;
    snprintf(buf, len, "%s", d);
    free(d);
    return buf;
}

/* "; nearest: a, b" for filter f that selected none of names[0..n), or "". */
static void nearest_text(const struct ftr_filter *f, const char *const *names, size_t n, char *out,
                         size_t len)
{
    const char *near[5];
    char buf[256];
    size_t m = names && n ? ftr_filter_nearest(f, names, n, near, 5) : 0;
    out[0] = 0;
    for (size_t i = 0; i < m; i++)
        snprintf(out + strlen(out), len - strlen(out), "%s%s",
                 i ? ", " : "; nearest: ", display_name(near[i], buf, sizeof buf));
}

static int add_loaded(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    if (info->dlpi_name && info->dlpi_name[0]) tally_add(arg, info->dlpi_name);
    return 0;
}

/* Whether filter f, which selected none of the sites the probe saw, names a library that is
 * not loaded (yet): the loaded objects, and the executable (a module of the probe's sites). */
static int waits_for_module(const struct ftr_filter *f, const char *exe)
{
    struct tally loaded = {0};
    if (exe) tally_add(&loaded, exe);
    dl_iterate_phdr(add_loaded, &loaded);
    int waits = ftr_filter_waits_for_module(f, loaded.names, loaded.n);
    tally_free(&loaded);
    return waits;
}

/* The end of the first pass: say which of --graph-function / --notrace selected nothing. */
static void say_first_pass(void)
{
    static const char *const what[2] = {"graph-function", "notrace"};
    static const char *const then[2] = {"nothing is recorded", "nothing is hidden"};
    const struct ftr_filter *fs[2] = {graph_fns, notrace_fns};
    const char *exprs[2] = {graph_expr, notrace_expr};
    for (int i = 0; i < 2; i++) {
        if (!fs[i] || !exprs[i] || first_tally.hits[i] || !ftr_filter_includes(fs[i])) continue;
        char near[512];
        nearest_text(fs[i], first_tally.names, first_tally.n, near, sizeof near);
        ftr_msg("%s '%s' matches none of the %zu functions%s; %s", what[i], exprs[i],
                first_tally.sites, near, then[i]);
    }
    tally_free(&first_tally);
}

static int parse(const char *what, const char *expr, struct ftr_filter **out, char **copy,
                 char *err, size_t errlen)
{
    char e[400];
    struct ftr_filter *f = ftr_filter_parse(expr, e, sizeof e);
    if (!f) {
        snprintf(err, errlen, "%s: %s", what, e);
        return -1;
    }
    ftr_filter_free(*out);
    free(*copy);
    *out = f;
    *copy = expr && *expr ? strdup(expr) : NULL;
    return 0;
}

/* A quick TSC rate for converting the threshold before the writer's calibration is done. */
static uint64_t tsc_hz_now(void)
{
    if (ftr_g.tsc_hz) return ftr_g.tsc_hz;
    struct timespec a, b, d = {0, 1000000};
    clock_gettime(CLOCK_MONOTONIC_RAW, &a);
    uint64_t t0 = ftr_rdtsc();
    nanosleep(&d, NULL);
    clock_gettime(CLOCK_MONOTONIC_RAW, &b);
    uint64_t t1 = ftr_rdtsc();
    double ns = (double)(b.tv_sec - a.tv_sec) * 1e9 + (double)(b.tv_nsec - a.tv_nsec);
    return (uint64_t)((double)(t1 - t0) * 1e9 / ns);
}

int ftr_settings_init(char *err, size_t errlen)
{
    ftr_site_flags = mmap(NULL, FTR_SITE_FLAGS_MAX, PROT_READ | PROT_WRITE,
                          MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (ftr_site_flags == MAP_FAILED) {
        ftr_site_flags = NULL;
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    if (parse(ftr_env_name(FTR_ENV_FILTER), getenv(ftr_env_name(FTR_ENV_FILTER)), &filter,
              &filter_expr, err, errlen) < 0 ||
        parse(ftr_env_name(FTR_ENV_GRAPH_FUNCTION), getenv(ftr_env_name(FTR_ENV_GRAPH_FUNCTION)),
              &graph_fns, &graph_expr, err, errlen) < 0 ||
        parse(ftr_env_name(FTR_ENV_NOTRACE), getenv(ftr_env_name(FTR_ENV_NOTRACE)), &notrace_fns,
              &notrace_expr, err, errlen) < 0)
        return -1;
    /* graph_fns/notrace_fns select nothing when empty: an empty expression selects all */
    if (!graph_expr) {
        ftr_filter_free(graph_fns);
        graph_fns = NULL;
    }
    if (!notrace_expr) {
        ftr_filter_free(notrace_fns);
        notrace_fns = NULL;
    }
    const char *v = getenv(ftr_env_name(FTR_ENV_MAX_DEPTH));
    if (v && *v) {
        char *end;
        unsigned long d = strtoul(v, &end, 10);
        if (*end || d > 1000000) {
            snprintf(err, errlen, "%s=%s: expected a depth (0 for no limit)",
                     ftr_env_name(FTR_ENV_MAX_DEPTH), v);
            return -1;
        }
        ftr_hot.max_depth = (unsigned)d;
    }
    v = getenv(ftr_env_name(FTR_ENV_THRESHOLD));
    if (v && *v) {
        uint64_t ns;
        if (ftr_parse_duration(v, &ns) < 0) {
            snprintf(err, errlen, "%s=%s: expected a duration like 10us or 1ms",
                     ftr_env_name(FTR_ENV_THRESHOLD), v);
            return -1;
        }
        ftr_hot.threshold_ticks = ns ? (uint64_t)((double)ns * (double)tsc_hz_now() / 1e9) : 0;
        ftr_g.holdback_ticks = ftr_hot.threshold_ticks; /* before the writer exists */
    }
    v = getenv(ftr_env_name(FTR_ENV_DISABLED));
    enabled = !(v && *v && strcmp(v, "0") != 0);
    atomic_store(&ftr_hot.recording, enabled);
    int vals = ftr_values_init(err, errlen);
    if (vals < 0) return -1;
    ftr_hot.graph_mode = graph_fns != NULL;
    ftr_hot.site_flags_used = graph_fns || notrace_fns || vals;
    return 0;
}

int ftr_settings_enabled(void)
{
    return enabled;
}

unsigned ftr_site_wanted(const char *module, int is_main, const struct ftr_site *s)
{
    const char *name = s->name;
    char *dem = NULL; /* demangled once for every filter */
    if (name && name[0] == '_' && name[1] == 'Z' &&
        (ftr_filter_terms(filter) || graph_fns || notrace_fns || probe || ftr_site_prog))
        dem = ftr_demangle(name, FTR_DEMANGLE_FULL);
    unsigned sf = 0;
    if (graph_fns && ftr_filter_match_dem(graph_fns, module, is_main, name, dem))
        sf |= FTR_SF_TRIGGER;
    if (notrace_fns && ftr_filter_match_dem(notrace_fns, module, is_main, name, dem))
        sf |= FTR_SF_NOTRACE;
    /* values recorded are no reason to hook a site the filter leaves out */
    unsigned vals = ftr_values_site(module, is_main, s, dem);
    if (ftr_site_flags && s->index < FTR_SITE_FLAGS_MAX)
        ftr_site_flags[s->index] = (uint8_t)(sf | vals);
    if (probe && tally_first(&probe_tally, s->index)) {
        probe_tally.hits[0] += ftr_filter_match_dem(probe, module, is_main, name, dem) != 0;
        tally_add(&probe_tally, name);
        if (is_main) probe_tally.module = module;
    }
    if (!first_pass_done && !(graph_fns || notrace_fns)) {
        first_pass_done = 1;
    } else if (!first_pass_done && tally_first(&first_tally, s->index)) {
        first_tally.hits[0] += (sf & FTR_SF_TRIGGER) != 0;
        first_tally.hits[1] += (sf & FTR_SF_NOTRACE) != 0;
        tally_add(&first_tally, name);
        if (first_tally.sites >= ftr_g.sites) { /* every site was asked for once */
            first_pass_done = 1;
            say_first_pass();
        }
    }
    unsigned want = FTR_SITE_NOP;
    /* roots and hidden functions stay hooked whatever the filter says: they steer the rest */
    if (enabled && (sf || ftr_filter_match_dem(filter, module, is_main, name, dem)))
        want = FTR_SITE_CALL;
    free(dem);
    return want;
}

/* Every change ftrace-ctl makes leaves a MARK in the trace, timed where it takes effect: before
 * the first event it lets in, before the sites it turns off stop recording. */
int ftr_set_recording(int on, char *err, size_t errlen)
{
    pthread_mutex_lock(&settings_lock);
    ftr_writer_mark(on ? FTR_MARK_ON : FTR_MARK_OFF, ftr_rdtsc(), 0, NULL);
    enabled = on;
    if (on) atomic_store(&ftr_hot.recording, 1);
    int rc = ftr_modules_patch(err, errlen);
    if (!on) /* calls in flight still record their exits (their entries were recorded) */
        atomic_store(&ftr_hot.recording, 0);
    pthread_mutex_unlock(&settings_lock);
    return rc;
}

int ftr_set_libcall(int on, char *err, size_t errlen)
{
    pthread_mutex_lock(&settings_lock);
    /* The mark says where the switch lies in time: "on" before the first slot is hooked, "off"
     * after the last is put back, so that no library call recorded lies outside an on-stretch
     * (ftrace-ctl libcall in libcall_tests.py: a call of run() begun after the "off" mark met
     * a slot still hooked, 1 soak run in 2 under load). */
    if (on) ftr_writer_mark(FTR_MARK_LIBCALL, ftr_rdtsc(), 1, NULL);
    ftr_libcalls_enable(on);
    int rc = ftr_modules_patch(err, errlen);
    if (!on) ftr_writer_mark(FTR_MARK_LIBCALL, ftr_rdtsc(), 0, NULL);
    pthread_mutex_unlock(&settings_lock);
    return rc;
}

int ftr_set_filter(const char *expr, char *err, size_t errlen)
{
    char e[400];
    pthread_mutex_lock(&settings_lock);
    struct ftr_filter *nf = ftr_filter_parse(expr, e, sizeof e);
    if (!nf) {
        snprintf(err, errlen, "filter: %s", e);
        pthread_mutex_unlock(&settings_lock);
        return -1;
    }
    ftr_modules_lock(1);
    int rc = 0;
    if (ftr_filter_includes(nf)) { /* "everything but ..." always selects what it leaves */
        probe = nf;
        rc = ftr_modules_patch(err, errlen); /* the filter in force answers: nothing changes */
        probe = NULL;
        /* a filter for a library that a later dlopen() brings selects nothing now: accepted */
        if (rc == 0 && probe_tally.hits[0] == 0 && !waits_for_module(nf, probe_tally.module)) {
            char near[512];
            nearest_text(nf, probe_tally.names, probe_tally.n, near, sizeof near);
            char now[300];
            if (filter_expr)
                snprintf(now, sizeof now, "the filter in force stays '%.256s'", filter_expr);
            else
                snprintf(now, sizeof now, "no filter is in force: every function stays traced");
            snprintf(err, errlen,
                     "no function matches the filter '%s' (none of the %zu functions%s); %s", expr,
                     probe_tally.sites, near, now);
            rc = -1;
        }
        tally_free(&probe_tally);
    }
    if (rc == 0) {
        ftr_filter_free(filter);
        free(filter_expr);
        filter = nf;
        filter_expr = expr && *expr ? strdup(expr) : NULL;
        nf = NULL;
        ftr_writer_mark(FTR_MARK_FILTER, ftr_rdtsc(), 0, filter_expr ? filter_expr : "");
        rc = ftr_modules_patch(err, errlen);
    }
    ftr_modules_lock(0);
    ftr_filter_free(nf);
    pthread_mutex_unlock(&settings_lock);
    return rc;
}

int ftr_set_depth(unsigned depth, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
    ftr_writer_mark(FTR_MARK_DEPTH, ftr_rdtsc(), depth, NULL);
    ftr_hot.max_depth = depth;
    return 0;
}

/* A threshold that grows must first hold the writer back: it must never take a record that a
 * hook may still take back. So the hold-back grows first, the writer completes two passes with
 * it, and only entries made after that may be taken back. */
int ftr_set_threshold(uint64_t ns, char *err, size_t errlen)
{
    uint64_t ticks = ns ? (uint64_t)((double)ns * (double)tsc_hz_now() / 1e9) : 0;
    pthread_mutex_lock(&settings_lock);
    if (ticks > ftr_g.holdback_ticks) {
        __atomic_store_n(&ftr_g.holdback_ticks, ticks, __ATOMIC_RELEASE);
        struct ftr_region_hdr *h = ftr_region_header(); /* the reader's copy */
        if (h) atomic_store(&h->holdback_ticks, ticks);
        uint64_t start = ftr_writer_passes();
        for (int i = 0; ftr_writer_passes() < start + 2; i++) {
            if (i == 400) { /* 4 s: the writer is stuck; leave the threshold as it was */
                pthread_mutex_unlock(&settings_lock);
                snprintf(err, errlen, "the writer thread does not answer");
                return -1;
            }
            struct timespec d = {0, 10 * 1000 * 1000};
            nanosleep(&d, NULL);
        }
        ftr_hot.threshold_from = ftr_rdtsc();
    }
    ftr_writer_mark(FTR_MARK_THRESHOLD, ftr_rdtsc(), ns, NULL);
    __atomic_store_n(&ftr_hot.threshold_ticks, ticks, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&settings_lock);
    return 0;
}

void ftr_status(struct ftr_buf *out)
{
    char line[4600];
    uint64_t hz = ftr_g.tsc_hz ? ftr_g.tsc_hz : 1;
    unsigned waits, waited;
    ftr_modules_blocked_waits(&waits, &waited);
    pthread_mutex_lock(&settings_lock);
    int n = snprintf(line, sizeof line,
                     "pid: %u\ntracing: %s\nfilter: %s\ngraph-function: %s\nnotrace: %s\n"
                     "max-depth: %u\nthreshold: %.3f us\nlibcalls: %s (%" PRIu64
                     " found)\nsites: %" PRIu64 "\ntraced: %" PRIu64 "\nskipped: %" PRIu64
                     "\nevents: %" PRIu64 "\nlost: %" PRIu64 "\nbytes written: %" PRIu64
                     "\noutput: %s\nwaited for SIGTRAP blocked: %u rewrites, %u ms\n",
                     ftr_g.pid, enabled ? "on" : "off", filter_expr ? filter_expr : "(all)",
                     graph_expr ? graph_expr : "(none)", notrace_expr ? notrace_expr : "(none)",
                     ftr_hot.max_depth, (double)ftr_hot.threshold_ticks * 1e6 / (double)hz,
                     ftr_libcalls_enabled() ? "on" : "off", ftr_g.libcalls, ftr_g.sites,
                     ftr_g.patched, ftr_g.skipped, ftr_writer_events(), ftr_lost_events(),
                     ftr_writer_bytes(), ftr_cfg.output, waits, waited);
    pthread_mutex_unlock(&settings_lock);
    ftr_buf_append(out, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1));
}

/* For the "matches nothing" message: up to k site names nearest the filter's patterns, C++
 * names demangled (the first 8: kept until the next call; modules.c asks under its lock). */
size_t ftr_settings_nearest(const char *const *names, size_t n, const char **out, size_t k)
{
    static char shown[8][256];
    size_t m = filter ? ftr_filter_nearest(filter, names, n, out, k) : 0;
    for (size_t i = 0; i < m && i < 8; i++)
        out[i] = display_name(out[i], shown[i], sizeof shown[i]);
    return m;
}

const char *ftr_settings_filter_expr(void)
{
    return filter_expr;
}

void ftr_settings_lock(int how)
{
    if (how > 0)
        pthread_mutex_lock(&settings_lock);
    else if (how == 0)
        pthread_mutex_unlock(&settings_lock);
    else
        pthread_mutex_init(&settings_lock, NULL);
}
