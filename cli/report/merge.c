/*
 * merge.c - the streaming merge of a trace's threads by time.
 *
 * The merge walks every selected thread's chunks with one cursor per thread (one decompressed
 * chunk and one event of lookahead each), merged by tsc with a binary heap. A cursor is opened
 * when the merge time reaches its thread's first chunk and released when the thread is done,
 * so memory follows the number of threads alive at a time, not the size of the trace.
 *
 * Value lists (formats/ftr_values.h: VALUES events and their bytes) leave the stream here: the
 * arguments that follow an ENTRY and the return value that comes before an EXIT ride on that
 * event's item (frp_item.vals), so that the views see calls only, each with its values.
 *
 * A process's marks (what ftrace-ctl changed, process-wide) join the stream at their time as
 * SPECIAL events (FRP_SP_MARK) of one of its selected threads: its main thread if it is among
 * them, so that the views show each mark once, in a thread's flow, without knowing of marks.
 *
 * No thread nests deeper than a trace can (FTR_DEPTH_MAX, docs/format.md "Nesting"; the
 * report's depth_max): a deeper ENTRY of a damaged or forged file is counted with its EXIT or
 * UNWIND and left out, and one SPECIAL event (FRP_SP_DEEP) stands for the calls of each such
 * stretch. So every view keeps at most depth_max frames a thread, whatever the input.
 */
#define _GNU_SOURCE /* qsort_r */
#include "merge.h"

#include "ftr_values.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* A value list as read, for one event */
struct vlist {
    uint32_t site, len;
    uint8_t b[FTR_VALUES_MAX_BYTES];
};

struct cursor {
    struct frp_thread *th;
    uint32_t ci, cend;  /* next chunk to load, end of the thread's chunks */
    uint32_t chunk_seq; /* seq of the chunk being decoded */
    int live;
    int aside; /* an ASIDE special was read: the thread's events end there */
    struct ftr_ev_iter it;
    struct ftr_buf buf;
    struct ftr_event cur, nxt;
    uint32_t cur_seq, nxt_seq;
    int has_nxt;
    struct vlist cur_v, nxt_v; /* the values of cur and nxt */
    struct vlist ret;          /* a return value waiting for its EXIT */
    struct ftr_event back;     /* an event read ahead and put back (has_back) */
    uint32_t back_seq;
    int has_back;
    uint64_t floor;      /* the thread's latest tsc: its times never go back (see fetch) */
    uint64_t depth;      /* calls open: those past depth_max are left out */
    uint64_t depth_max;  /* the report's (here for the hot path) */
    uint64_t deep_calls; /* calls left out since the last FRP_SP_DEEP */
    uint64_t deep_tsc;   /* the time of the last event left out, and its chunk's seq */
    uint32_t deep_seq;
    struct cursor *free_next;
};

struct mmark {
    uint64_t tsc;
    struct frp_thread *host; /* the thread that shows it */
    uint32_t idx;            /* in host->proc->marks */
};

/* The successor of a mark whose thread has no event waiting in the merge (not started, or
 * done): a special event no view takes for an exit, nor for the end of the thread. */
static const struct ftr_event mark_unknown_next = {0, UINT32_MAX, FTR_EV_SPECIAL, 0};

struct frp_merge {
    struct frp_report *r;
    struct mmark *marks; /* of the merged processes, in time order */
    uint32_t nmarks, imark;
    struct frp_thread **pend; /* threads not yet opened, by first chunk */
    uint32_t npend, ipend;
    struct cursor **heap;
    uint32_t nheap;
    struct cursor *last; /* emitted by the previous call: advanced at the next */
    struct cursor *freelist;
    int err;
    uint64_t done, total; /* EVENTS chunks taken, of all the selected threads' */
    uint32_t depth_max;   /* the report's: calls nested deeper are left out */
};

