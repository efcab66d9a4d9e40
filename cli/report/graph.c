/*
 * graph.c - the function graph view: the kernel's function_graph layout, a TID column in
 * place of the CPU one.
 *
 *   4242)               |  main() {
 *   4242)     0.318 us  |    leaf();
 *   4242) +  12.206 us  |  }           <- followed by a C comment naming the function
 *
 * Each thread keeps its own call stack; lines of different threads interleave in time order.
 * An entry immediately followed by its own exit in its thread is printed as one leaf line.
 * The indentation is two spaces a level up to INDENT_LEVELS levels; a deeper line keeps that
 * indentation and says its depth ("[depth 65] f() {"), so that no line grows with the depth.
 *
 * Options: a wall-clock time column (--abstime), leaves as "f() {" + "}" (--no-leaf-compact),
 * colours on the duration column by marker, the source line of each function (--srcline).
 */
#define _GNU_SOURCE
#include "graph.h"

#include "names.h"
#include "util.h"
#include "values.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define OUT_BUF (1u << 20)
#define INDENT_LEVELS 64                   /* lines deeper say "[depth N] " after as many */
#define INDENT_MAX (2 + 2 * INDENT_LEVELS) /* the widest indentation */
#define DEPTH_MARK_MAX 20                  /* "[depth 4294967296] " */
#define NO_DURATION "               |"     /* 15 spaces where " M %7.3f us  " would be */

struct gthread {
    struct frp_stack st;
    int skip_exit;         /* the thread's next item is the exit of a leaf already printed */
    uint32_t inherit_left; /* entries still to come that re-enter frames a fork inherited */
    uint32_t resume_left;  /* ... that re-enter frames of a resumed coroutine */
    uint32_t suspend_left; /* unwinds still to come that suspend a coroutine's frames */
    uint8_t plen;
    char prefix[16]; /* "%6u)" */
};

struct frp_graph {
    struct frp_out out;
    struct gthread *ts;
    uint32_t nts;
    struct frp_stats stats;
    int sections;
    struct frp_report *r; /* for source lines */
    int abstime, no_leaf, color, srcline;
    /* abstime: the last second formatted, per process */
    const struct frp_process *tproc;
    int64_t tsec;
    char tbuf[16]; /* "HH:MM:SS." */
};

#define TIME_COL 20 /* "HH:MM:SS.nnnnnnnnn |" */

struct frp_graph *frp_graph_new(FILE *out)
{
    struct frp_graph *g = calloc(1, sizeof *g);
    if (!g) return NULL;
    if (frp_out_init(&g->out, out, OUT_BUF)) {
        free(g);
        return NULL;
    }
    return g;
}

void frp_graph_free(struct frp_graph *g)
{
    if (!g) return;
    for (uint32_t i = 0; i < g->nts; i++)
        free(g->ts[i].st.f);
    free(g->ts);
    frp_out_free(&g->out);
    free(g);
}

int frp_graph_finish(struct frp_graph *g)
{
    return frp_out_finish(&g->out);
}

void frp_graph_configure(struct frp_graph *g, struct frp_report *r, const struct frp_opts *o)
{
    g->r = r;
    if (!o) return;
    g->abstime = o->abstime;
    g->no_leaf = o->no_leaf_compact;
    g->color = o->color;
    g->srcline = o->srcline && r;
}

const struct frp_stats *frp_graph_stats(const struct frp_graph *g)
{
    return &g->stats;
}

