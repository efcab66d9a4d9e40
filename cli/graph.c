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
 *
 * Also here: the one-line note on damage, and the helpers both views use (buffered output,
 * number and duration formatting, call stacks, printable names).
 */
#include "report.h"

#include <errno.h>
#include <stdio.h>
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
    if (p->clock_guessed) frp_out_lit(o, "  (clock rate unknown: durations are in ticks)");
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

/* Starts a line: "  TID)", the duration column (blanks when !has_ns) and the indentation
 * of depth, in one go while the indentation is not huge. */
static inline void line_start(struct frp_out *o, const struct gthread *gt, int has_ns, uint64_t ns,
                              uint32_t depth)
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
    case FTR_SP_TRACE_ON:
        n = snprintf(tmp, sizeof tmp, "/* tracing on */\n");
        break;
    case FTR_SP_TRACE_OFF:
        n = snprintf(tmp, sizeof tmp, "/* tracing off */\n");
        break;
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
    if (__builtin_expect(!gt, 0)) return;
    double npt = it->thread->proc->ns_per_tick;
    g->stats.events++;

    switch (ev->kind) {
    case FTR_EV_ENTRY: {
        const struct ftr_event *nx = it->next;
        if (nx && nx->kind == FTR_EV_EXIT && nx->site == ev->site) {
            line_start(o, gt, 1, frp_ticks_to_ns(nx->tsc >= ev->tsc ? nx->tsc - ev->tsc : 0, npt),
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
    default:
        special(g, gt, ev);
        break;
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
    if (!g) return FTR_E_NOMEM;
    int rc = FTR_OK;
    for (uint32_t i = 0; i < r->nprocs && rc == FTR_OK; i++) {
        struct frp_process *p = r->order[i];
        if (!p->selected) continue;
        frp_graph_header(g, p);
        struct frp_merge *m;
        rc = frp_merge_open(r, p, &m);
        if (rc) break;
        struct frp_item it;
        int n;
        while ((n = frp_merge_next(m, &it)) == 1)
            frp_graph_event(g, &it);
        frp_merge_close(m);
        if (n < 0) rc = -n;
    }
    int e = errno;
    if (frp_graph_finish(g) && rc == FTR_OK) {
        e = errno;
        rc = FTR_E_IO;
        g->stats.write_errno = e;
    }
    if (st) *st = g->stats;
    frp_graph_free(g);
    errno = e;
    return rc;
}

/* ---- the note on damage ---- */
static size_t add_part(char *buf, size_t n, size_t len, const char *s)
{
    if (len && len + 2 < n) len += (size_t)snprintf(buf + len, n - len, "; ");
    if (len < n) len += (size_t)snprintf(buf + len, n - len, "%s", s);
    return len < n ? len : n - 1;
}

size_t frp_report_note(const struct frp_report *r, const struct frp_stats *st, char *buf, size_t n)
{
    struct ftr_damage d = {0};
    char tmp[128];
    size_t len = 0;
    if (!n) return 0;
    buf[0] = 0;
    frp_report_damage(r, &d);
    uint64_t noend = 0, noend_pid = 0;
    for (uint32_t i = 0; i < r->nprocs; i++) {
        if (r->procs[i]->selected && r->procs[i]->has_info && !r->procs[i]->has_end) {
            noend++;
            noend_pid = r->procs[i]->pid;
        }
    }
    if (d.truncated) {
        len = add_part(buf, n, len, "trace truncated (the program was killed?)");
    } else if (noend) {
        if (noend == 1)
            snprintf(tmp, sizeof tmp, "no end record for pid %llu (killed?)",
                     (unsigned long long)noend_pid);
        else
            snprintf(tmp, sizeof tmp, "no end record for %llu processes (killed?)",
                     (unsigned long long)noend);
        len = add_part(buf, n, len, tmp);
    }
    uint64_t bad = d.bad_chunks + r->bad_meta + r->bad_events;
    if (bad) {
        snprintf(tmp, sizeof tmp, "skipped %llu corrupt chunk%s", (unsigned long long)bad,
                 bad == 1 ? "" : "s");
        len = add_part(buf, n, len, tmp);
    }
    if (d.skipped_bytes) {
        snprintf(tmp, sizeof tmp, "skipped %llu damaged byte%s",
                 (unsigned long long)d.skipped_bytes, d.skipped_bytes == 1 ? "" : "s");
        len = add_part(buf, n, len, tmp);
    }
    if (st && st->unmatched) {
        snprintf(tmp, sizeof tmp, "skipped %llu unmatched exit%s",
                 (unsigned long long)st->unmatched, st->unmatched == 1 ? "" : "s");
        len = add_part(buf, n, len, tmp);
    }
    if (st && st->mismatched) {
        snprintf(tmp, sizeof tmp, "%llu exit%s did not match the open call",
                 (unsigned long long)st->mismatched, st->mismatched == 1 ? "" : "s");
        len = add_part(buf, n, len, tmp);
    }
    return len;
}

/* ---- helpers shared with chrome.c ---- */
char *frp_fmt_u64(char *p, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

char frp_duration_marker(uint64_t ns)
{
    if (ns <= 10000) return ' ';
    if (ns <= 100000) return '+';
    if (ns <= 1000000) return '!';
    if (ns <= 10000000) return '#';
    if (ns <= 100000000) return '*';
    if (ns <= 1000000000) return '@';
    return '$';
}

size_t frp_fmt_duration(char *buf, uint64_t ns)
{
    char *p = buf;
    *p++ = ' ';
    *p++ = frp_duration_marker(ns);
    *p++ = ' ';
    unsigned frac = (unsigned)(ns % 1000);
    if (__builtin_expect(ns < 1000000, 1)) { /* below 1000 us: always 7 characters */
        unsigned us = (unsigned)(ns / 1000);
        p[0] = us >= 100 ? (char)('0' + us / 100) : ' ';
        p[1] = us >= 10 ? (char)('0' + us / 10 % 10) : ' ';
        p[2] = (char)('0' + us % 10);
        p += 3;
    } else {
        p = frp_fmt_u64(p, ns / 1000);
    }
    p[0] = '.';
    p[1] = (char)('0' + frac / 100);
    p[2] = (char)('0' + frac / 10 % 10);
    p[3] = (char)('0' + frac % 10);
    memcpy(p + 4, " us  |", 6);
    return (size_t)(p + 10 - buf);
}

int frp_out_init(struct frp_out *o, FILE *f, size_t cap)
{
    memset(o, 0, sizeof *o);
    o->f = f;
    o->buf = malloc(cap);
    if (!o->buf) return FTR_E_NOMEM;
    o->cap = cap;
    return FTR_OK;
}

void frp_out_flush(struct frp_out *o)
{
    if (o->len && !o->err && fwrite(o->buf, 1, o->len, o->f) != o->len) {
        o->err = 1;
        o->err_no = errno ? errno : EIO;
    }
    o->len = 0;
}

void frp_out_free(struct frp_out *o)
{
    if (o->buf) frp_out_flush(o);
    free(o->buf);
    o->buf = NULL;
}

void frp_out_write_slow(struct frp_out *o, const void *p, size_t n)
{
    frp_out_flush(o);
    if (n > o->cap) {
        if (!o->err && fwrite(p, 1, n, o->f) != n) {
            o->err = 1;
            o->err_no = errno ? errno : EIO;
        }
        return;
    }
    memcpy(o->buf, p, n);
    o->len = n;
}

void frp_out_spaces(struct frp_out *o, size_t n)
{
    while (n) {
        size_t k = n < 256 ? n : 256;
        memset(frp_out_room(o, k), ' ', k);
        o->len += k;
        n -= k;
    }
}

int frp_stack_grow(struct frp_stack *s)
{
    uint32_t cap = s->cap ? s->cap * 2 : 64;
    struct frp_frame *f = realloc(s->f, (size_t)cap * sizeof *f);
    if (!f) return FTR_E_NOMEM;
    s->f = f;
    s->cap = cap;
    return FTR_OK;
}

/* Makes s printable and valid UTF-8, in place: control characters and invalid bytes -> '?'. */
void frp_sanitize(char *s, size_t n)
{
    unsigned char *p = (unsigned char *)s, *end = p + n;
    while (p < end) {
        unsigned c = *p;
        if (c < 0x80) {
            if (c < 0x20 || c == 0x7f) *p = '?';
            p++;
            continue;
        }
        size_t len = 0;
        unsigned lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            lo = c == 0xe0 ? 0xa0 : 0x80;
            hi = c == 0xed ? 0x9f : 0xbf;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            lo = c == 0xf0 ? 0x90 : 0x80;
            hi = c == 0xf4 ? 0x8f : 0xbf;
        }
        int ok = len && (size_t)(end - p) >= len && p[1] >= lo && p[1] <= hi;
        for (size_t i = 2; ok && i < len; i++)
            ok = p[i] >= 0x80 && p[i] <= 0xbf;
        if (!ok) {
            *p++ = '?';
            continue;
        }
        p += len;
    }
}