static int load_chunk(struct frp_merge *m, struct cursor *c, const struct frp_chunk *ch)
{
    struct ftr_reader *rd = frp_report_reader(m->r);
    struct ftr_chunk_hdr h;
    uint64_t off;
    m->done++;
    int rc = ftr_reader_seek(rd, ch->offset);
    if (rc == FTR_OK) rc = ftr_reader_next(rd, &h, &off);
    if (rc == FTR_E_IO || rc == FTR_E_NOMEM) return -rc;
    if (rc || off != ch->offset || h.type != FTR_CHUNK_EVENTS) {
        m->r->bad_events++;
        return 0;
    }
    rc = ftr_reader_payload(rd, &c->buf);
    if (rc == FTR_E_CORRUPT || rc == FTR_E_ZSTD || rc == FTR_E_TRUNCATED)
        return 0; /* counted by the reader */
    if (rc) return -rc;
    if (ftr_dec_events_begin(&h, c->buf.data, c->buf.len, &c->it)) {
        m->r->bad_events++;
        return 0;
    }
    c->live = 1;
    c->chunk_seq = ch->seq;
    return 1;
}

/* The thread's next event: 1, 0 at its end, or a negated error. */
static int fetch(struct frp_merge *m, struct cursor *c, struct ftr_event *ev, uint32_t *seq)
{
    if (__builtin_expect(c->aside, 0)) return 0;
    for (;;) {
        if (__builtin_expect(c->live, 1)) {
            int rc = ftr_dec_events_next(&c->it, ev);
            if (__builtin_expect(rc == 1, 1)) {
                /* the tracer stepped aside: what follows are hooks it interrupted, finishing
                 * with a stale view of the thread's frames (docs/format.md) */
                if (__builtin_expect(ev->kind == FTR_EV_SPECIAL && ev->site == FTR_SP_ASIDE, 0))
                    c->aside = 1;
                /* A piece may start before the end of the one before it in time (report.c,
                 * order_pieces): held back like the writer does inside a chunk. */
                if (__builtin_expect(ev->tsc < c->floor, 0)) ev->tsc = c->floor;
                c->floor = ev->tsc;
                *seq = c->chunk_seq;
                return 1;
            }
            c->live = 0;
            if (rc < 0) m->r->bad_events++;
        }
        if (c->ci >= c->cend) return 0;
        int rc = load_chunk(m, c, &m->r->chunks[c->ci++]);
        if (rc < 0) return rc;
    }
}

static int fetch_back(struct frp_merge *m, struct cursor *c, struct ftr_event *ev, uint32_t *seq)
{
    if (c->has_back) {
        c->has_back = 0;
        *ev = c->back;
        *seq = c->back_seq;
        return 1;
    }
    return fetch(m, c, ev, seq);
}

static void put_back(struct cursor *c, const struct ftr_event *ev, uint32_t seq)
{
    c->back = *ev;
    c->back_seq = seq;
    c->has_back = 1;
}

static int is_special(const struct ftr_event *ev, unsigned sub)
{
    return ev->kind == FTR_EV_SPECIAL && ev->site == sub;
}

/* The list of the VALUES event just fetched (arg its arg) into v: its bytes are the decoder's
 * (into the chunk being read), copied before anything else is decoded. @return 1 */
static int read_list(const struct cursor *c, uint64_t arg, struct vlist *v)
{
    v->site = (uint32_t)arg & FTR_VALUES_SITE_MASK;
    v->len = c->it.vals && c->it.vals_len <= sizeof v->b ? c->it.vals_len : 0;
    if (v->len) memcpy(v->b, c->it.vals, v->len);
    return 1;
}

/* The thread's next call event (or special other than values), with its values in *v.
 * @return 1: a call within the depth kept (c->depth follows it); 2: a special, an ENTRY past
 * depth_max (counted in c->depth) or the EXIT or UNWIND of such a call (not yet): fetch_kept()
 * sees to those; 0 at the thread's end; or a negated error. */
