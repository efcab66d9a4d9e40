/*
 * tree.c - function ids and the merged call tree.
 *
 * Function ids: every display name gets a dense id (1..), so that the same function seen in
 * several processes (fork, exec) is one row of a summary and one frame of a flame graph. Each
 * process keeps a site -> id array, filled on first sight of a site: one array load per event.
 *
 * The call tree merges every call path: a node per distinct (parent node, function), with the
 * calls, the inclusive and the self time of the calls that took that path. Its size follows
 * the number of distinct paths, not the number of calls. Folded stacks, the flame graph and
 * the call graph are views of it. Calls still open when their thread ends are closed at the
 * thread's last event.
 *
 * As a sink (frp_tree_sink), the tree is handed at the end to the writer of the view that
 * asked for it (folded.c, callgraph.c, flame.c).
 */
#include "tree.h"

#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- function ids ---- */

void frp_funcs_init(struct frp_funcs *fs, struct frp_report *r)
{
    memset(fs, 0, sizeof *fs);
    fs->r = r;
    fs->n = 1;
}

void frp_funcs_free(struct frp_funcs *fs)
{
    for (uint32_t i = 0; i < fs->nprocs; i++)
        free(fs->site_ids[i]);
    free(fs->site_ids);
    free(fs->site_ids_n);
    free(fs->names);
    free(fs->rep_proc);
    free(fs->rep_site);
    free(fs->chain);
    frp_hmap_free(&fs->by_name);
    memset(fs, 0, sizeof *fs);
}

uint32_t frp_funcs_intern(struct frp_funcs *fs, struct frp_name name, const struct frp_process *p,
                          uint32_t site)
{
    uint64_t h = frp_hash_str(name.s, name.len);
    uint32_t *first = frp_hmap_get(&fs->by_name, h);
    for (uint32_t id = first ? *first : 0; id; id = fs->chain[id])
        if (fs->names[id].len == name.len && memcmp(fs->names[id].s, name.s, name.len) == 0)
            return id;
    size_t cap = fs->cap;
    if (fs->n + 1 > cap) {
        size_t c = cap;
        if (frp_grow((void **)&fs->names, &c, fs->n + 1, sizeof *fs->names)) return 0;
        c = cap;
        if (frp_grow((void **)&fs->rep_proc, &c, fs->n + 1, sizeof *fs->rep_proc)) return 0;
        c = cap;
        if (frp_grow((void **)&fs->rep_site, &c, fs->n + 1, sizeof *fs->rep_site)) return 0;
        c = cap;
        if (frp_grow((void **)&fs->chain, &c, fs->n + 1, sizeof *fs->chain)) return 0;
        fs->cap = c;
    }
    uint32_t id = fs->n;
    if (frp_hmap_put(&fs->by_name, h, id)) return 0;
    fs->names[id] = name;
    fs->rep_proc[id] = p;
    fs->rep_site[id] = site;
    fs->chain[id] = first ? *first : 0; /* first was read before the put: still the old head */
    fs->n++;
    return id;
}

uint32_t frp_funcs_slow(struct frp_funcs *fs, const struct frp_item *it)
{
    struct frp_process *p = it->thread->proc;
    uint32_t pi = p->idx, site = it->ev.site;
    struct frp_name name = it->name;
    if (!name.s) name = frp_site_name(fs->r, p, site);
    uint32_t id = frp_funcs_intern(fs, name, p, site);
    if (!id || site >= FRP_SITE_LIMIT) return id; /* a corrupt site: no table grows for it */
    if (pi >= fs->nprocs) {
        uint32_t n = fs->r->nprocs > pi ? fs->r->nprocs : pi + 1;
        uint32_t **a = realloc(fs->site_ids, (size_t)n * sizeof *a);
        if (!a) return id;
        fs->site_ids = a;
        uint32_t *b = realloc(fs->site_ids_n, (size_t)n * sizeof *b);
        if (!b) return id;
        fs->site_ids_n = b;
        for (uint32_t i = fs->nprocs; i < n; i++) {
            fs->site_ids[i] = NULL;
            fs->site_ids_n[i] = 0;
        }
        fs->nprocs = n;
    }
    if (site >= fs->site_ids_n[pi]) {
        uint32_t n = fs->site_ids_n[pi] ? fs->site_ids_n[pi] : 256;
        while (n <= site)
            n *= 2;
        uint32_t *a = realloc(fs->site_ids[pi], (size_t)n * sizeof *a);
        if (!a) return id;
        memset(a + fs->site_ids_n[pi], 0, (size_t)(n - fs->site_ids_n[pi]) * sizeof *a);
        fs->site_ids[pi] = a;
        fs->site_ids_n[pi] = n;
    }
    fs->site_ids[pi][site] = id;
    return id;
}

