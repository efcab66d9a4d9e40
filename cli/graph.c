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
 */
#include "report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define OUT_BUF (1u << 20)
#define NO_DURATION "               |" /* 15 spaces where " M %7.3f us  " would be */

struct gthread {
    struct frp_stack st;
    int skip_exit; /* the thread's next item is the exit of a leaf already printed */
    uint8_t plen;
    char prefix[16]; /* "%6u)" */
};

struct frp_graph {
    struct frp_out out;
    struct gthread *ts;
    uint32_t nts;
    struct frp_stats stats;
    int sections;
};

struct frp_graph *frp_graph_new(FILE *out)
{
    struct frp_graph *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    if (frp_out_init(&g->out, out, OUT_BUF)) {
        free(g);
        return NULL;
    }
    return g;
}

void frp_graph_free(struct frp_graph *g)
{
    if (!g)
        return;
    for (uint32_t i = 0; i < g->nts; i++)
        free(g->ts[i].st.f);
    free(g->ts);
    frp_out_free(&g->out);
    free(g);
}

int frp_graph_finish(struct frp_graph *g)
{
    frp_out_flush(&g->out);
    if (!g->out.err && fflush(g->out.f) != 0) {
        g->out.err = 1;
        g->out.err_no = errno ? errno : EIO;
    }
    if (g->out.err) {
        errno = g->out.err_no;
        return -1;
    }
    return 0;
}

const struct frp_stats *frp_graph_stats(const struct frp_graph *g) { return &g->stats; }