static int fetch_call(struct frp_merge *m, struct cursor *c, struct ftr_event *ev, uint32_t *seq,
                      struct vlist *v)
{
    v->len = 0;
    for (;;) {
        int rc = fetch_back(m, c, ev, seq);
        if (rc <= 0) return rc;
        if (is_special(ev, FTR_SP_VALUES)) {
            /* not after an ENTRY: a return value, whose EXIT comes next */
            if ((rc = read_list(c, ev->arg, &c->ret)) < 0) return rc;
            if (c->ret.len && (c->ret.b[1] & ~FTR_VAL_DWARF) != 0)
                c->ret.len = 0; /* arguments of a lost ENTRY */
            continue;
        }
        break;
    }
    if (ev->kind == FTR_EV_ENTRY) {
        struct ftr_event a;
        uint32_t aseq;
        int rc = fetch_back(m, c, &a, &aseq);
        if (rc < 0) return rc;
        if (rc == 1 && is_special(&a, FTR_SP_VALUES) &&
            ((uint32_t)a.arg & FTR_VALUES_SITE_MASK) == (ev->site & FTR_VALUES_SITE_MASK)) {
            if ((rc = read_list(c, a.arg, v)) < 0) return rc;
            if (v->len && (v->b[1] & ~FTR_VAL_DWARF) == 0) { /* a leaf's return value */
                c->ret = *v;
                v->len = 0;
            }
        } else if (rc == 1) {
            put_back(c, &a, aseq);
        }
        return c->depth++ < c->depth_max ? 1 : 2;
    }
    if (__builtin_expect(ev->kind == FTR_EV_SPECIAL, 0)) return 2;
    if (ev->kind == FTR_EV_EXIT && c->ret.len && c->ret.site == ev->site) {
        *v = c->ret;
        c->ret.len = 0;
    }
    if (__builtin_expect(c->depth > c->depth_max, 0)) return 2;
    c->depth -= c->depth > 0; /* none open: the views count it as unmatched */
    return 1;
}

/* The FRP_SP_DEEP event that stands for the calls left out since the last one. @return 1 */
static int deep_note(struct frp_merge *m, struct cursor *c, struct ftr_event *ev, uint32_t *seq,
                     struct vlist *v)
{
    *ev = (struct ftr_event){c->deep_tsc, FRP_SP_DEEP, FTR_EV_SPECIAL, c->deep_calls};
    *seq = c->deep_seq;
    v->len = 0;
    m->r->deep_calls += c->deep_calls;
    c->deep_calls = 0;
    return 1;
}

/* fetch_kept()'s way with what fetch_call() returned, rc and *ev, when it is not a call within
 * the depth kept: the end, a special, or a call past depth_max, and then what follows. */
__attribute__((noinline)) static int fetch_kept_slow(struct frp_merge *m, struct cursor *c,
                                                     struct ftr_event *ev, uint32_t *seq,
                                                     struct vlist *v, int rc)
{
    for (;; rc = fetch_call(m, c, ev, seq, v)) {
        if (rc <= 0) return rc == 0 && c->deep_calls ? deep_note(m, c, ev, seq, v) : rc;
        if (rc == 1) return 1;
        uint64_t deep = c->depth > m->depth_max ? c->depth - m->depth_max : 0;
        if (ev->kind == FTR_EV_SPECIAL) {
            if (ev->site == FTR_SP_INHERITED || ev->site == FTR_SP_RESUMED) {
                /* the entries that will be kept */
                uint64_t room = deep ? 0 : m->depth_max - c->depth;
                if (ev->arg > room) ev->arg = room;
            } else if (ev->site == FTR_SP_SUSPENDED) { /* the first unwinds leave deep frames */
                ev->arg -= ev->arg < deep ? ev->arg : deep;
            }
            return 1;
        }
        c->deep_tsc = ev->tsc;
        c->deep_seq = *seq;
        if (ev->kind == FTR_EV_ENTRY) { /* past depth_max (counted in depth) */
            c->deep_calls++;
        } else if (--c->depth == m->depth_max) { /* back at the depth kept */
            return deep_note(m, c, ev, seq, v);
        }
    }
}

/* The thread's next event within the depth kept: fetch_call()'s, but for the calls nested
 * deeper than depth_max, which are counted and left out, and an FRP_SP_DEEP for them where the
 * thread comes back to the depth kept or its events end. The specials that count the ENTRY
 * (UNWIND) events to come count those passed on. */
static inline int fetch_kept(struct frp_merge *m, struct cursor *c, struct ftr_event *ev,
                             uint32_t *seq, struct vlist *v)
{
    int rc = fetch_call(m, c, ev, seq, v);
    return __builtin_expect(rc == 1, 1) ? 1 : fetch_kept_slow(m, c, ev, seq, v, rc);
}

static inline int before(const struct cursor *a, const struct cursor *b)
{
    return a->cur.tsc < b->cur.tsc || (a->cur.tsc == b->cur.tsc && a->cur_seq < b->cur_seq);
}

static void sift_down(struct frp_merge *m, uint32_t i)
{
    struct cursor **h = m->heap, *c = h[i];
    for (;;) {
        uint32_t k = 2 * i + 1;
        if (k >= m->nheap) break;
        if (k + 1 < m->nheap && before(h[k + 1], h[k])) k++;
        if (!before(h[k], c)) break;
        h[i] = h[k];
        i = k;
    }
    h[i] = c;
}

