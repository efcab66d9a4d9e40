/*
 * drive.c - the pipeline that feeds a view (drive.h): merge -> shaper -> sink, with progress.
 * It knows no view: render.c picks the sink (sink.h) and drives it.
 *
 * The shaper hides what the options ask to hide while keeping every thread's call tree
 * consistent, and passes the rest on in the merge's (time) order. Per thread it keeps
 *   - the raw call stack (is each call shown?) so that the exit of a hidden call is hidden too,
 *     whatever hid its entry (filter, depth, time range);
 *   - a queue of visible events not passed on yet: an event is ready once the thread's next
 *     visible event is final, so that the views see it->next as in an unfiltered stream
 *     (the graph's leaf lines need it);
 *   - with a threshold, the visible calls still open whose fate is unknown (shorter than the
 *     threshold so far): a contiguous run at the top of the visible stack. Such a call is
 *     decided "shown" as soon as any event of its thread comes threshold ticks after its entry,
 *     and dropped with everything it enclosed when its exit comes sooner.
 * Every event carries its rank in the merge; a heap of the threads by the rank of their oldest
 * queued event passes events on in that order, so lines of different threads interleave as
 * without the shaper. The queues are bounded together (GMAX events): beyond, the oldest
 * waiting event is forced out: its undecided calls are shown as if long enough, or it goes
 * without knowing its successor (a call then prints as "f() {" ... "}" even if it had no
 * visible callee).
 */
#include "drive.h"

#include "merge.h"
#include "names.h"
#include "report.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#ifdef FRP_HAVE_FILTER
#include "ftr_filter.h"
#endif

#define GMAX (1u << 19) /* events waiting in all queues, at most */

/* The successor given to an event forced out before its successor was known: a special
 * event no view takes for an exit. */
static const struct ftr_event unknown_next = {0, UINT32_MAX, FTR_EV_SPECIAL, 0};

struct qev {
    struct ftr_event ev;
    uint64_t rank;
    uint8_t *vals; /* a copy of the item's values (malloc'ed), or NULL */
    uint32_t vals_len;
};

struct sthr {
    int init, ended, in_heap;
    struct frp_thread *t;
    uint8_t *raw; /* the raw call stack: whether each call open is shown */
    uint32_t rdepth, rcap;
    uint32_t vdepth;
    struct qev *q; /* ring of qcap entries; positions are absolute */
    uint64_t qhead, qtail;
    uint32_t qcap;
    uint64_t *und; /* positions of the undecided entries: und[ulo .. un) */
    uint32_t ulo, un, ucap;
    uint64_t thr, lo_tsc, hi_tsc;
    /* an INHERITED / SUSPENDED / RESUMED special that counts the next pend_n ENTRY (UNWIND)
     * events: passed on as one special with arg 1 before each of them that is shown, since
     * the shaper may hide some */
    struct ftr_event pend;
    uint32_t pend_n;
};

struct hent {
    uint64_t key; /* rank of the thread's oldest queued event (may be stale: only grows) */
    uint32_t th;
};

struct shaper {
    struct frp_report *r;
    const struct frp_opts *o;
    const struct frp_sink *s;
    struct sthr *ts;
    uint32_t nts;
    uint8_t **vis; /* by process idx, by site: 0 unknown, 1 shown, 2 hidden */
    uint32_t *visn;
    uint64_t rank;     /* items taken from the merge */
    uint64_t buffered; /* events in all queues */
    struct hent *heap;
    uint32_t nheap, heapcap;
    int nomem;
};

int frp_shaping(const struct frp_opts *o)
{
    return o && (o->filter || o->no_libcall || o->max_depth || o->threshold_ns || o->has_range);
}

/* Whether the filter selects a site's function: by its raw (mangled) name or its demangled
 * forms (patcher/filter.c: a term matches when one of them does), and its module. */
