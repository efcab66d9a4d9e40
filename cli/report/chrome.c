/*
 * chrome.c - Chrome Trace Event JSON ({"traceEvents":[...]}), for chrome://tracing and the
 * Perfetto UI. Streamed: one event is written per item, nothing is kept but the per-thread
 * call stacks (so that every "E" matches a "B": exits with no open call are skipped).
 *
 * Events: "B"/"E" per call (ts in microseconds since the earliest process start, 3 decimals),
 * "i" (thread-scoped instant) for special events, "M" process_name / thread_name metadata.
 */
#include "chrome.h"

#include "util.h"
#include "values.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#define OUT_BUF (1u << 20)
#define UNWOUND_TAIL "\",\"args\":{\"unwound\":true}}"

struct cthread {
    struct frp_stack st;
    uint8_t plen;
    char prefix[40]; /* "pid":P,"tid":T,"ts": */
};

struct frp_chrome {
    struct frp_out out;
    struct cthread *ts;
    uint32_t nts;
    uint64_t base_tsc;
    uint32_t depth_max; /* for FRP_SP_DEEP */
    int nevents;
    struct frp_stats stats;
};

void frp_json_escape(struct frp_out *o, const char *s, size_t n)
{
    static const char hex[] = "0123456789abcdef";
    size_t start = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (__builtin_expect(c >= 0x20 && c != '"' && c != '\\', 1)) continue;
        frp_out_write(o, s + start, i - start);
        start = i + 1;
        char e[6] = {'\\', (char)c, 0, 0, 0, 0};
        size_t len = 2;
        switch (c) {
        case '"':
        case '\\':
            break;
        case '\n':
            e[1] = 'n';
            break;
        case '\t':
            e[1] = 't';
            break;
        case '\r':
            e[1] = 'r';
            break;
        default:
            memcpy(e + 1, "u00", 3);
            e[4] = hex[c >> 4];
            e[5] = hex[c & 15];
            len = 6;
            break;
        }
        frp_out_write(o, e, len);
    }
    frp_out_write(o, s + start, n - start);
}

struct frp_chrome *frp_chrome_new(FILE *out, uint64_t base_tsc)
{
    struct frp_chrome *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    if (frp_out_init(&c->out, out, OUT_BUF)) {
        free(c);
        return NULL;
    }
    c->base_tsc = base_tsc;
    c->depth_max = FTR_DEPTH_MAX;
    frp_out_lit(&c->out, "{\"traceEvents\":[\n");
    return c;
}

void frp_chrome_free(struct frp_chrome *c)
{
    if (!c) return;
    for (uint32_t i = 0; i < c->nts; i++)
        free(c->ts[i].st.f);
    free(c->ts);
    frp_out_free(&c->out);
    free(c);
}

int frp_chrome_finish(struct frp_chrome *c)
{
    frp_out_lit(&c->out, "\n]}\n");
    return frp_out_finish(&c->out);
}

const struct frp_stats *frp_chrome_stats(const struct frp_chrome *c)
{
    return &c->stats;
}

static inline void sep(struct frp_chrome *c)
{
    if (__builtin_expect(c->nevents++ != 0, 1)) frp_out_lit(&c->out, ",\n");
}

static void meta(struct frp_chrome *c, const char *what, uint32_t pid, uint32_t tid,
                 const char *name)
{
    char tmp[96];
    sep(c);
    int n = snprintf(tmp, sizeof tmp, "{\"ph\":\"M\",\"pid\":%u,\"tid\":%u,\"name\":\"%s\",", pid,
                     tid, what);
    frp_out_write(&c->out, tmp, (size_t)n);
    frp_out_lit(&c->out, "\"args\":{\"name\":\"");
    frp_json_escape(&c->out, name, strlen(name));
    frp_out_lit(&c->out, "\"}}");
}

void frp_chrome_process(struct frp_chrome *c, const struct frp_process *p)
{
    char tmp[32];
    if (!p->has_info) snprintf(tmp, sizeof tmp, "pid %u", p->pid);
    meta(c, "process_name", p->pid, p->pid, p->has_info ? p->cmdline : tmp);
}

void frp_chrome_thread(struct frp_chrome *c, const struct frp_thread *t)
{
    char tmp[32];
    const char *name = t->name;
    if (!name) {
        snprintf(tmp, sizeof tmp, "%s %u", t->tid == t->proc->pid ? "main" : "thread", t->tid);
        name = tmp;
    }
    meta(c, "thread_name", t->proc->pid, t->tid, name);
}