static void sift_up(struct frp_merge *m, uint32_t i)
{
    struct cursor **h = m->heap, *c = h[i];
    while (i > 0 && before(c, h[(i - 1) / 2])) {
        h[i] = h[(i - 1) / 2];
        i = (i - 1) / 2;
    }
    h[i] = c;
}

static void release(struct frp_merge *m, struct cursor *c)
{
    c->free_next = m->freelist;
    m->freelist = c;
}

static int open_cursor(struct frp_merge *m, struct frp_thread *t)
{
    struct cursor *c = m->freelist;
    if (c) {
        m->freelist = c->free_next;
    } else if (!(c = calloc(1, sizeof *c))) {
        return -FTR_E_NOMEM;
    }
    c->th = t;
    c->ci = t->first_chunk;
    c->cend = t->first_chunk + t->nchunks;
    c->live = 0;
    c->floor = 0;
    c->has_back = 0;
    c->ret.len = 0;
    c->depth = c->deep_calls = 0;
    c->depth_max = m->depth_max;
    int rc = fetch_kept(m, c, &c->cur, &c->cur_seq, &c->cur_v);
    if (rc <= 0) {
        release(m, c);
        return rc;
    }
    rc = fetch_kept(m, c, &c->nxt, &c->nxt_seq, &c->nxt_v);
    c->has_nxt = rc == 1;
    if (rc < 0) {
        release(m, c);
        return rc;
    }
    m->heap[m->nheap++] = c;
    sift_up(m, m->nheap - 1);
    return 0;
}

