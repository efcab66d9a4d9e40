/*
 * summary.c - one row per function: calls, total, self, average, min, max (--summary),
 * sorted by one of them; one table per thread with --per-thread.
 *
 *   total    time spent in the function and its callees; a recursive function's nested calls
 *            are inside its outer call and are not counted twice
 *   self     total minus the time of its callees
 *   average, min, max   over its calls, each call's own inclusive duration
 *
 * Calls still open when their thread ends (killed, exit() from inside, a thread still running
 * when the process ended) have no duration: they are counted apart (column Open, shown when
 * there are any) and are in none of the times. A recursive function whose outer call is open
 * has for total the closed calls directly inside the open one (they are not inside one
 * another).
 * Memory: one row per function (per thread and function with --per-thread), and per live
 * thread its call stack and a small table of the functions it called.
 */
#define _GNU_SOURCE /* qsort_r */
#include "summary.h"

#include "names.h"
#include "tree.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct fstat {
    uint64_t calls, total, self, sum, min, max;
    uint64_t timed; /* calls in min, max and sum: not a coroutine's call split by switches */
    uint64_t open;  /* calls still open at the end: in none of the times */
};

struct sframe {
    uint32_t func, site;
    uint64_t tsc, child_ns;
    uint64_t nested_ns; /* closed calls of func directly inside this one */
    uint32_t prev;      /* the frame of the call of func it is inside (index + 1), 0: outer */
    uint32_t slot;      /* func's slot in the thread's table (unless it grew since) */
    uint8_t inherited;  /* a frame a fork child inherited: shown, never counted as a call */
    uint8_t resumed;    /* a coroutine's frame again: its time counts, it is no new call */
};

struct hent {
    uint32_t func; /* 0: free */
    uint32_t open; /* the innermost open call of it in the thread (frame index + 1), 0: none */
};

struct sthread {
    struct sframe *f;
    uint32_t depth, cap;
    /* the functions this thread called (open addressing), whether a call of each is open:
     * sized by what the thread calls, not by the whole trace */
    struct hent *h;
    uint32_t hcap, hn;
    uint64_t last_tsc;
    uint32_t inherit_left; /* entries still to come that re-enter inherited frames */
    uint32_t resume_left;  /* ... that re-enter frames of a resumed coroutine */
    uint32_t suspend_left; /* unwinds still to come that suspend a coroutine's frames */
};

struct frp_summary {
    struct frp_report *r;
    FILE *out; /* as a sink: where frp_summary_write() goes at the end */
    enum frp_sort sort;
    int per_thread, srcline;
    struct frp_funcs funcs;
    struct fstat *st; /* by function id, or by row with per_thread */
    size_t cap;
    uint32_t nrows;
    struct frp_hmap rows; /* per_thread: thread idx << 32 | func -> row */
    uint64_t *row_key;    /* per_thread: by row */
    size_t row_key_cap;
    struct sthread *ts;
    uint32_t nts;
    uint32_t *rank; /* per_thread, by thread idx: its place in the output */
    struct frp_stats stats;
    int nomem;
};

struct frp_summary *frp_summary_new(struct frp_report *r, const struct frp_opts *o)
{
    struct frp_summary *s = calloc(1, sizeof *s);
    if (!s) return NULL;
    s->r = r;
    if (o) {
        s->sort = o->sort;
        s->per_thread = o->per_thread;
        s->srcline = o->srcline;
    }
    frp_funcs_init(&s->funcs, r);
    return s;
}

void frp_summary_free(struct frp_summary *s)
{
    if (!s) return;
    for (uint32_t i = 0; i < s->nts; i++) {
        free(s->ts[i].f);
        free(s->ts[i].h);
    }
    free(s->ts);
    free(s->st);
    free(s->row_key);
    free(s->rank);
    frp_hmap_free(&s->rows);
    frp_funcs_free(&s->funcs);
    free(s);
}

const struct frp_stats *frp_summary_stats(const struct frp_summary *s)
{
    return &s->stats;
}