static struct cthread *cstate(struct frp_chrome *c, const struct frp_thread *t)
{
    if (__builtin_expect(t->idx >= c->nts, 0)) {
        uint32_t n = c->nts ? c->nts : 16;
        while (n <= t->idx)
            n *= 2;
        struct cthread *ts = realloc(c->ts, (size_t)n * sizeof *ts);
        if (!ts) return NULL;
        memset(ts + c->nts, 0, (size_t)(n - c->nts) * sizeof *ts);
        c->ts = ts;
        c->nts = n;
    }
    struct cthread *ct = &c->ts[t->idx];
    if (__builtin_expect(!ct->plen, 0))
        ct->plen = (uint8_t)snprintf(ct->prefix, sizeof ct->prefix,
                                     "\"pid\":%u,\"tid\":%u,\"ts\":", t->proc->pid, t->tid);
    return ct;
}

/* {"ph":"X","pid":P,"tid":T,"ts":U.NNN */
static inline void ev_head(struct frp_chrome *c, const struct cthread *ct, char ph, uint64_t tsc,
                           double npt)
{
    sep(c);
    uint64_t ns = frp_ticks_to_ns(tsc > c->base_tsc ? tsc - c->base_tsc : 0, npt);
    char *p = frp_out_room(&c->out, 16 + sizeof ct->prefix + 24);
    memcpy(p, "{\"ph\":\"B\",", 10);
    p[7] = ph;
    p += 10;
    memcpy(p, ct->prefix, ct->plen);
    p = frp_fmt_u64(p + ct->plen, ns / 1000);
    unsigned frac = (unsigned)(ns % 1000);
    p[0] = '.';
    p[1] = (char)('0' + frac / 100);
    p[2] = (char)('0' + frac / 10 % 10);
    p[3] = (char)('0' + frac % 10);
    c->out.len = (size_t)(p + 4 - c->out.buf);
}

static inline void name_tail(struct frp_chrome *c, struct frp_name name, const char *tail,
                             size_t tlen)
{
    frp_out_lit(&c->out, ",\"name\":\"");
    frp_json_escape(&c->out, name.s, name.len);
    frp_out_write(&c->out, tail, tlen);
}

/* ,"args":{"args":"1, 2"} or {"retval":"3"}: a call's values, as the graph writes them */
static void values_tail(struct frp_chrome *c, const char *key, const uint8_t *v, uint32_t len)
{
    char t[FRP_VALUES_TEXT_MAX];
    size_t n = frp_values_text(v, len, t, sizeof t);
    frp_out_lit(&c->out, "\",\"args\":{\"");
    frp_out_str(&c->out, key);
    frp_out_lit(&c->out, "\":\"");
    frp_json_escape(&c->out, t, n);
    frp_out_lit(&c->out, "\"}}");
}