static int cmp_pend(const void *a, const void *b, void *arg)
{
    const struct frp_chunk *ch = arg;
    const struct frp_chunk *x = &ch[(*(struct frp_thread *const *)a)->first_chunk];
    const struct frp_chunk *y = &ch[(*(struct frp_thread *const *)b)->first_chunk];
    if (x->tsc_first != y->tsc_first) return x->tsc_first < y->tsc_first ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_mmark(const void *a, const void *b)
{
    const struct mmark *x = a, *y = b;
    if (x->tsc != y->tsc) return x->tsc < y->tsc ? -1 : 1;
    if (x->host->proc != y->host->proc) return x->host->proc->idx < y->host->proc->idx ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

/* The marks of the processes merged, each on its host thread (none selected: not shown). */
static int open_marks(struct frp_merge *m, struct frp_process *only)
{
    struct frp_report *r = m->r;
    size_t n = 0;
    for (uint32_t i = 0; i < r->nprocs; i++)
        if (!only || r->procs[i] == only) n += r->procs[i]->nmarks;
    if (!n) return FTR_OK;
    m->marks = malloc(n * sizeof *m->marks);
    if (!m->marks) return FTR_E_NOMEM;
    for (uint32_t i = 0; i < r->nprocs; i++) {
        struct frp_process *p = r->procs[i];
        if ((only && p != only) || !p->nmarks) continue;
        struct frp_thread *host = NULL;
        for (uint32_t k = 0; k < r->nthreads; k++) {
            struct frp_thread *t = r->threads[k];
            if (t->proc != p || !t->selected || !t->nchunks) continue;
            if (!host || (t->tid == p->pid && host->tid != p->pid)) host = t;
        }
        for (uint32_t k = 0; host && k < p->nmarks; k++)
            m->marks[m->nmarks++] = (struct mmark){p->marks[k].tsc, host, k};
    }
    if (m->nmarks > 1) qsort(m->marks, m->nmarks, sizeof *m->marks, cmp_mmark);
    return FTR_OK;
}

/* The next mark, when it comes before every event still to merge. */
static int next_mark(struct frp_merge *m, struct frp_item *it)
{
    if (m->imark >= m->nmarks) return 0;
    const struct mmark *k = &m->marks[m->imark];
    if (m->nheap && k->tsc > m->heap[0]->cur.tsc) return 0;
    m->imark++;
    it->ev = (struct ftr_event){k->tsc, FRP_SP_MARK, FTR_EV_SPECIAL, k->idx};
    it->next = &mark_unknown_next;
    for (uint32_t i = 0; i < m->nheap; i++)
        if (m->heap[i]->th == k->host) it->next = &m->heap[i]->cur;
    it->thread = k->host;
    it->vals = NULL;
    it->vals_len = 0;
    it->name = (struct frp_name){"", 0};
    return 1;
}

int frp_merge_open(struct frp_report *r, struct frp_process *p, struct frp_merge **out)
{
    *out = NULL;
    struct frp_merge *m = calloc(1, sizeof *m);
    if (!m) return FTR_E_NOMEM;
    m->r = r;
    m->depth_max = r->depth_max ? r->depth_max : FTR_DEPTH_MAX;
    m->pend = malloc((r->nthreads + 1) * sizeof *m->pend);
    m->heap = malloc((r->nthreads + 1) * sizeof *m->heap);
    if (!m->pend || !m->heap) {
        frp_merge_close(m);
        return FTR_E_NOMEM;
    }
    for (uint32_t i = 0; i < r->nthreads; i++) {
        struct frp_thread *t = r->threads[i];
        if (t->selected && t->nchunks && (!p || t->proc == p)) {
            m->pend[m->npend++] = t;
            m->total += t->nchunks;
        }
    }
    qsort_r(m->pend, m->npend, sizeof *m->pend, cmp_pend, r->chunks);
    if (open_marks(m, p)) {
        frp_merge_close(m);
        return FTR_E_NOMEM;
    }
    *out = m;
    return FTR_OK;
}

int frp_merge_next(struct frp_merge *m, struct frp_item *it)
{
    if (__builtin_expect(m->err != 0, 0)) return -m->err;
    struct cursor *c = m->last;
    if (c) { /* advance the thread emitted last: it is still the heap's top */
        m->last = NULL;
        if (!c->has_nxt) {
            m->heap[0] = m->heap[--m->nheap];
            if (m->nheap) sift_down(m, 0);
            release(m, c);
        } else {
            c->cur = c->nxt;
            c->cur_seq = c->nxt_seq;
            c->cur_v.len = c->nxt_v.len;
            if (c->nxt_v.len) {
                c->cur_v.site = c->nxt_v.site;
                memcpy(c->cur_v.b, c->nxt_v.b, c->nxt_v.len);
            }
            int rc = fetch_kept(m, c, &c->nxt, &c->nxt_seq, &c->nxt_v);
            c->has_nxt = rc == 1;
            if (rc < 0) return -(m->err = -rc);
            if (m->nheap > 1) sift_down(m, 0);
        }
    }
    while (m->ipend < m->npend) {
        struct frp_thread *t = m->pend[m->ipend];
        const struct frp_chunk *ch = &m->r->chunks[t->first_chunk];
        if (m->nheap) {
            const struct cursor *top = m->heap[0];
            if (ch->tsc_first > top->cur.tsc ||
                (ch->tsc_first == top->cur.tsc && ch->seq > top->cur_seq))
                break;
        }
        m->ipend++;
        int rc = open_cursor(m, t);
        if (rc < 0) return -(m->err = -rc);
    }
    if (next_mark(m, it)) return 1; /* m->last stays NULL: no thread moved */
    if (!m->nheap) return 0;
    c = m->heap[0];
    it->ev = c->cur;
    it->next = c->has_nxt ? &c->nxt : NULL;
    it->thread = c->th;
    it->vals = c->cur_v.len ? c->cur_v.b : NULL;
    it->vals_len = c->cur_v.len;
    it->next_vals = c->has_nxt && c->nxt_v.len ? c->nxt_v.b : NULL;
    it->next_vals_len = it->next_vals ? c->nxt_v.len : 0;
    if (c->cur.kind == FTR_EV_ENTRY) {
        struct frp_process *p = c->th->proc;
        uint32_t s = c->cur.site;
        it->name = s < p->nsites && p->sites[s].s ? p->sites[s] : frp_site_name(m->r, p, s);
    } else {
        it->name = (struct frp_name){"", 0};
    }
    m->last = c;
    return 1;
}

void frp_merge_progress(const struct frp_merge *m, uint64_t *done, uint64_t *total)
{
    *done = m->done;
    *total = m->total;
}

void frp_merge_close(struct frp_merge *m)
{
    if (!m) return;
    for (uint32_t i = 0; i < m->nheap; i++)
        release(m, m->heap[i]);
    while (m->freelist) {
        struct cursor *c = m->freelist;
        m->freelist = c->free_next;
        ftr_buf_free(&c->buf);
        free(c);
    }
    free(m->pend);
    free(m->heap);
    free(m->marks);
    free(m);
}
