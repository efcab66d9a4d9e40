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
 * ftr_site_wanted() for every site and rewrites what changed under the handshake); the graph
 * knobs act in the hooks (ftr_g.* and the per-site flags), so they apply at once.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>

#include "ftr_env.h"
#include "ftr_filter.h"
#include "ftr_patcher.h"
#include "tracer.h"

uint8_t *ftr_site_flags;

static pthread_mutex_t settings_lock = PTHREAD_MUTEX_INITIALIZER; /* ftrace-ctl requests */
static struct ftr_filter *filter, *graph_fns, *notrace_fns;
static char *filter_expr, *graph_expr, *notrace_expr;
static int enabled = 1;

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
    ftr_hot.graph_mode = graph_fns != NULL;
    ftr_hot.site_flags_used = graph_fns || notrace_fns;
    return 0;
}

int ftr_settings_enabled(void)
{
    return enabled;
}

unsigned ftr_site_wanted(const char *module, int is_main, const struct ftr_site *s)
{
    unsigned sf = 0;
    if (graph_fns && ftr_filter_match_ex(graph_fns, module, is_main, s->name)) sf |= FTR_SF_TRIGGER;
    if (notrace_fns && ftr_filter_match_ex(notrace_fns, module, is_main, s->name))
        sf |= FTR_SF_NOTRACE;
    if (ftr_site_flags && s->index < FTR_SITE_FLAGS_MAX) ftr_site_flags[s->index] = (uint8_t)sf;
    if (!enabled) return FTR_SITE_NOP;
    /* roots and hidden functions stay hooked whatever the filter says: they steer the rest */
    return sf || ftr_filter_match_ex(filter, module, is_main, s->name) ? FTR_SITE_CALL
                                                                       : FTR_SITE_NOP;
}

int ftr_set_recording(int on, char *err, size_t errlen)
{
    pthread_mutex_lock(&settings_lock);
    enabled = on;
    if (on) atomic_store(&ftr_hot.recording, 1);
    int rc = ftr_modules_patch(err, errlen);
    if (!on) /* calls in flight still record their exits (their entries were recorded) */
        atomic_store(&ftr_hot.recording, 0);
    pthread_mutex_unlock(&settings_lock);
    return rc;
}

int ftr_set_filter(const char *expr, char *err, size_t errlen)
{
    pthread_mutex_lock(&settings_lock);
    int rc = parse("filter", expr, &filter, &filter_expr, err, errlen);
    if (rc == 0) rc = ftr_modules_patch(err, errlen);
    pthread_mutex_unlock(&settings_lock);
    return rc;
}

int ftr_set_depth(unsigned depth, char *err, size_t errlen)
{
    (void)err;
    (void)errlen;
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
    __atomic_store_n(&ftr_hot.threshold_ticks, ticks, __ATOMIC_RELEASE);
    pthread_mutex_unlock(&settings_lock);
    return 0;
}

void ftr_status(struct ftr_buf *out)
{
    char line[4600];
    uint64_t hz = ftr_g.tsc_hz ? ftr_g.tsc_hz : 1;
    pthread_mutex_lock(&settings_lock);
    int n = snprintf(line, sizeof line,
                     "pid: %u\ntracing: %s\nfilter: %s\ngraph-function: %s\nnotrace: %s\n"
                     "max-depth: %u\nthreshold: %.3f us\nsites: %" PRIu64 "\ntraced: %" PRIu64
                     "\nskipped: %" PRIu64 "\nevents: %" PRIu64 "\nlost: %" PRIu64
                     "\nbytes written: %" PRIu64 "\noutput: %s\n",
                     ftr_g.pid, enabled ? "on" : "off", filter_expr ? filter_expr : "(all)",
                     graph_expr ? graph_expr : "(none)", notrace_expr ? notrace_expr : "(none)",
                     ftr_hot.max_depth, (double)ftr_hot.threshold_ticks * 1e6 / (double)hz,
                     ftr_g.sites, ftr_g.patched, ftr_g.skipped, ftr_writer_events(),
                     ftr_lost_events(), ftr_writer_bytes(), ftr_cfg.output);
    pthread_mutex_unlock(&settings_lock);
    ftr_buf_append(out, line, (size_t)(n < (int)sizeof line ? n : (int)sizeof line - 1));
}

/* For the "matches nothing" message: up to k site names nearest the filter's patterns. */
size_t ftr_settings_nearest(const char *const *names, size_t n, const char **out, size_t k)
{
    return filter ? ftr_filter_nearest(filter, names, n, out, k) : 0;
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