int frp_filter_site(struct frp_report *r, const struct ftr_filter *f, struct frp_process *p,
                    uint32_t site)
{
#ifdef FRP_HAVE_FILTER
    if (!f) return 1;
    const struct frp_process *owner = p;
    const struct frp_site_meta *m = frp_site_meta(p, site, &owner);
    const char *module = NULL, *raw;
    int is_main = 0;
    if (m) {
        raw = m->raw;
        if (m->module && m->module <= owner->nmodules) module = owner->modules[m->module - 1].path;
        is_main = module && owner->exe && strcmp(module, owner->exe) == 0;
    } else {
        raw = frp_site_name(r, p, site).s;
    }
    return ftr_filter_match_ex(f, module, is_main, raw);
#else
    (void)r;
    (void)f;
    (void)p;
    (void)site;
    return 1;
#endif
}

size_t frp_filter_count(struct frp_report *r, const struct ftr_filter *f)
{
    size_t n = 0;
    for (uint32_t i = 0; i < r->nprocs; i++) {
        struct frp_process *p = r->procs[i];
        if (!p->selected) continue;
        for (uint32_t s = 1; s < p->nsites; s++)
            if (p->meta && p->meta[s].raw) n += frp_filter_site(r, f, p, s) != 0;
    }
    return n;
}

static int site_shown(struct shaper *sh, struct frp_process *p, uint32_t site)
{
    if (sh->o->no_libcall) {
        const struct frp_process *owner = p;
        const struct frp_site_meta *m = frp_site_meta(p, site, &owner);
        if (m && m->kind == FTR_SITE_LIBCALL) return 0;
    }
    if (!sh->o->filter) return 1;
    uint32_t pi = p->idx;
    if (pi < sh->r->nprocs && site < sh->visn[pi] && sh->vis[pi][site])
        return sh->vis[pi][site] == 1;
    int shown = frp_filter_site(sh->r, sh->o->filter, p, site);
    if (pi < sh->r->nprocs && site < FRP_SITE_LIMIT) {
        if (site >= sh->visn[pi]) {
            uint32_t n = sh->visn[pi] ? sh->visn[pi] : 256;
            while (n <= site)
                n *= 2;
            uint8_t *v = realloc(sh->vis[pi], n);
            if (!v) return shown;
            memset(v + sh->visn[pi], 0, n - sh->visn[pi]);
            sh->vis[pi] = v;
            sh->visn[pi] = n;
        }
        sh->vis[pi][site] = shown ? 1 : 2;
    }
    return shown;
}

static struct sthr *sthread(struct shaper *sh, struct frp_thread *t)
{
    if (t->idx >= sh->nts) {
        uint32_t n = sh->nts ? sh->nts : 16;
        while (n <= t->idx)
            n *= 2;
        struct sthr *ts = realloc(sh->ts, (size_t)n * sizeof *ts);
        if (!ts) return NULL;
        memset(ts + sh->nts, 0, (size_t)(n - sh->nts) * sizeof *ts);
        sh->ts = ts;
        sh->nts = n;
    }
    struct sthr *st = &sh->ts[t->idx];
    if (!st->init) {
        const struct frp_process *p = t->proc;
        const struct frp_opts *o = sh->o;
        st->init = 1;
        st->t = t;
        st->thr = o->threshold_ns ? frp_ns_to_ticks(o->threshold_ns, p->ns_per_tick) : 0;
        st->lo_tsc = 0;
        st->hi_tsc = UINT64_MAX;
        if (o->has_range) {
            uint64_t start = frp_proc_start(p);
            if (start == UINT64_MAX) start = 0;
            uint64_t lo = frp_ns_to_ticks(o->range_lo_ns, p->ns_per_tick);
            uint64_t hi = o->range_hi_ns == UINT64_MAX
                              ? UINT64_MAX
                              : (uint64_t)((double)o->range_hi_ns / p->ns_per_tick);
            st->lo_tsc = start + lo < start ? UINT64_MAX : start + lo;
            st->hi_tsc = start + hi < start ? UINT64_MAX : start + hi;
        }
    }
    return st;
}

static void sthr_free(struct sthr *st)
{
    for (uint64_t i = st->qhead; i < st->qtail; i++)
        free(st->q[i & (st->qcap - 1)].vals);
    free(st->raw);
    free(st->q);
    free(st->und);
    int in_heap = st->in_heap;
    memset(st, 0, sizeof *st);
    st->in_heap = in_heap;
}