static struct sthread *sthread(struct frp_summary *s, const struct frp_thread *t)
{
    if (__builtin_expect(t->idx >= s->nts, 0)) {
        uint32_t n = s->nts ? s->nts : 16;
        while (n <= t->idx)
            n *= 2;
        struct sthread *ts = realloc(s->ts, (size_t)n * sizeof *ts);
        if (!ts) return NULL;
        memset(ts + s->nts, 0, (size_t)(n - s->nts) * sizeof *ts);
        s->ts = ts;
        s->nts = n;
    }
    return &s->ts[t->idx];
}

static struct fstat *row(struct frp_summary *s, uint32_t thread, uint32_t func)
{
    uint32_t i = func;
    if (s->per_thread) {
        uint64_t key = (uint64_t)thread << 32 | func;
        uint32_t *v = frp_hmap_get(&s->rows, key);
        if (v) return &s->st[*v];
        i = s->nrows ? s->nrows : 1;
        if (frp_grow((void **)&s->row_key, &s->row_key_cap, (size_t)i + 1, sizeof *s->row_key) ||
            frp_hmap_put(&s->rows, key, i))
            return NULL;
        s->row_key[i] = key;
    }
    if (i >= s->cap) {
        size_t old = s->cap;
        if (frp_grow((void **)&s->st, &s->cap, (size_t)i + 1, sizeof *s->st)) return NULL;
        memset(s->st + old, 0, (s->cap - old) * sizeof *s->st);
    }
    if (i >= s->nrows) s->nrows = i + 1;
    return &s->st[i];
}

static inline uint32_t hslot(uint32_t func, uint32_t cap)
{
    return (func * 2654435761u) & (cap - 1);
}

/* The slot of func in t's table, inserted when missing. @return UINT32_MAX: out of memory */
static uint32_t hfind_slow(struct sthread *t, uint32_t func)
{
    for (uint32_t i = t->hcap ? hslot(func, t->hcap) : 0; t->hcap; i = (i + 1) & (t->hcap - 1)) {
        if (t->h[i].func == func) return i;
        if (!t->h[i].func) break;
    }
    if ((t->hn + 1) * 2 > t->hcap) {
        uint32_t cap = t->hcap ? t->hcap * 2 : 64;
        struct hent *h = calloc(cap, sizeof *h);
        if (!h) return UINT32_MAX;
        for (uint32_t k = 0; k < t->hcap; k++) {
            if (!t->h[k].func) continue;
            uint32_t i = hslot(t->h[k].func, cap);
            while (h[i].func)
                i = (i + 1) & (cap - 1);
            h[i] = t->h[k];
        }
        free(t->h);
        t->h = h;
        t->hcap = cap;
    }
    uint32_t i = hslot(func, t->hcap);
    while (t->h[i].func)
        i = (i + 1) & (t->hcap - 1);
    t->h[i] = (struct hent){func, 0};
    t->hn++;
    return i;
}

static inline uint32_t hfind(struct sthread *t, uint32_t func)
{
    if (__builtin_expect(t->hcap != 0, 1)) {
        uint32_t i = hslot(func, t->hcap);
        if (__builtin_expect(t->h[i].func == func, 1)) return i;
    }
    return hfind_slow(t, func);
}

/* Pops the thread's innermost call: it returned at tsc, or (open) it is still open at the end
 * of the trace, and then enters no time. */