void frp_graph_header(struct frp_graph *g, const struct frp_process *p)
{
    char line[160];
    struct frp_out *o = &g->out;
    if (g->sections++) frp_out_lit(o, "\n");
    frp_out_lit(o, "# ftrace-run: ");
    frp_out_write(o, p->cmdline, strlen(p->cmdline));
    int n = snprintf(line, sizeof line, "  pid %u  %u thread%s", p->pid, p->nthreads,
                     p->nthreads == 1 ? "" : "s");
    frp_out_write(o, line, (size_t)n);
    if (p->has_end)
        n = snprintf(line, sizeof line, "  %llu call%s", (unsigned long long)p->end.calls,
                     p->end.calls == 1 ? "" : "s");
    else
        n = snprintf(line, sizeof line, "  ? calls (no end record)");
    frp_out_write(o, line, (size_t)n);
    /* how it ended, when not a plain exit(0): the calls still open at the end are why */
    n = 0;
    if (p->has_end && p->end.how == FTR_END_SIGNAL) {
        char sig[32];
        n = snprintf(line, sizeof line, "  killed by %s",
                     frp_signal_name(p->end.code, sig, sizeof sig));
    } else if (p->has_end && p->end.how == FTR_END_EXIT && p->end.code != 0) {
        n = snprintf(line, sizeof line, "  exit status %d", p->end.code);
    } else if (p->has_end && p->end.how == FTR_END_EXEC) {
        n = snprintf(line, sizeof line, "  replaced by exec");
    } else if (p->has_end && p->end.how == FTR_END_VANISHED) {
        n = snprintf(line, sizeof line, "  %s", ftr_end_how_name(p->end.how));
    }
    if (n > 0) frp_out_write(o, line, (size_t)n);
    if (p->clock_guessed) frp_out_lit(o, "  (clock rate unknown: durations are in ticks)");
    if (g->abstime) {
        frp_out_lit(o, "\n#        TIME       |   TID      DURATION          FUNCTION CALLS\n"
                       "#         |         |   |        |   |             |   |   |   |\n");
        return;
    }
    frp_out_lit(o, "\n#  TID      DURATION          FUNCTION CALLS\n"
                   "#  |        |   |             |   |   |   |\n");
}

static struct gthread *gstate(struct frp_graph *g, const struct frp_thread *t)
{
    if (__builtin_expect(t->idx >= g->nts, 0)) {
        uint32_t n = g->nts ? g->nts : 16;
        while (n <= t->idx)
            n *= 2;
        struct gthread *ts = realloc(g->ts, (size_t)n * sizeof *ts);
        if (!ts) return NULL;
        memset(ts + g->nts, 0, (size_t)(n - g->nts) * sizeof *ts);
        g->ts = ts;
        g->nts = n;
    }
    struct gthread *gt = &g->ts[t->idx];
    if (__builtin_expect(!gt->plen, 0)) {
        char tmp[12];
        size_t len = (size_t)(frp_fmt_u64(tmp, t->tid) - tmp);
        size_t pad = len < 6 ? 6 - len : 0;
        memset(gt->prefix, ' ', pad);
        memcpy(gt->prefix + pad, tmp, len);
        gt->prefix[pad + len] = ')';
        gt->plen = (uint8_t)(pad + len + 1);
    }
    return gt;
}

static const char spaces[256] = {[0 ... 255] = ' '};
_Static_assert(INDENT_MAX <= sizeof spaces, "the indentation is one copy of spaces");

/* The wall-clock time of tsc in process p: "HH:MM:SS.nnnnnnnnn |" (local time); seconds since
 * the first event when the process's start time is unknown. */
static void time_col(struct frp_graph *g, const struct frp_process *p, uint64_t tsc)
{
    char *b = frp_out_room(&g->out, TIME_COL + 8);
    uint64_t start = frp_proc_start(p);
    /* A corrupt file may give any tick rate and any time: both are kept within a quarter of
     * the 64-bit range (73 years of nanoseconds), so that no sum or negation below overflows. */
    const uint64_t lim = (uint64_t)INT64_MAX / 4;
    uint64_t dn = frp_ticks_to_ns(tsc >= start ? tsc - start : start - tsc, p->ns_per_tick);
    int64_t d = (int64_t)(dn < lim ? dn : lim);
    if (tsc < start) d = -d;
    uint64_t real = p->has_info ? p->start_realtime_ns : 0;
    int64_t ns = (int64_t)(real < lim ? real : lim) + d;
    int64_t sec = ns >= 0 ? ns / 1000000000 : (ns - 999999999) / 1000000000;
    int64_t frac = ns - sec * 1000000000;
    if (g->tproc != p || g->tsec != sec) {
        g->tproc = p;
        g->tsec = sec;
        if (p->has_info && p->start_realtime_ns) {
            time_t t = (time_t)sec;
            struct tm tm;
            if (localtime_r(&t, &tm))
                snprintf(g->tbuf, sizeof g->tbuf, "%02d:%02d:%02d.", tm.tm_hour, tm.tm_min,
                         tm.tm_sec);
            else
                snprintf(g->tbuf, sizeof g->tbuf, "??:??:??.");
        } else {
            snprintf(g->tbuf, sizeof g->tbuf, "%8lld.", (long long)(sec % 100000000));
        }
    }
    memcpy(b, g->tbuf, 9);
    for (int i = 17; i >= 9; i--) {
        b[i] = (char)('0' + frac % 10);
        frac /= 10;
    }
    memcpy(b + 18, " |", 2);
    g->out.len += TIME_COL;
}