void frp_graph_header(struct frp_graph *g, const struct frp_process *p)
{
    char line[160];
    struct frp_out *o = &g->out;
    if (g->sections++)
        frp_out_lit(o, "\n");
    frp_out_lit(o, "# ftrace-run: ");
    frp_out_write(o, p->cmdline, strlen(p->cmdline));
    int n = snprintf(line, sizeof line, "  pid %u  %u thread%s", p->pid, p->nthreads,
                     p->nthreads == 1 ? "" : "s");
    frp_out_write(o, line, (size_t)n);
    if (p->has_end)
        n = snprintf(line, sizeof line, "  %llu call%s", (unsigned long long)p->end.calls,
                     p->end.calls == 1 ? "" : "s");
    else
        n = snprintf(line, sizeof line, "  (no end record)");
    frp_out_write(o, line, (size_t)n);
    if (p->clock_guessed)
        frp_out_lit(o, "  (clock rate unknown: durations are in ticks)");
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
        if (!ts)
            return NULL;
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

/* Starts a line: "  TID)", the duration column (blanks when !has_ns) and the indentation
 * of depth, in one go while the indentation is not huge. */
static inline void line_start(struct frp_out *o, const struct gthread *gt, int has_ns,
                              uint64_t ns, uint32_t depth)
{
    size_t ind = 2 + 2 * (size_t)depth;
    char *p = frp_out_room(o, sizeof gt->prefix + FRP_DURATION_MAX + sizeof spaces);
    memcpy(p, gt->prefix, sizeof gt->prefix);
    p += gt->plen;
    if (!has_ns) {
        memcpy(p, NO_DURATION, sizeof NO_DURATION - 1);
        p += sizeof NO_DURATION - 1;
    } else {
        p += frp_fmt_duration(p, ns);
    }
    if (__builtin_expect(ind <= sizeof spaces, 1)) {
        memcpy(p, spaces, ind);
        o->len = (size_t)(p + ind - o->buf);
    } else {
        o->len = (size_t)(p - o->buf);
        frp_out_spaces(o, ind);
    }
}

static void special(struct frp_graph *g, struct gthread *gt, const struct ftr_event *ev)
{
    struct frp_out *o = &g->out;
    char tmp[96];
    int n;
    switch (ev->site) {
    case FTR_SP_LOST:
        g->stats.lost += ev->arg;
        n = snprintf(tmp, sizeof tmp, "/* lost %llu event%s */\n", (unsigned long long)ev->arg,
                     ev->arg == 1 ? "" : "s");
        break;
    case FTR_SP_OVERRUN:
        n = snprintf(tmp, sizeof tmp, "/* %llu call%s not traced: call stack too deep */\n",
                     (unsigned long long)ev->arg, ev->arg == 1 ? "" : "s");
        break;
    case FTR_SP_TRACE_ON: n = snprintf(tmp, sizeof tmp, "/* tracing on */\n"); break;
    case FTR_SP_TRACE_OFF: n = snprintf(tmp, sizeof tmp, "/* tracing off */\n"); break;
    default:
        n = snprintf(tmp, sizeof tmp, "/* special event %u (%llu) */\n", (unsigned)ev->site,
                     (unsigned long long)ev->arg);
        break;
    }
    line_start(o, gt, 0, 0, gt->st.depth);
    frp_out_write(o, tmp, (size_t)n);
}

void frp_graph_event(struct frp_graph *g, const struct frp_item *it)
{
    struct frp_out *o = &g->out;
    const struct ftr_event *ev = &it->ev;
    struct gthread *gt = gstate(g, it->thread);
    if (__builtin_expect(!gt, 0))
        return;
    double npt = it->thread->proc->ns_per_tick;
    g->stats.events++;

    switch (ev->kind) {
    case FTR_EV_ENTRY: {
        const struct ftr_event *nx = it->next;
        if (nx && nx->kind == FTR_EV_EXIT && nx->site == ev->site) {
            line_start(o, gt, 1,
                       frp_ticks_to_ns(nx->tsc >= ev->tsc ? nx->tsc - ev->tsc : 0, npt),
                       gt->st.depth);
            frp_out_write(o, it->name.s, it->name.len);
            frp_out_lit(o, "();\n");
            gt->skip_exit = 1;
            break;
        }
        line_start(o, gt, 0, 0, gt->st.depth);
        frp_out_write(o, it->name.s, it->name.len);
        frp_out_lit(o, "() {\n");
        struct frp_frame *f = frp_stack_push(&gt->st);
        if (f)
            *f = (struct frp_frame){it->name, ev->site, ev->tsc};
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
        if (f->site != ev->site)
            g->stats.mismatched++;
        line_start(o, gt, 1, frp_ticks_to_ns(ev->tsc >= f->tsc ? ev->tsc - f->tsc : 0, npt),
                   gt->st.depth);
        frp_out_lit(o, "} /* ");
        frp_out_write(o, f->name.s, f->name.len);
        if (ev->kind == FTR_EV_UNWIND)
            frp_out_lit(o, " (unwound) */\n");
        else
            frp_out_lit(o, " */\n");
        break;
    }
    default: special(g, gt, ev); break;
    }
    if (!it->next) { /* the thread's stream ends: drop its stack */
        free(gt->st.f);
        gt->st = (struct frp_stack){0};
        gt->skip_exit = 0;
    }
}

int frp_render_graph(struct frp_report *r, FILE *out, struct frp_stats *st)
{
    struct frp_graph *g = frp_graph_new(out);
    if (!g)
        return FTR_E_NOMEM;
    int rc = FTR_OK;
    for (uint32_t i = 0; i < r->nprocs && rc == FTR_OK; i++) {
        struct frp_process *p = r->order[i];
        if (!p->selected)
            continue;
        frp_graph_header(g, p);
        struct frp_merge *m;
        rc = frp_merge_open(r, p, &m);
        if (rc)
            break;
        struct frp_item it;
        int n;
        while ((n = frp_merge_next(m, &it)) == 1)
            frp_graph_event(g, &it);
        frp_merge_close(m);
        if (n < 0)
            rc = -n;
    }
    int e = errno;
    if (frp_graph_finish(g) && rc == FTR_OK) {
        e = errno;
        rc = FTR_E_IO;
        g->stats.write_errno = e;
    }
    if (st)
        *st = g->stats;
    frp_graph_free(g);
    errno = e;
    return rc;
}