static void close_frame(struct frp_summary *s, struct sthread *t, uint32_t thread, uint64_t tsc,
                        const struct frp_process *p, int open, int suspended)
{
    struct sframe *f = &t->f[--t->depth];
    uint32_t i = f->slot; /* its slot, unless the table grew since */
    if (i >= t->hcap || t->h[i].func != f->func) i = hfind(t, f->func);
    if (i != UINT32_MAX) t->h[i].open = f->prev;
    struct fstat *st =
        !s->per_thread && f->func < s->nrows ? &s->st[f->func] : row(s, thread, f->func);
    if (!st) {
        s->nomem = 1;
        return;
    }
    if (f->inherited) return; /* the parent's call: counted there */
    if (open) {               /* its callers are open too: nothing of it goes to them */
        st->open++;
        st->total += f->nested_ns;
        return;
    }
    uint64_t ns = frp_proc_ns(p, tsc >= f->tsc ? tsc - f->tsc : 0);
    if (t->depth) t->f[t->depth - 1].child_ns += ns;
    if (f->prev)
        t->f[f->prev - 1].nested_ns += ns; /* inside the outer call's time, if it returns */
    else
        st->total += ns;
    st->self += ns > f->child_ns ? ns - f->child_ns : 0;
    st->calls += !f->resumed;
    if (f->resumed || suspended) return; /* a piece of a call: its whole duration is unknown */
    if (st->timed++ == 0 || ns < st->min) st->min = ns;
    if (ns > st->max) st->max = ns;
    st->sum += ns;
}

void frp_summary_event(struct frp_summary *s, const struct frp_item *it)
{
    const struct ftr_event *ev = &it->ev;
    struct sthread *t = sthread(s, it->thread);
    if (__builtin_expect(!t, 0)) {
        s->nomem = 1;
        return;
    }
    s->stats.events++;
    t->last_tsc = ev->tsc;
    switch (ev->kind) {
    case FTR_EV_ENTRY: {
        uint32_t func = frp_funcs_id(&s->funcs, it);
        if (__builtin_expect(!func, 0)) {
            s->nomem = 1;
            break;
        }
        if (__builtin_expect(t->depth == t->cap, 0)) {
            uint32_t n = t->cap ? t->cap * 2 : 64;
            struct sframe *f = realloc(t->f, (size_t)n * sizeof *f);
            if (!f) {
                s->nomem = 1;
                break;
            }
            t->f = f;
            t->cap = n;
        }
        uint32_t slot = hfind(t, func);
        if (__builtin_expect(slot == UINT32_MAX, 0)) {
            s->nomem = 1;
            break;
        }
        uint32_t prev = t->h[slot].open;
        t->h[slot].open = t->depth + 1;
        t->f[t->depth++] = (struct sframe){
            func, ev->site, ev->tsc, 0, 0, prev, slot, t->inherit_left > 0, t->resume_left > 0};
        if (t->inherit_left) t->inherit_left--;
        if (t->resume_left) t->resume_left--;
        break;
    }
    case FTR_EV_EXIT:
    case FTR_EV_UNWIND:
        if (!t->depth) {
            s->stats.unmatched++;
            break;
        }
        if (t->f[t->depth - 1].site != ev->site) s->stats.mismatched++;
        int suspended = ev->kind == FTR_EV_UNWIND && t->suspend_left > 0;
        t->suspend_left -= suspended;
        close_frame(s, t, it->thread->idx, ev->tsc, it->thread->proc, 0, suspended);
        break;
    default:
        if (ev->site == FTR_SP_LOST) s->stats.lost += ev->arg;
        if (ev->site == FTR_SP_INHERITED) t->inherit_left = (uint32_t)ev->arg;
        if (ev->site == FTR_SP_RESUMED) t->resume_left = (uint32_t)ev->arg;
        if (ev->site == FTR_SP_SUSPENDED) t->suspend_left = (uint32_t)ev->arg;
        break;
    }
    if (!it->next) {
        while (t->depth) /* the thread ends with calls open */
            close_frame(s, t, it->thread->idx, t->last_tsc, it->thread->proc, 1, 0);
        free(t->f);
        free(t->h);
        memset(t, 0, sizeof *t);
    }
}

/* ---- output ---- */

static uint64_t sort_key(const struct fstat *st, enum frp_sort sort)
{
    switch (sort) {
    case FRP_SORT_SELF:
        return st->self;
    case FRP_SORT_CALLS:
        return st->calls;
    case FRP_SORT_AVG:
        return st->timed ? st->sum / st->timed : 0;
    case FRP_SORT_MAX:
        return st->max;
    default:
        return st->total;
    }
}

static uint32_t row_func(const struct frp_summary *s, uint32_t i)
{
    return s->per_thread ? (uint32_t)s->row_key[i] : i;
}