/* ---- the heap of threads by the rank of their oldest queued event ---- */
static void heap_down(struct shaper *sh, uint32_t i)
{
    struct hent *h = sh->heap, e = h[i];
    for (;;) {
        uint32_t k = 2 * i + 1;
        if (k >= sh->nheap) break;
        if (k + 1 < sh->nheap && h[k + 1].key < h[k].key) k++;
        if (h[k].key >= e.key) break;
        h[i] = h[k];
        i = k;
    }
    h[i] = e;
}

static int heap_push(struct shaper *sh, uint64_t key, uint32_t th)
{
    if (sh->nheap == sh->heapcap) {
        uint32_t n = sh->heapcap ? sh->heapcap * 2 : 16;
        struct hent *h = realloc(sh->heap, (size_t)n * sizeof *h);
        if (!h) return -1;
        sh->heap = h;
        sh->heapcap = n;
    }
    uint32_t i = sh->nheap++;
    while (i > 0 && sh->heap[(i - 1) / 2].key > key) {
        sh->heap[i] = sh->heap[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    sh->heap[i] = (struct hent){key, th};
    return 0;
}

static void heap_pop(struct shaper *sh)
{
    sh->heap[0] = sh->heap[--sh->nheap];
    if (sh->nheap) heap_down(sh, 0);
}

/* ---- queues ---- */
static inline struct qev *qat(const struct sthr *st, uint64_t pos)
{
    return &st->q[pos & (st->qcap - 1)];
}

/* The oldest queued event can go: its successor is final, or the thread ended. */
static int ready(const struct sthr *st)
{
    if (st->qhead == st->qtail) return 0;
    if (st->ended) return 1;
    uint64_t lim = st->ulo < st->un ? st->und[st->ulo] : st->qtail;
    return st->qhead + 1 < lim;
}

static void out(struct shaper *sh, struct sthr *st, const struct ftr_event *next,
                const struct qev *nq)
{
    struct frp_thread *t = st->t;
    struct qev *q = qat(st, st->qhead);
    const struct ftr_event *ev = &q->ev;
    struct frp_item it = {
        .ev = *ev, .next = next, .thread = t, .vals = q->vals, .vals_len = q->vals_len};
    if (nq) {
        it.next_vals = nq->vals;
        it.next_vals_len = nq->vals_len;
    }
    if (ev->kind == FTR_EV_ENTRY) {
        struct frp_process *p = t->proc;
        uint32_t s = ev->site;
        it.name = s < p->nsites && p->sites[s].s ? p->sites[s] : frp_site_name(sh->r, p, s);
    } else {
        it.name = (struct frp_name){"", 0};
    }
    st->qhead++;
    sh->buffered--;
    sh->s->event(sh->s->ctx, &it);
    free(q->vals);
    q->vals = NULL;
}

/* Passes on, in rank order, every event that can go; beyond GMAX waiting events, forces the
 * oldest one out. */
static void pump(struct shaper *sh)
{
    while (sh->nheap) {
        struct hent *h = &sh->heap[0];
        struct sthr *st = &sh->ts[h->th];
        if (st->qhead == st->qtail) { /* drained (or its queue was cut back): out of the heap */
            st->in_heap = 0;
            if (st->ended) sthr_free(st);
            heap_pop(sh);
            continue;
        }
        uint64_t key = qat(st, st->qhead)->rank;
        if (key != h->key) {
            h->key = key;
            heap_down(sh, 0);
            continue;
        }
        if (!ready(st)) {
            if (sh->buffered <= GMAX) return;
            while (!ready(st) && st->ulo < st->un)
                st->ulo++; /* too much waits: take the oldest undecided call as long enough */
            if (!ready(st)) {
                out(sh, st, &unknown_next, NULL);
                continue;
            }
        }
        const struct qev *nq = st->qhead + 1 < st->qtail ? qat(st, st->qhead + 1) : NULL;
        out(sh, st, nq ? &nq->ev : NULL, nq);
    }
}

static int enqueue(struct shaper *sh, struct sthr *st, const struct frp_item *it)
{
    if (st->qtail - st->qhead == st->qcap) {
        uint32_t n = st->qcap ? st->qcap * 2 : 64;
        struct qev *q = malloc((size_t)n * sizeof *q);
        if (!q) return -1;
        for (uint64_t i = st->qhead; i < st->qtail; i++)
            q[i & (n - 1)] = *qat(st, i);
        free(st->q);
        st->q = q;
        st->qcap = n;
    }
    if (!st->in_heap) {
        if (heap_push(sh, sh->rank, st->t->idx)) return -1;
        st->in_heap = 1;
    }
    uint8_t *vals = NULL;
    if (it->vals_len) {
        if (!(vals = malloc(it->vals_len))) return -1;
        memcpy(vals, it->vals, it->vals_len);
    }
    *qat(st, st->qtail++) = (struct qev){it->ev, sh->rank, vals, vals ? it->vals_len : 0};
    sh->buffered++;
    return 0;
}

/* The counting special before an event it counts that is shown */
static void pass_counted(struct shaper *sh, struct sthr *st, const struct frp_item *it)
{
    struct frp_item sp = *it;
    sp.ev = st->pend;
    sp.ev.arg = 1;
    sp.vals = sp.next_vals = NULL;
    sp.vals_len = sp.next_vals_len = 0;
    if (enqueue(sh, st, &sp)) sh->nomem = 1;
}

static void shape_event(struct shaper *sh, const struct frp_item *it)
{
    struct frp_thread *t = it->thread;
    struct sthr *st = sthread(sh, t);
    if (!st) {
        sh->nomem = 1;
        return;
    }
    sh->rank++;
    const struct ftr_event *ev = &it->ev;
    int in_range = ev->tsc >= st->lo_tsc && ev->tsc <= st->hi_tsc;
    if (st->thr) /* calls open for threshold ticks are long enough */
        while (st->ulo < st->un && ev->tsc - qat(st, st->und[st->ulo])->ev.tsc >= st->thr)
            st->ulo++;
    if (st->ulo == st->un) st->ulo = st->un = 0;

    int counted = st->pend_n &&
                  (ev->kind == (st->pend.site == FTR_SP_SUSPENDED ? FTR_EV_UNWIND : FTR_EV_ENTRY));
    if (counted) st->pend_n--;
    switch (ev->kind) {
    case FTR_EV_ENTRY: {
        const struct frp_opts *o = sh->o;
        int vis = in_range && (!o->max_depth || st->vdepth < o->max_depth) &&
                  site_shown(sh, t->proc, ev->site);
        if (st->rdepth == st->rcap) {
            uint32_t n = st->rcap ? st->rcap * 2 : 64;
            uint8_t *raw = realloc(st->raw, n);
            if (!raw) {
                sh->nomem = 1;
                break;
            }
            st->raw = raw;
            st->rcap = n;
        }
        st->raw[st->rdepth++] = (uint8_t)vis;
        if (!vis) break;
        if (counted) pass_counted(sh, st, it);
        st->vdepth++;
        if (st->thr) {
            if (st->un == st->ucap) {
                uint32_t n = st->ucap ? st->ucap * 2 : 64;
                uint64_t *u = realloc(st->und, (size_t)n * sizeof *u);
                if (!u) {
                    sh->nomem = 1;
                    break;
                }
                st->und = u;
                st->ucap = n;
            }
            st->und[st->un++] = st->qtail;
        }
        if (enqueue(sh, st, it)) sh->nomem = 1;
        break;
    }
    case FTR_EV_EXIT:
    case FTR_EV_UNWIND:
        if (!st->rdepth) { /* no open call: the view counts it */
            if (in_range && enqueue(sh, st, it)) sh->nomem = 1;
            break;
        }
        if (!st->raw[--st->rdepth]) break;
        if (counted) pass_counted(sh, st, it);
        st->vdepth--;
        if (st->ulo < st->un) { /* the call is undecided, so shorter than the threshold */
            uint64_t at = st->und[--st->un];
            sh->buffered -= st->qtail - at;
            for (uint64_t i = at; i < st->qtail; i++) {
                free(qat(st, i)->vals);
                qat(st, i)->vals = NULL;
            }
            st->qtail = at;
            if (st->ulo == st->un) st->ulo = st->un = 0;
            break;
        }
        if (enqueue(sh, st, it)) sh->nomem = 1;
        break;
    default:
        if (ev->kind == FTR_EV_SPECIAL &&
            (ev->site == FTR_SP_INHERITED || ev->site == FTR_SP_SUSPENDED ||
             ev->site == FTR_SP_RESUMED)) {
            st->pend = *ev;
            st->pend_n = ev->arg > UINT32_MAX ? UINT32_MAX : (uint32_t)ev->arg;
            break;
        }
        if (in_range && enqueue(sh, st, it)) sh->nomem = 1;
        break;
    }
    if (!it->next) { /* the thread ends: calls still open never closed, so long enough */
        st->ended = 1;
        st->ulo = st->un = 0;
        if (!st->in_heap) sthr_free(st);
    }
    pump(sh);
}

static void shaper_free(struct shaper *sh)
{
    for (uint32_t i = 0; i < sh->nts; i++)
        sthr_free(&sh->ts[i]);
    free(sh->ts);
    free(sh->heap);
    for (uint32_t i = 0; sh->vis && i < sh->r->nprocs; i++)
        free(sh->vis[i]);
    free(sh->vis);
    free(sh->visn);
}

struct progress {
    const struct frp_opts *o;
    uint64_t done_before, total;
};

static void report_progress(struct progress *pg, const struct frp_merge *m)
{
    uint64_t done, total;
    frp_merge_progress(m, &done, &total);
    pg->o->progress(pg->o->progress_arg, pg->done_before + done, pg->total);
}

static int run_merge(struct frp_report *r, struct frp_process *p, struct shaper *sh,
                     const struct frp_sink *s, struct progress *pg)
{
    struct frp_merge *m;
    int rc = frp_merge_open(r, p, &m);
    if (rc) return rc;
    struct frp_item it;
    int n;
    uint32_t count = 0;
    for (;;) {
        n = frp_merge_next(m, &it);
        if (__builtin_expect(n != 1, 0)) break;
        if (pg->o->no_values) {
            it.vals = it.next_vals = NULL;
            it.vals_len = it.next_vals_len = 0;
        }
        if (sh)
            shape_event(sh, &it);
        else
            s->event(s->ctx, &it);
        if (__builtin_expect((++count & 0xffff) == 0, 0)) {
            if (pg->o->progress) report_progress(pg, m);
            if (s->failed && s->failed(s->ctx)) {
                n = -FTR_E_IO;
                break;
            }
        }
    }
    uint64_t done, total;
    frp_merge_progress(m, &done, &total);
    pg->done_before += done;
    frp_merge_close(m);
    if (n < 0) return -n;
    return sh && sh->nomem ? FTR_E_NOMEM : FTR_OK;
}

int frp_drive(struct frp_report *r, const struct frp_opts *o, const struct frp_sink *s)
{
    static const struct frp_opts defaults;
    if (!o) o = &defaults;
    struct shaper shb = {.r = r, .o = o, .s = s}, *sh = NULL;
    if (frp_shaping(o)) {
        sh = &shb;
        sh->vis = calloc(r->nprocs + 1, sizeof *sh->vis);
        sh->visn = calloc(r->nprocs + 1, sizeof *sh->visn);
        if (!sh->vis || !sh->visn) {
            shaper_free(sh);
            return FTR_E_NOMEM;
        }
    }
    struct progress pg = {o, 0, 0};
    for (uint32_t i = 0; i < r->nthreads; i++)
        if (r->threads[i]->selected) pg.total += r->threads[i]->nchunks;
    int rc = FTR_OK;
    if (s->section) {
        for (uint32_t i = 0; i < r->nprocs && rc == FTR_OK; i++) {
            struct frp_process *p = r->order[i];
            if (!p->selected) continue;
            s->section(s->ctx, p);
            rc = run_merge(r, p, sh, s, &pg);
        }
    } else {
        rc = run_merge(r, NULL, sh, s, &pg);
    }
    if (o->progress && rc == FTR_OK) o->progress(o->progress_arg, pg.total, pg.total);
    if (sh) shaper_free(sh);
    return rc;
}