/* ---- the call tree ---- */

struct tframe {
    uint32_t node;
    uint32_t site;
    uint64_t tsc;
    uint64_t child_ns;
    int cont; /* a frame entered again (a resumed coroutine, a fork child's): no new call */
};

struct frp_tstack {
    struct tframe *f;
    uint32_t depth, cap;
    uint64_t last_tsc;
    uint32_t cont_left; /* entries still to come that re-enter frames */
};

static uint32_t new_node(struct frp_tree *t, uint32_t parent, uint32_t func)
{
    if (frp_grow((void **)&t->nodes, &t->cap, (size_t)t->n + 1, sizeof *t->nodes)) return 0;
    uint32_t i = t->n++;
    struct frp_tnode *nd = &t->nodes[i];
    memset(nd, 0, sizeof *nd);
    nd->func = func;
    nd->parent = parent;
    if (i) {
        struct frp_tnode *pa = &t->nodes[parent];
        nd->depth = pa->depth + 1;
        if (pa->last)
            t->nodes[pa->last].sibling = i;
        else
            pa->child = i;
        pa->last = i;
        if (frp_hmap_put(&t->kids, (uint64_t)parent << 32 | func, i)) return 0;
    }
    return i;
}

static inline uint32_t child_of(struct frp_tree *t, uint32_t parent, uint32_t func)
{
    uint32_t h = t->nodes[parent].hint; /* the child met last: loops call the same again */
    if (h && t->nodes[h].func == func) return h;
    uint32_t *v = frp_hmap_get(&t->kids, (uint64_t)parent << 32 | func);
    uint32_t c = v ? *v : new_node(t, parent, func);
    if (c) t->nodes[parent].hint = c;
    return c;
}

int frp_tree_init(struct frp_tree *t, struct frp_report *r, int per_thread)
{
    memset(t, 0, sizeof *t);
    frp_funcs_init(&t->funcs, r);
    t->per_thread = per_thread;
    return new_node(t, 0, 0) == 0 && t->n == 1 ? FTR_OK : FTR_E_NOMEM;
}

void frp_tree_free(struct frp_tree *t)
{
    for (uint32_t i = 0; i < t->nts; i++)
        free(t->ts[i].f);
    free(t->ts);
    free(t->nodes);
    frp_hmap_free(&t->kids);
    frp_funcs_free(&t->funcs);
    memset(t, 0, sizeof *t);
}

static struct frp_tstack *tstack(struct frp_tree *t, const struct frp_thread *th)
{
    if (__builtin_expect(th->idx >= t->nts, 0)) {
        uint32_t n = t->nts ? t->nts : 16;
        while (n <= th->idx)
            n *= 2;
        struct frp_tstack *ts = realloc(t->ts, (size_t)n * sizeof *ts);
        if (!ts) return NULL;
        memset(ts + t->nts, 0, (size_t)(n - t->nts) * sizeof *ts);
        t->ts = ts;
        t->nts = n;
    }
    return &t->ts[th->idx];
}

/* The node the thread's calls hang from: the root, or the thread's own frame. */
static uint32_t thread_root(struct frp_tree *t, const struct frp_thread *th)
{
    if (!t->per_thread) return 0;
    char tmp[64];
    int n = snprintf(tmp, sizeof tmp, "%.31s-%u",
                     th->name ? th->name : frp_module_file(th->proc->exe ? th->proc->exe : "?"),
                     th->tid);
    const char *s = frp_report_strdup(t->funcs.r, tmp, (size_t)n);
    if (!s) return 0;
    uint32_t f = frp_funcs_intern(&t->funcs, (struct frp_name){s, (uint32_t)n}, NULL, 0);
    return f ? child_of(t, 0, f) : 0;
}

/* Closes the top frame of s at tsc. */
static void close_frame(struct frp_tree *t, struct frp_tstack *s, uint64_t tsc,
                        const struct frp_process *p)
{
    struct tframe *f = &s->f[--s->depth];
    uint64_t ns = frp_proc_ns(p, tsc >= f->tsc ? tsc - f->tsc : 0);
    struct frp_tnode *nd = &t->nodes[f->node];
    nd->calls += !f->cont;
    nd->total_ns += ns;
    nd->self_ns += ns > f->child_ns ? ns - f->child_ns : 0;
    if (s->depth) s->f[s->depth - 1].child_ns += ns;
}