static uint32_t row_thread(const struct frp_summary *s, uint32_t i)
{
    return s->per_thread ? (uint32_t)(s->row_key[i] >> 32) : 0;
}

static int cmp_rows(const void *a, const void *b, void *arg)
{
    const struct frp_summary *s = arg;
    uint32_t x = *(const uint32_t *)a, y = *(const uint32_t *)b;
    uint32_t tx = row_thread(s, x), ty = row_thread(s, y);
    if (tx != ty) return s->rank[tx] < s->rank[ty] ? -1 : 1;
    uint64_t kx = sort_key(&s->st[x], s->sort), ky = sort_key(&s->st[y], s->sort);
    if (kx != ky) return kx > ky ? -1 : 1;
    const struct frp_name *nx = &s->funcs.names[row_func(s, x)];
    const struct frp_name *ny = &s->funcs.names[row_func(s, y)];
    size_t n = nx->len < ny->len ? nx->len : ny->len;
    int c = memcmp(nx->s, ny->s, n);
    if (c) return c;
    return nx->len < ny->len ? -1 : nx->len > ny->len;
}

/* Threads in order of their process's start, then of their first event. */
static int cmp_threads(const void *a, const void *b, void *arg)
{
    const uint32_t *porder = arg;
    const struct frp_thread *x = *(const struct frp_thread *const *)a;
    const struct frp_thread *y = *(const struct frp_thread *const *)b;
    if (x->proc != y->proc) return porder[x->proc->idx] < porder[y->proc->idx] ? -1 : 1;
    if (x->tsc_first != y->tsc_first) return x->tsc_first < y->tsc_first ? -1 : 1;
    return x->tid < y->tid ? -1 : x->tid > y->tid;
}

static int rank_threads(struct frp_summary *s)
{
    struct frp_report *r = s->r;
    uint32_t *porder = malloc(((size_t)r->nprocs + 1) * sizeof *porder);
    struct frp_thread **ts = malloc(((size_t)r->nthreads + 1) * sizeof *ts);
    s->rank = malloc(((size_t)r->nthreads + 1) * sizeof *s->rank);
    if (!porder || !ts || !s->rank) {
        free(porder);
        free(ts);
        return -1;
    }
    for (uint32_t i = 0; i < r->nprocs; i++)
        porder[r->order[i]->idx] = i;
    if (r->nthreads) memcpy(ts, r->threads, (size_t)r->nthreads * sizeof *ts);
    qsort_r(ts, r->nthreads, sizeof *ts, cmp_threads, porder);
    for (uint32_t i = 0; i < r->nthreads; i++)
        s->rank[ts[i]->idx] = i;
    free(porder);
    free(ts);
    return 0;
}

static void header(struct frp_out *o, int open)
{
    frp_out_lit(o, "#  Total time    Self time       Calls      Average          Min"
                   "          Max");
    if (open) frp_out_lit(o, "    Open");
    frp_out_lit(o, "  Function\n"
                   "# ===========  ===========  ==========  ===========  ===========  ===========");
    if (open) frp_out_lit(o, "  ======");
    frp_out_lit(o, "  ====================\n");
}

static void thread_title(struct frp_summary *s, struct frp_out *o, uint32_t thread, int first)
{
    const struct frp_thread *t = thread < s->r->nthreads ? s->r->threads[thread] : NULL;
    if (!first) frp_out_lit(o, "\n");
    if (!t) return;
    frp_out_printf(o, "# thread %u%s%s%s of pid %u: %s\n", t->tid, t->name ? " (" : "",
                   t->name ? t->name : "", t->name ? ")" : "", t->proc->pid, t->proc->cmdline);
}