static const char *const colors[] = {
    ['+'] = "\033[32m",   ['!'] = "\033[33m",   ['#'] = "\033[31m",
    ['*'] = "\033[1;31m", ['@'] = "\033[1;35m", ['$'] = "\033[1;37;41m"};

/* The duration column, coloured by its marker. */
static void color_duration(struct frp_out *o, uint64_t ns)
{
    char tmp[FRP_DURATION_MAX];
    size_t n = frp_fmt_duration(tmp, ns);
    unsigned char m = (unsigned char)tmp[1];
    const char *c = m < sizeof colors / sizeof *colors ? colors[m] : NULL;
    if (!c) {
        frp_out_write(o, tmp, n);
        return;
    }
    frp_out_write(o, tmp, 1);
    frp_out_str(o, c);
    frp_out_write(o, tmp + 1, n - 4); /* up to "us" */
    frp_out_lit(o, "\033[0m");
    frp_out_write(o, tmp + n - 3, 3);
}

/* The indentation of depth at p, which has room for INDENT_MAX + DEPTH_MARK_MAX bytes: two
 * spaces a level; beyond INDENT_LEVELS levels, as many and the depth counted from 1 (as
 * --max-depth counts). @return its end */
static inline char *indent(char *p, uint32_t depth)
{
    /* the widest, always: a copy of fixed size is a few vector stores (one of variable size
     * became 'rep movsq', which costs 10% of the graph's time) */
    memcpy(p, spaces, INDENT_MAX);
    if (__builtin_expect(depth < INDENT_LEVELS, 1)) return p + 2 + 2 * (size_t)depth;
    memcpy(p + INDENT_MAX, "[depth ", 7);
    p = frp_fmt_u64(p + INDENT_MAX + 7, (uint64_t)depth + 1);
    memcpy(p, "] ", 2);
    return p + 2;
}

/* Starts a line: "  TID)", the duration column (blanks when !has_ns) and the indentation
 * of depth. */
static void line_start_slow(struct frp_graph *g, const struct gthread *gt, int has_ns, uint64_t ns,
                            uint32_t depth, const struct frp_item *it)
{
    struct frp_out *o = &g->out;
    if (g->abstime) time_col(g, it->thread->proc, it->ev.tsc);
    frp_out_write(o, gt->prefix, gt->plen);
    if (!has_ns)
        frp_out_lit(o, NO_DURATION);
    else if (g->color)
        color_duration(o, ns);
    else {
        char *p = frp_out_room(o, FRP_DURATION_MAX);
        o->len += frp_fmt_duration(p, ns);
    }
    char *p = frp_out_room(o, INDENT_MAX + DEPTH_MARK_MAX);
    o->len = (size_t)(indent(p, depth) - o->buf);
}

static inline void line_start(struct frp_graph *g, const struct gthread *gt, int has_ns,
                              uint64_t ns, uint32_t depth, const struct frp_item *it)
{
    struct frp_out *o = &g->out;
    if (__builtin_expect(g->abstime | g->color, 0)) {
        line_start_slow(g, gt, has_ns, ns, depth, it);
        return;
    }
    char *p = frp_out_room(o, sizeof gt->prefix + FRP_DURATION_MAX + INDENT_MAX + DEPTH_MARK_MAX);
    memcpy(p, gt->prefix, sizeof gt->prefix);
    p += gt->plen;
    if (!has_ns) {
        memcpy(p, NO_DURATION, sizeof NO_DURATION - 1);
        p += sizeof NO_DURATION - 1;
    } else {
        p += frp_fmt_duration(p, ns);
    }
    o->len = (size_t)(indent(p, depth) - o->buf);
}