void frp_chrome_event(struct frp_chrome *c, const struct frp_item *it)
{
    const struct ftr_event *ev = &it->ev;
    struct cthread *ct = cstate(c, it->thread);
    if (__builtin_expect(!ct, 0)) return;
    double npt = it->thread->proc->ns_per_tick;
    c->stats.events++;

    switch (ev->kind) {
    case FTR_EV_ENTRY: {
        struct frp_frame *f = frp_stack_push(&ct->st);
        if (!f) return; /* out of memory: an unmatched B would nest everything after it */
        *f = (struct frp_frame){it->name, ev->site, ev->tsc};
        ev_head(c, ct, 'B', ev->tsc, npt);
        if (__builtin_expect(it->vals != NULL, 0)) {
            name_tail(c, it->name, "", 0);
            values_tail(c, "args", it->vals, it->vals_len);
        } else {
            name_tail(c, it->name, "\"}", 2);
        }
        break;
    }
    case FTR_EV_EXIT:
    case FTR_EV_UNWIND: {
        if (!ct->st.depth) {
            c->stats.unmatched++;
            break;
        }
        const struct frp_frame *f = &ct->st.f[--ct->st.depth];
        if (f->site != ev->site) c->stats.mismatched++;
        ev_head(c, ct, 'E', ev->tsc, npt);
        if (ev->kind == FTR_EV_EXIT && __builtin_expect(it->vals != NULL, 0)) {
            name_tail(c, f->name, "", 0);
            values_tail(c, "retval", it->vals, it->vals_len);
        } else if (ev->kind == FTR_EV_EXIT)
            name_tail(c, f->name, "\"}", 2);
        else
            name_tail(c, f->name, UNWOUND_TAIL, sizeof UNWOUND_TAIL - 1);
        break;
    }
    default: {
        char tmp[80];
        int n;
        const struct frp_process *p = it->thread->proc;
        if (ev->site == FRP_SP_MARK && ev->arg < p->nmarks) { /* ftrace-ctl: process-wide */
            char text[4200];
            size_t len = frp_mark_text(&p->marks[ev->arg], text, sizeof text);
            ev_head(c, ct, 'i', ev->tsc, npt);
            frp_out_lit(&c->out, ",\"s\":\"p\"");
            name_tail(c, (struct frp_name){text, (uint32_t)len}, "\"}", 2);
            break;
        }
        switch (ev->site) {
        case FTR_SP_LOST:
            c->stats.lost += ev->arg;
            n = snprintf(tmp, sizeof tmp, "lost %llu events", (unsigned long long)ev->arg);
            break;
        case FTR_SP_OVERRUN:
            n = snprintf(tmp, sizeof tmp, "%llu calls not traced (call stack too deep)",
                         (unsigned long long)ev->arg);
            break;
        case FTR_SP_TRACE_ON:
            n = snprintf(tmp, sizeof tmp, "tracing on");
            break;
        case FTR_SP_TRACE_OFF:
            n = snprintf(tmp, sizeof tmp, "tracing off");
            break;
        case FTR_SP_INHERITED:
            n = snprintf(tmp, sizeof tmp, "%llu frames inherited from the parent",
                         (unsigned long long)ev->arg);
            break;
        case FTR_SP_SUSPENDED:
            n = snprintf(tmp, sizeof tmp, "coroutine suspended (%llu frames)",
                         (unsigned long long)ev->arg);
            break;
        case FTR_SP_RESUMED:
            n = snprintf(tmp, sizeof tmp, "coroutine resumed (%llu frames)",
                         (unsigned long long)ev->arg);
            break;
        case FRP_SP_DEEP:
            n = snprintf(tmp, sizeof tmp, "%llu call%s nested deeper than %u not shown",
                         (unsigned long long)ev->arg, ev->arg == 1 ? "" : "s", c->depth_max);
            break;
        default:
            n = snprintf(tmp, sizeof tmp, "special event %u (%llu)", (unsigned)ev->site,
                         (unsigned long long)ev->arg);
            break;
        }
        ev_head(c, ct, 'i', ev->tsc, npt);
        frp_out_lit(&c->out, ",\"s\":\"t\"");
        name_tail(c, (struct frp_name){tmp, (uint32_t)n}, "\"}", 2);
        break;
    }
    }
    if (!it->next) { /* the thread's stream ends: its open calls stay open */
        free(ct->st.f);
        ct->st = (struct frp_stack){0};
    }
}

/* ---- Chrome JSON as a sink of the pipeline ---- */
static void sink_event(void *ctx, const struct frp_item *it)
{
    frp_chrome_event(ctx, it);
}

static int sink_failed(void *ctx)
{
    struct frp_chrome *c = ctx;
    if (c->out.err) errno = c->out.err_no;
    return c->out.err;
}

static int sink_end(void *ctx, int rc, struct frp_stats *st)
{
    struct frp_chrome *c = ctx;
    int e = errno;
    if (frp_chrome_finish(c)) {
        e = errno;
        rc = FTR_E_IO;
        c->stats.write_errno = e;
    }
    *st = c->stats;
    frp_chrome_free(c);
    errno = e;
    return rc;
}

int frp_chrome_sink(struct frp_report *r, const struct frp_opts *o, FILE *out, struct frp_sink *s)
{
    (void)o;
    struct frp_chrome *c = frp_chrome_new(out, r->base_tsc);
    if (!c) return FTR_E_NOMEM;
    if (r->depth_max) c->depth_max = r->depth_max;
    for (uint32_t i = 0; i < r->nprocs; i++)
        if (r->order[i]->selected) frp_chrome_process(c, r->order[i]);
    for (uint32_t i = 0; i < r->nthreads; i++)
        if (r->threads[i]->selected) frp_chrome_thread(c, r->threads[i]);
    *s = (struct frp_sink){c, NULL, sink_event, sink_failed, sink_end};
    return FTR_OK;
}