int frp_summary_write(struct frp_summary *s, FILE *out)
{
    struct frp_out o;
    if (frp_out_init(&o, out, 1 << 16)) return errno = ENOMEM, -1;
    for (uint32_t i = 0; i < s->nts; i++) { /* threads cut short: their calls are open */
        struct sthread *t = &s->ts[i];
        while (t->depth)
            close_frame(s, t, i, t->last_tsc, s->r->threads[i]->proc, 1, 0);
    }
    uint32_t *idx = malloc(((size_t)s->nrows + 1) * sizeof *idx);
    if (!idx || (s->per_thread && rank_threads(s))) {
        free(idx);
        frp_out_free(&o);
        return errno = ENOMEM, -1;
    }
    uint32_t n = 0;
    uint64_t calls = 0, open = 0;
    for (uint32_t i = 1; i < s->nrows; i++)
        if (s->st[i].calls || s->st[i].open) {
            idx[n++] = i;
            calls += s->st[i].calls;
            open += s->st[i].open;
        }
    qsort_r(idx, n, sizeof *idx, cmp_rows, s);
    if (!s->per_thread)
        frp_out_printf(&o, "# %u function%s, %llu call%s", n, n == 1 ? "" : "s",
                       (unsigned long long)calls, calls == 1 ? "" : "s");
    if (open)
        frp_out_printf(&o, "%s%llu call%s still open at the end, not in the timings (column Open)",
                       s->per_thread ? "# " : "; ", (unsigned long long)open, open == 1 ? "" : "s");
    if (!s->per_thread || open) frp_out_lit(&o, "\n");
    for (uint32_t k = 0; k < n; k++) {
        uint32_t i = idx[k];
        if (s->per_thread && (k == 0 || row_thread(s, idx[k - 1]) != row_thread(s, i))) {
            thread_title(s, &o, row_thread(s, i), k == 0);
            header(&o, open != 0);
        } else if (k == 0) {
            header(&o, open != 0);
        }
        const struct fstat *st = &s->st[i];
        char t[5][40];
        for (int j = 0; j < 5; j++) /* only open calls: no time is known */
            strcpy(t[j], "-");
        if (st->calls) {
            frp_fmt_time(t[0], st->total);
            frp_fmt_time(t[1], st->self);
        }
        if (st->timed) { /* calls no coroutine switch split */
            frp_fmt_time(t[2], st->sum / st->timed);
            frp_fmt_time(t[3], st->min);
            frp_fmt_time(t[4], st->max);
        }
        uint32_t func = row_func(s, i);
        frp_out_printf(&o, "  %11s  %11s  %10llu  %11s  %11s  %11s  ", t[0], t[1],
                       (unsigned long long)st->calls, t[2], t[3], t[4]);
        if (open) frp_out_printf(&o, "%6llu  ", (unsigned long long)st->open);
        frp_out_write(&o, s->funcs.names[func].s, s->funcs.names[func].len);
        const char *src = s->srcline && s->funcs.rep_proc[func]
                              ? frp_srcline(s->r, s->funcs.rep_proc[func], s->funcs.rep_site[func])
                              : NULL;
        if (src) frp_out_printf(&o, " [%s]", src);
        frp_out_lit(&o, "\n");
    }
    free(idx);
    int rc = frp_out_finish(&o);
    int e = errno;
    frp_out_free(&o);
    errno = e;
    return rc;
}

/* ---- the summary as a sink of the pipeline ---- */
static void sink_event(void *ctx, const struct frp_item *it)
{
    frp_summary_event(ctx, it);
}

static int sink_end(void *ctx, int rc, struct frp_stats *st)
{
    struct frp_summary *s = ctx;
    if (rc == FTR_OK && s->nomem) rc = FTR_E_NOMEM;
    if (rc == FTR_OK && frp_summary_write(s, s->out))
        rc = errno == ENOMEM ? FTR_E_NOMEM : frp_write_failed(st);
    int e = st->write_errno;
    *st = *frp_summary_stats(s);
    st->write_errno = e;
    frp_summary_free(s);
    return rc;
}

int frp_summary_sink(struct frp_report *r, const struct frp_opts *o, FILE *out,
                     struct frp_sink *sink)
{
    struct frp_summary *s = frp_summary_new(r, o);
    if (!s) return FTR_E_NOMEM;
    s->out = out;
    *sink = (struct frp_sink){s, NULL, sink_event, NULL, sink_end};
    return FTR_OK;
}