static void special(struct frp_graph *g, struct gthread *gt, const struct frp_item *it)
{
    struct frp_out *o = &g->out;
    const struct ftr_event *ev = &it->ev;
    char tmp[96];
    int n;
    const struct frp_process *p = it->thread->proc;
    if (ev->site == FRP_SP_MARK && ev->arg < p->nmarks) { /* ftrace-ctl; the filter may be long */
        line_start(g, gt, 0, 0, gt->st.depth, it);
        char text[4200];
        size_t len = frp_mark_text(&p->marks[ev->arg], text, sizeof text);
        frp_out_lit(o, "/* ");
        frp_out_write(o, text, len);
        frp_out_lit(o, " */\n");
        return;
    }
    switch (ev->site) {
    case FTR_SP_INHERITED: /* said on the entries' lines */
        gt->inherit_left = (uint32_t)ev->arg;
        return;
    case FTR_SP_RESUMED:
        gt->resume_left = (uint32_t)ev->arg;
        return;
    case FTR_SP_SUSPENDED:
        gt->suspend_left = (uint32_t)ev->arg;
        return;
    case FTR_SP_LOST:
        g->stats.lost += ev->arg;
        n = snprintf(tmp, sizeof tmp, "/* lost %llu event%s */\n", (unsigned long long)ev->arg,
                     ev->arg == 1 ? "" : "s");
        break;
    case FTR_SP_OVERRUN:
        n = snprintf(tmp, sizeof tmp, "/* %llu call%s not traced: call stack too deep */\n",
                     (unsigned long long)ev->arg, ev->arg == 1 ? "" : "s");
        break;
    case FTR_SP_TRACE_ON:
        n = snprintf(tmp, sizeof tmp, "/* tracing on */\n");
        break;
    case FTR_SP_TRACE_OFF:
        n = snprintf(tmp, sizeof tmp, "/* tracing off */\n");
        break;
    case FTR_SP_ASIDE:
        n = snprintf(tmp, sizeof tmp, "/* traced no further: the tracer stepped aside */\n");
        break;
    case FRP_SP_DEEP:
        n = snprintf(tmp, sizeof tmp, "/* %llu call%s nested deeper than %u not shown */\n",
                     (unsigned long long)ev->arg, ev->arg == 1 ? "" : "s",
                     g->r && g->r->depth_max ? g->r->depth_max : FTR_DEPTH_MAX);
        break;
    default:
        n = snprintf(tmp, sizeof tmp, "/* special event %u (%llu) */\n", (unsigned)ev->site,
                     (unsigned long long)ev->arg);
        break;
    }
    line_start(g, gt, 0, 0, gt->st.depth, it);
    frp_out_write(o, tmp, (size_t)n);
}

/* The source line of an entry, as a C comment at the end of its line (--srcline). */
static void srcline(struct frp_graph *g, const struct frp_item *it)
{
    const char *src = frp_srcline(g->r, it->thread->proc, it->ev.site);
    if (!src) return;
    frp_out_lit(&g->out, " /* ");
    frp_out_str(&g->out, src);
    frp_out_lit(&g->out, " */");
}

/* a value list of site's function as text, named from DWARF when it was typed so */
static size_t values(struct frp_graph *g, const struct frp_item *it, uint32_t site,
                     const uint8_t *v, uint32_t len, char *t, size_t cap)
{
    const struct frp_params *ps =
        frp_values_typed(v, len) ? frp_params(g->r, it->thread->proc, site) : NULL;
    return frp_values_named(v, len, ps, t, cap);
}

/* "(1, "abc")" after a function's name; "()" without values */
static void call_values(struct frp_graph *g, const struct frp_item *it)
{
    struct frp_out *o = &g->out;
    frp_out_lit(o, "(");
    if (__builtin_expect(it->vals != NULL, 0)) {
        char t[FRP_VALUES_TEXT_MAX];
        frp_out_write(o, t, values(g, it, it->ev.site, it->vals, it->vals_len, t, sizeof t));
    }
    frp_out_lit(o, ")");
}

/* " = 3" */
static void ret_value(struct frp_graph *g, const struct frp_item *it, uint32_t site,
                      const uint8_t *v, uint32_t len)
{
    char t[FRP_VALUES_TEXT_MAX];
    frp_out_lit(&g->out, " = ");
    frp_out_write(&g->out, t, values(g, it, site, v, len, t, sizeof t));
}