void frp_tree_event(struct frp_tree *t, const struct frp_item *it)
{
    const struct ftr_event *ev = &it->ev;
    struct frp_tstack *s = tstack(t, it->thread);
    if (__builtin_expect(!s, 0)) {
        t->nomem = 1;
        return;
    }
    t->stats.events++;
    s->last_tsc = ev->tsc;
    switch (ev->kind) {
    case FTR_EV_ENTRY: {
        if (s->depth + 2 > s->cap) {
            uint32_t n = s->cap ? s->cap * 2 : 64;
            struct tframe *f = realloc(s->f, (size_t)n * sizeof *f);
            if (!f) {
                t->nomem = 1;
                break;
            }
            s->f = f;
            s->cap = n;
        }
        if (t->per_thread && !s->depth) { /* the thread's frame, at the bottom until its end */
            uint32_t root = thread_root(t, it->thread);
            if (!root) {
                t->nomem = 1;
                break;
            }
            s->f[s->depth++] = (struct tframe){root, UINT32_MAX, ev->tsc, 0, 0};
        }
        uint32_t parent = s->depth ? s->f[s->depth - 1].node : 0;
        uint32_t func = frp_funcs_id(&t->funcs, it);
        uint32_t node = func ? child_of(t, parent, func) : 0;
        if (!node) {
            t->nomem = 1;
            break;
        }
        s->f[s->depth++] = (struct tframe){node, ev->site, ev->tsc, 0, s->cont_left > 0};
        s->cont_left -= s->cont_left > 0;
        break;
    }
    case FTR_EV_EXIT:
    case FTR_EV_UNWIND: {
        uint32_t bottom = t->per_thread ? 1 : 0;
        if (s->depth <= bottom) {
            t->stats.unmatched++;
            break;
        }
        if (s->f[s->depth - 1].site != ev->site) t->stats.mismatched++;
        close_frame(t, s, ev->tsc, it->thread->proc);
        break;
    }
    default:
        if (ev->site == FTR_SP_LOST) t->stats.lost += ev->arg;
        if (ev->site == FTR_SP_RESUMED || ev->site == FTR_SP_INHERITED)
            s->cont_left = (uint32_t)ev->arg;
        break;
    }
    if (!it->next) { /* the thread ends: close what is open, the thread frame last */
        while (s->depth)
            close_frame(t, s, s->last_tsc, it->thread->proc);
        free(s->f);
        memset(s, 0, sizeof *s);
    }
}

/* ---- the tree as a sink of the pipeline, written by one of its views at the end ---- */
struct tree_sink {
    struct frp_tree t;
    frp_tree_writer *write;
    const struct frp_opts *o;
    FILE *out;
};

static void sink_event(void *ctx, const struct frp_item *it)
{
    frp_tree_event(&((struct tree_sink *)ctx)->t, it);
}

static int sink_end(void *ctx, int rc, struct frp_stats *st)
{
    struct tree_sink *ts = ctx;
    struct frp_tree *t = &ts->t;
    if (rc == FTR_OK && t->nomem) rc = FTR_E_NOMEM;
    /* the root's time: what its children took */
    struct frp_tnode *root = &t->nodes[0];
    root->total_ns = root->calls = 0;
    for (uint32_t c = root->child; c; c = t->nodes[c].sibling) {
        root->total_ns += t->nodes[c].total_ns;
        root->calls += t->nodes[c].calls;
    }
    *st = t->stats;
    if (rc == FTR_OK) {
        int w = ts->write(t, ts->o, ts->out);
        if (w < 0) rc = errno == ENOMEM ? FTR_E_NOMEM : frp_write_failed(st);
        if (w == 1) rc = FTR_E_EMPTY;
    }
    frp_tree_free(t);
    free(ts);
    return rc;
}

int frp_tree_sink(struct frp_report *r, const struct frp_opts *o, int per_thread,
                  frp_tree_writer *write, FILE *out, struct frp_sink *s)
{
    struct tree_sink *ts = calloc(1, sizeof *ts);
    if (!ts) return FTR_E_NOMEM;
    if (frp_tree_init(&ts->t, r, per_thread)) {
        frp_tree_free(&ts->t);
        free(ts);
        return FTR_E_NOMEM;
    }
    ts->write = write;
    ts->o = o;
    ts->out = out;
    *s = (struct frp_sink){ts, NULL, sink_event, NULL, sink_end};
    return FTR_OK;
}