void frp_graph_event(struct frp_graph *g, const struct frp_item *it)
{
    struct frp_out *o = &g->out;
    const struct ftr_event *ev = &it->ev;
    struct gthread *gt = gstate(g, it->thread);
    if (__builtin_expect(!gt, 0)) return;
    double npt = it->thread->proc->ns_per_tick;
    g->stats.events++;

    switch (ev->kind) {
    case FTR_EV_ENTRY: {
        const struct ftr_event *nx = it->next;
        int inherited = gt->inherit_left > 0;
        gt->inherit_left -= inherited;
        int resumed = gt->resume_left > 0;
        gt->resume_left -= resumed;
        const char *note = inherited ? " /* inherited from the parent */"
                           : resumed ? " /* resumed */"
                                     : NULL;
        if (nx && nx->kind == FTR_EV_EXIT && nx->site == ev->site && !g->no_leaf) {
            line_start(g, gt, 1, frp_ticks_to_ns(nx->tsc >= ev->tsc ? nx->tsc - ev->tsc : 0, npt),
                       gt->st.depth, it);
            frp_out_write(o, it->name.s, it->name.len);
            call_values(g, it);
            if (it->next_vals) ret_value(g, it, ev->site, it->next_vals, it->next_vals_len);
            frp_out_lit(o, ";");
            if (note) frp_out_str(o, note);
            if (__builtin_expect(g->srcline, 0)) srcline(g, it);
            frp_out_lit(o, "\n");
            gt->skip_exit = 1;
            break;
        }
        line_start(g, gt, 0, 0, gt->st.depth, it);
        frp_out_write(o, it->name.s, it->name.len);
        call_values(g, it);
        frp_out_lit(o, " {");
        if (note) frp_out_str(o, note);
        if (__builtin_expect(g->srcline, 0)) srcline(g, it);
        frp_out_lit(o, "\n");
        struct frp_frame *f = frp_stack_push(&gt->st);
        if (f) *f = (struct frp_frame){it->name, ev->site, ev->tsc};
        break;
    }
    case FTR_EV_EXIT:
        if (gt->skip_exit) {
            gt->skip_exit = 0;
            break;
        }
        /* fall through */
    case FTR_EV_UNWIND: {
        if (!gt->st.depth) {
            g->stats.unmatched++;
            break;
        }
        const struct frp_frame *f = &gt->st.f[--gt->st.depth];
        if (f->site != ev->site) g->stats.mismatched++;
        line_start(g, gt, 1, frp_ticks_to_ns(ev->tsc >= f->tsc ? ev->tsc - f->tsc : 0, npt),
                   gt->st.depth, it);
        frp_out_lit(o, "} /* ");
        frp_out_write(o, f->name.s, f->name.len);
        if (it->vals) ret_value(g, it, f->site, it->vals, it->vals_len);
        int suspended = ev->kind == FTR_EV_UNWIND && gt->suspend_left > 0;
        gt->suspend_left -= suspended;
        if (suspended)
            frp_out_lit(o, " (suspended) */\n");
        else if (ev->kind == FTR_EV_UNWIND)
            frp_out_lit(o, " (unwound) */\n");
        else
            frp_out_lit(o, " */\n");
        break;
    }
    default:
        special(g, gt, it);
        break;
    }
    if (!it->next) { /* the thread's stream ends: drop its stack */
        free(gt->st.f);
        gt->st = (struct frp_stack){0};
        gt->skip_exit = 0;
        gt->inherit_left = gt->resume_left = gt->suspend_left = 0;
    }
}

/* ---- the graph as a sink of the pipeline ---- */
static void sink_section(void *ctx, const struct frp_process *p)
{
    frp_graph_header(ctx, p);
}

static void sink_event(void *ctx, const struct frp_item *it)
{
    frp_graph_event(ctx, it);
}

static int sink_failed(void *ctx)
{
    struct frp_graph *g = ctx;
    if (g->out.err) errno = g->out.err_no;
    return g->out.err;
}

static int sink_end(void *ctx, int rc, struct frp_stats *st)
{
    struct frp_graph *g = ctx;
    int e = errno;
    if (frp_graph_finish(g)) {
        e = errno;
        rc = FTR_E_IO;
        g->stats.write_errno = e;
    }
    *st = g->stats;
    frp_graph_free(g);
    errno = e;
    return rc;
}

int frp_graph_sink(struct frp_report *r, const struct frp_opts *o, FILE *out, struct frp_sink *s)
{
    struct frp_graph *g = frp_graph_new(out);
    if (!g) return FTR_E_NOMEM;
    frp_graph_configure(g, r, o);
    *s = (struct frp_sink){g, sink_section, sink_event, sink_failed, sink_end};
    return FTR_OK;
}
