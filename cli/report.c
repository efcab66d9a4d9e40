/*
 * report.c - loading a trace file into tables, and the streaming merge of its threads.
 *
 * Loading is one pass over the chunk headers: metadata chunks (PROCESS, MODULE, SITES, THREAD,
 * END) are decompressed and decoded into tables; EVENTS chunks are only indexed. The merge then
 * walks every selected thread's chunks with one cursor per thread (one decompressed chunk and
 * one event of lookahead each), merged by tsc with a binary heap. A cursor is opened when the
 * merge time reaches its thread's first chunk and released when the thread is done, so memory
 * follows the number of threads alive at a time, not the size of the trace.
 */
#define _GNU_SOURCE /* qsort_r */
#include "report.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* ---- string arena: names live as long as the report ---- */
struct arena_blk {
    struct arena_blk *next;
    size_t used, cap;
    char data[];
};

/* ---- open-addressing map uint64 -> uint32 ---- */
struct hmap {
    uint64_t *keys; /* key + 1; 0 = empty slot */
    uint32_t *vals;
    size_t cap, n;
};

struct frp_report_priv {
    struct ftr_reader *rd;
    struct arena_blk *arena;
    struct hmap pids; /* pid -> idx of its current process instance */
    struct hmap tids; /* proc idx << 32 | tid -> thread idx */
    size_t procs_cap, threads_cap, chunks_cap;
    struct ftr_buf payload;
    struct ftr_site_info *sitebuf;
    size_t sitebuf_cap;
    int truncated;
};

static char *arena_alloc(struct frp_report_priv *pv, size_t n)
{
    struct arena_blk *b = pv->arena;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->cap = cap;
        b->used = 0;
        if (n > 65536 / 4 && pv->arena) { /* big string: keep filling the current block */
            b->next = pv->arena->next;
            pv->arena->next = b;
        } else {
            b->next = pv->arena;
            pv->arena = b;
        }
    }
    char *p = b->data + b->used;
    b->used += n;
    return p;
}

static const char *arena_str(struct frp_report_priv *pv, const char *s, size_t n)
{
    char *p = arena_alloc(pv, n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    frp_sanitize(p, n);
    return p;
}

static void arena_free(struct frp_report_priv *pv)
{
    while (pv->arena) {
        struct arena_blk *b = pv->arena;
        pv->arena = b->next;
        free(b);
    }
}

static uint64_t hash64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

static uint32_t *hmap_get(const struct hmap *m, uint64_t key)
{
    if (!m->cap) return NULL;
    for (size_t i = hash64(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key + 1) return &m->vals[i];
        if (!m->keys[i]) return NULL;
    }
}

static int hmap_put(struct hmap *m, uint64_t key, uint32_t val)
{
    uint32_t *v = hmap_get(m, key);
    if (v) {
        *v = val;
        return FTR_OK;
    }
    if ((m->n + 1) * 2 > m->cap) {
        struct hmap g = {.cap = m->cap ? m->cap * 2 : 64};
        g.keys = calloc(g.cap, sizeof *g.keys);
        g.vals = malloc(g.cap * sizeof *g.vals);
        if (!g.keys || !g.vals) {
            free(g.keys);
            free(g.vals);
            return FTR_E_NOMEM;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) hmap_put(&g, m->keys[i] - 1, m->vals[i]);
        free(m->keys);
        free(m->vals);
        *m = g;
    }
    size_t i = hash64(key) & (m->cap - 1);
    while (m->keys[i])
        i = (i + 1) & (m->cap - 1);
    m->keys[i] = key + 1;
    m->vals[i] = val;
    m->n++;
    return FTR_OK;
}

static void hmap_free(struct hmap *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

static int grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return FTR_OK;
    size_t n = *cap ? *cap * 2 : 16;
    while (n < need)
        n *= 2;
    void *p = realloc(*arr, n * elem);
    if (!p) return FTR_E_NOMEM;
    *arr = p;
    *cap = n;
    return FTR_OK;
}

/* ---- tables ---- */
static struct frp_process *new_proc(struct frp_report *r, uint32_t pid)
{
    struct frp_report_priv *pv = r->priv;
    if (grow((void **)&r->procs, &pv->procs_cap, r->nprocs + 1, sizeof *r->procs)) return NULL;
    struct frp_process *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->idx = r->nprocs;
    p->pid = pid;
    p->cmdline = "(no process record)";
    p->first_tsc = UINT64_MAX;
    p->selected = 1;
    if (hmap_put(&pv->pids, pid, p->idx)) {
        free(p);
        return NULL;
    }
    r->procs[r->nprocs++] = p;
    return p;
}

static struct frp_process *proc_for(struct frp_report *r, uint32_t pid)
{
    uint32_t *v = hmap_get(&r->priv->pids, pid);
    return v ? r->procs[*v] : new_proc(r, pid);
}

static struct frp_thread *thread_for(struct frp_report *r, struct frp_process *p, uint32_t tid)
{
    struct frp_report_priv *pv = r->priv;
    uint64_t key = (uint64_t)p->idx << 32 | tid;
    uint32_t *v = hmap_get(&pv->tids, key);
    if (v) return r->threads[*v];
    if (grow((void **)&r->threads, &pv->threads_cap, r->nthreads + 1, sizeof *r->threads))
        return NULL;
    struct frp_thread *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->idx = r->nthreads;
    t->tid = tid;
    t->proc = p;
    t->tsc_first = UINT64_MAX;
    t->selected = 1;
    if (hmap_put(&pv->tids, key, t->idx)) {
        free(t);
        return NULL;
    }
    r->threads[r->nthreads++] = t;
    p->nthreads++;
    return t;
}

/* argv joined for display, shell-quoted where needed. */
static const char *join_argv(struct frp_report_priv *pv, const char *const *argv, size_t n,
                             int more)
{
    struct ftr_buf b = {0};
    for (size_t i = 0; i < n; i++) {
        const char *a = argv[i] ? argv[i] : "";
        size_t len = strlen(a);
        int quote = len == 0 || strcspn(a, " \t\n'\"\\$`*?[]{}()<>|&;#~!") < len;
        if (i) ftr_buf_append(&b, " ", 1);
        if (!quote) {
            ftr_buf_append(&b, a, len);
            continue;
        }
        ftr_buf_append(&b, "'", 1);
        for (const char *c = a; *c; c++) {
            if (*c == '\'')
                ftr_buf_append(&b, "'\\''", 4);
            else
                ftr_buf_append(&b, c, 1);
        }
        ftr_buf_append(&b, "'", 1);
    }
    if (more) ftr_buf_append(&b, " ...", 4);
    const char *s = arena_str(pv, b.data ? (const char *)b.data : "", b.len);
    ftr_buf_free(&b);
    return s;
}

static int load_process(struct frp_report *r, const struct ftr_chunk_hdr *h)
{
    struct frp_report_priv *pv = r->priv;
    struct ftr_process_info pi;
    const char *small[64], **argv = small;
    size_t cap = 64;
    int rc = ftr_dec_process(pv->payload.data, pv->payload.len, &pi, small, cap);
    if (rc) return rc;
    if (pi.argc > cap && pi.argc <= 65536) {
        argv = malloc(pi.argc * sizeof *argv);
        if (!argv) return FTR_E_NOMEM;
        cap = pi.argc;
        rc = ftr_dec_process(pv->payload.data, pv->payload.len, &pi, argv, cap);
        if (rc) {
            free(argv);
            return rc;
        }
    }
    uint32_t *v = hmap_get(&pv->pids, h->pid);
    struct frp_process *p = v ? r->procs[*v] : NULL;
    if (!p || (p->has_info && p->start_tsc != pi.start_tsc))
        p = new_proc(r, h->pid); /* first sight, or the pid exec()ed: a new instance */
    if (!p) {
        rc = FTR_E_NOMEM;
        goto out;
    }
    p->has_info = 1;
    p->ppid = pi.ppid;
    p->session_id = pi.session_id;
    p->start_realtime_ns = pi.start_realtime_ns;
    p->start_tsc = pi.start_tsc;
    p->tsc_hz = pi.tsc_hz;
    size_t n = pi.argc < cap ? pi.argc : cap;
    p->cmdline = join_argv(pv, argv, n, pi.argc > n);
    p->exe = pi.exe ? arena_str(pv, pi.exe, strlen(pi.exe)) : NULL;
    if (!p->cmdline || (pi.exe && !p->exe)) rc = FTR_E_NOMEM;
out:
    if (argv != small) free(argv);
    return rc;
}

static int load_module(struct frp_report *r, const struct ftr_chunk_hdr *h)
{
    struct frp_report_priv *pv = r->priv;
    struct ftr_module_info mi;
    int rc = ftr_dec_module(pv->payload.data, pv->payload.len, &mi);
    if (rc) return rc;
    struct frp_process *p = proc_for(r, h->pid);
    if (!p) return FTR_E_NOMEM;
    if ((p->nmodules & (p->nmodules - 1)) == 0) { /* 0, 1, 2, 4...: full, double */
        void *m = realloc(p->modules, (p->nmodules ? p->nmodules * 2 : 1) * sizeof mi);
        if (!m) return FTR_E_NOMEM;
        p->modules = m;
    }
    struct frp_module *m = &p->modules[p->nmodules];
    m->id = mi.module_id;
    m->base = mi.base;
    m->path = mi.path ? arena_str(pv, mi.path, strlen(mi.path)) : "?";
    if (!m->path) return FTR_E_NOMEM;
    p->nmodules++;
    return FTR_OK;
}

static int grow_sites(struct frp_process *p, uint32_t site)
{
    if (site < p->nsites) return FTR_OK;
    size_t n = p->nsites ? p->nsites : 256;
    while (n <= site)
        n *= 2;
    if (n > (size_t)FTR_SITE_MAX + 1) n = (size_t)FTR_SITE_MAX + 1;
    struct frp_name *s = realloc(p->sites, n * sizeof *s);
    if (!s) return FTR_E_NOMEM;
    memset(s + p->nsites, 0, (n - p->nsites) * sizeof *s);
    p->sites = s;
    p->nsites = (uint32_t)n;
    return FTR_OK;
}

static int load_sites(struct frp_report *r, const struct ftr_chunk_hdr *h)
{
    struct frp_report_priv *pv = r->priv;
    uint32_t mod;
    size_t count = 0;
    int rc = ftr_dec_sites(pv->payload.data, pv->payload.len, &mod, NULL, 0, &count);
    if (rc) return rc;
    if (count > pv->sitebuf_cap) {
        free(pv->sitebuf);
        pv->sitebuf_cap = 0;
        pv->sitebuf = malloc(count * sizeof *pv->sitebuf);
        if (!pv->sitebuf) return FTR_E_NOMEM;
        pv->sitebuf_cap = count;
    }
    rc = ftr_dec_sites(pv->payload.data, pv->payload.len, &mod, pv->sitebuf, count, &count);
    if (rc) return rc;
    struct frp_process *p = proc_for(r, h->pid);
    if (!p) return FTR_E_NOMEM;
    for (size_t i = 0; i < count; i++) {
        const struct ftr_site_info *s = &pv->sitebuf[i];
        if (s->site == 0 || s->site > FTR_SITE_MAX || !s->name) continue;
        if (grow_sites(p, s->site)) return FTR_E_NOMEM;
        size_t len = strlen(s->name);
        const char *name = arena_str(pv, s->name, len);
        if (!name) return FTR_E_NOMEM;
        p->sites[s->site] = (struct frp_name){name, (uint32_t)len};
    }
    p->has_sites = 1;
    return FTR_OK;
}

static int load_thread(struct frp_report *r, const struct ftr_chunk_hdr *h)
{
    struct ftr_thread_info ti;
    int rc = ftr_dec_thread(r->priv->payload.data, r->priv->payload.len, &ti);
    if (rc) return rc;
    struct frp_process *p = proc_for(r, h->pid);
    struct frp_thread *t = p ? thread_for(r, p, ti.tid ? ti.tid : h->tid) : NULL;
    if (!t) return FTR_E_NOMEM;
    if (ti.name && *ti.name) {
        t->name = arena_str(r->priv, ti.name, strlen(ti.name));
        if (!t->name) return FTR_E_NOMEM;
    }
    return FTR_OK;
}

static int load_end(struct frp_report *r, const struct ftr_chunk_hdr *h)
{
    struct ftr_end_info ei;
    int rc = ftr_dec_end(r->priv->payload.data, r->priv->payload.len, &ei);
    if (rc) return rc;
    struct frp_process *p = proc_for(r, h->pid);
    if (!p) return FTR_E_NOMEM;
    p->end = ei;
    p->has_end = 1;
    return FTR_OK;
}

static int index_events(struct frp_report *r, const struct ftr_chunk_hdr *h, uint64_t off)
{
    struct frp_report_priv *pv = r->priv;
    struct frp_process *p = proc_for(r, h->pid);
    struct frp_thread *t = p ? thread_for(r, p, h->tid) : NULL;
    if (!t || grow((void **)&r->chunks, &pv->chunks_cap, (size_t)r->nchunks + 1, sizeof *r->chunks))
        return FTR_E_NOMEM;
    r->chunks[r->nchunks] = (struct frp_chunk){off, h->tsc_first, h->tsc_last, t->idx, r->nchunks};
    r->nchunks++;
    t->nchunks++;
    if (h->tsc_first < t->tsc_first) t->tsc_first = h->tsc_first;
    if (h->tsc_last > t->tsc_last) t->tsc_last = h->tsc_last;
    if (h->tsc_first < p->first_tsc) p->first_tsc = h->tsc_first;
    return FTR_OK;
}

static int load(struct frp_report *r)
{
    struct frp_report_priv *pv = r->priv;
    for (;;) {
        struct ftr_chunk_hdr h;
        uint64_t off;
        int rc = ftr_reader_next(pv->rd, &h, &off);
        if (rc == FTR_E_EOF) return FTR_OK;
        if (rc == FTR_E_TRUNCATED) {
            pv->truncated = 1;
            return FTR_OK;
        }
        if (rc) return rc;
        if (h.type == FTR_CHUNK_EVENTS) {
            if ((rc = index_events(r, &h, off))) return rc;
            r->good_chunks++;
            continue;
        }
        static int (*const loaders[])(struct frp_report *, const struct ftr_chunk_hdr *) = {
            [FTR_CHUNK_PROCESS] = load_process,
            [FTR_CHUNK_MODULE] = load_module,
            [FTR_CHUNK_SITES] = load_sites,
            [FTR_CHUNK_THREAD] = load_thread,
            [FTR_CHUNK_END] = load_end};
        if (h.type >= sizeof loaders / sizeof *loaders || !loaders[h.type])
            continue; /* a newer writer's chunk: not ours to understand */
        rc = ftr_reader_payload(pv->rd, &pv->payload);
        if (rc == FTR_E_CORRUPT || rc == FTR_E_ZSTD) continue; /* counted by the reader */
        if (rc == FTR_E_TRUNCATED) {
            pv->truncated = 1;
            return FTR_OK;
        }
        if (rc) return rc;
        rc = loaders[h.type](r, &h);
        if (rc == FTR_E_NOMEM) return rc;
        if (rc)
            r->bad_meta++;
        else
            r->good_chunks++;
    }
}

static int cmp_chunk(const void *a, const void *b)
{
    const struct frp_chunk *x = a, *y = b;
    if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
    if (x->tsc_first != y->tsc_first) return x->tsc_first < y->tsc_first ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_start(const void *a, const void *b)
{
    const struct frp_process *x = *(struct frp_process *const *)a;
    const struct frp_process *y = *(struct frp_process *const *)b;
    uint64_t kx = x->has_info ? x->start_tsc : x->first_tsc;
    uint64_t ky = y->has_info ? y->start_tsc : y->first_tsc;
    if (kx != ky) return kx < ky ? -1 : 1;
    return x->idx < y->idx ? -1 : 1;
}

static int finish(struct frp_report *r)
{
    if (r->nchunks) qsort(r->chunks, r->nchunks, sizeof *r->chunks, cmp_chunk);
    for (uint32_t i = 0; i < r->nchunks; i++) {
        struct frp_thread *t = r->threads[r->chunks[i].thread];
        if (i == 0 || r->chunks[i - 1].thread != t->idx) t->first_chunk = i;
    }
    uint64_t hz = 0;
    for (uint32_t i = 0; i < r->nprocs && !hz; i++)
        hz = r->procs[i]->tsc_hz;
    r->base_tsc = UINT64_MAX;
    struct hmap latest = {0};
    for (uint32_t i = 0; i < r->nprocs; i++) {
        struct frp_process *p = r->procs[i];
        uint64_t phz = p->tsc_hz ? p->tsc_hz : hz;
        p->ns_per_tick = phz ? 1e9 / (double)phz : 1.0;
        p->clock_guessed = !phz;
        if (p->has_info && p->start_tsc < r->base_tsc) r->base_tsc = p->start_tsc;
        if (p->first_tsc < r->base_tsc) r->base_tsc = p->first_tsc;
        uint32_t *v = p->ppid ? hmap_get(&latest, p->ppid) : NULL;
        p->parent = v ? r->procs[*v] : NULL;
        p->after_exec = hmap_get(&latest, p->pid) != NULL;
        if (hmap_put(&latest, p->pid, p->idx)) {
            hmap_free(&latest);
            return FTR_E_NOMEM;
        }
    }
    hmap_free(&latest);
    if (r->base_tsc == UINT64_MAX) r->base_tsc = 0;
    r->order = malloc((r->nprocs ? r->nprocs : 1) * sizeof *r->order);
    if (!r->order) return FTR_E_NOMEM;
    if (r->nprocs) {
        memcpy(r->order, r->procs, r->nprocs * sizeof *r->order);
        qsort(r->order, r->nprocs, sizeof *r->order, cmp_start);
    }
    return FTR_OK;
}

int frp_report_open(const char *path, struct frp_report **out)
{
    *out = NULL;
    struct frp_report *r = calloc(1, sizeof *r);
    struct frp_report_priv *pv = calloc(1, sizeof *pv);
    if (!r || !pv) {
        free(r);
        free(pv);
        return FTR_E_NOMEM;
    }
    r->priv = pv;
    r->path = path;
    int rc = ftr_reader_open(path, &pv->rd);
    if (rc == FTR_OK) rc = load(r);
    if (rc == FTR_OK) rc = finish(r);
    if (rc == FTR_OK && r->good_chunks == 0) {
        struct ftr_damage d;
        ftr_reader_damage(pv->rd, &d);
        if (d.bad_chunks || d.skipped_bytes || r->bad_meta)
            rc = FTR_E_CORRUPT;
        else if (d.truncated || pv->truncated)
            rc = FTR_E_TRUNCATED;
        else
            rc = FTR_E_EMPTY;
    }
    if (rc) {
        int e = errno;
        frp_report_close(r);
        errno = e;
        return rc;
    }
    *out = r;
    return FTR_OK;
}

void frp_report_close(struct frp_report *r)
{
    if (!r) return;
    struct frp_report_priv *pv = r->priv;
    for (uint32_t i = 0; i < r->nprocs; i++) {
        free(r->procs[i]->modules);
        free(r->procs[i]->sites);
        free(r->procs[i]);
    }
    for (uint32_t i = 0; i < r->nthreads; i++)
        free(r->threads[i]);
    free(r->procs);
    free(r->order);
    free(r->threads);
    free(r->chunks);
    if (pv->rd) ftr_reader_close(pv->rd);
    arena_free(pv);
    hmap_free(&pv->pids);
    hmap_free(&pv->tids);
    ftr_buf_free(&pv->payload);
    free(pv->sitebuf);
    free(pv);
    free(r);
}

size_t frp_report_select(struct frp_report *r, long pid, const uint32_t *tids, size_t ntids)
{
    for (uint32_t i = 0; i < r->nprocs; i++)
        r->procs[i]->selected = ntids == 0 && (pid < 0 || r->procs[i]->pid == (uint64_t)pid);
    for (uint32_t i = 0; i < r->nthreads; i++) {
        struct frp_thread *t = r->threads[i];
        int sel = pid < 0 || t->proc->pid == (uint64_t)pid;
        if (sel && ntids) {
            sel = 0;
            for (size_t k = 0; k < ntids && !sel; k++)
                sel = t->tid == tids[k];
        }
        t->selected = sel;
        if (sel) t->proc->selected = 1;
    }
    size_t n = 0;
    for (uint32_t i = 0; i < r->nprocs; i++)
        n += r->procs[i]->selected != 0;
    return n;
}

#define MAX_INTERNED (1u << 22) /* beyond, a site is corrupt: no table grows for it */
struct frp_name frp_site_name(struct frp_report *r, struct frp_process *p, uint32_t site)
{
    if (site < p->nsites && p->sites[site].s) return p->sites[site];
    /* A forked child that wrote no names of its own runs its parent's code. */
    struct frp_name name = {0};
    struct frp_process *q = p->has_sites || p->after_exec ? NULL : p->parent;
    for (; q && !name.s; q = q->after_exec ? NULL : q->parent)
        if (site < q->nsites && q->sites[site].s) name = q->sites[site];
    if (!name.s) {
        char tmp[32] = "<site ";
        char *e = frp_fmt_u64(tmp + 6, site);
        *e++ = '>';
        name.len = (uint32_t)(e - tmp);
        if (site >= MAX_INTERNED || !(name.s = arena_str(r->priv, tmp, name.len)))
            return (struct frp_name){"<bad site>", 10};
    }
    if (site < MAX_INTERNED && grow_sites(p, site) == FTR_OK) p->sites[site] = name;
    return name;
}

/* ---- the merge ---- */
struct cursor {
    struct frp_thread *th;
    uint32_t ci, cend;  /* next chunk to load, end of the thread's chunks */
    uint32_t chunk_seq; /* seq of the chunk being decoded */
    int live;
    struct ftr_ev_iter it;
    struct ftr_buf buf;
    struct ftr_event cur, nxt;
    uint32_t cur_seq, nxt_seq;
    int has_nxt;
    struct cursor *free_next;
};

struct frp_merge {
    struct frp_report *r;
    struct frp_thread **pend; /* threads not yet opened, by first chunk */
    uint32_t npend, ipend;
    struct cursor **heap;
    uint32_t nheap;
    struct cursor *last; /* emitted by the previous call: advanced at the next */
    struct cursor *freelist;
    int err;
};

static int load_chunk(struct frp_merge *m, struct cursor *c, const struct frp_chunk *ch)
{
    struct frp_report_priv *pv = m->r->priv;
    struct ftr_chunk_hdr h;
    uint64_t off;
    int rc = ftr_reader_seek(pv->rd, ch->offset);
    if (rc == FTR_OK) rc = ftr_reader_next(pv->rd, &h, &off);
    if (rc == FTR_E_IO || rc == FTR_E_NOMEM) return -rc;
    if (rc || off != ch->offset || h.type != FTR_CHUNK_EVENTS) {
        m->r->bad_events++;
        return 0;
    }
    rc = ftr_reader_payload(pv->rd, &c->buf);
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
    for (;;) {
        if (__builtin_expect(c->live, 1)) {
            int rc = ftr_dec_events_next(&c->it, ev);
            if (__builtin_expect(rc == 1, 1)) {
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
    int rc = fetch(m, c, &c->cur, &c->cur_seq);
    if (rc <= 0) {
        release(m, c);
        return rc;
    }
    rc = fetch(m, c, &c->nxt, &c->nxt_seq);
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

int frp_merge_open(struct frp_report *r, struct frp_process *p, struct frp_merge **out)
{
    *out = NULL;
    struct frp_merge *m = calloc(1, sizeof *m);
    if (!m) return FTR_E_NOMEM;
    m->r = r;
    m->pend = malloc((r->nthreads + 1) * sizeof *m->pend);
    m->heap = malloc((r->nthreads + 1) * sizeof *m->heap);
    if (!m->pend || !m->heap) {
        frp_merge_close(m);
        return FTR_E_NOMEM;
    }
    for (uint32_t i = 0; i < r->nthreads; i++) {
        struct frp_thread *t = r->threads[i];
        if (t->selected && t->nchunks && (!p || t->proc == p)) m->pend[m->npend++] = t;
    }
    qsort_r(m->pend, m->npend, sizeof *m->pend, cmp_pend, r->chunks);
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
            int rc = fetch(m, c, &c->nxt, &c->nxt_seq);
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
    if (!m->nheap) return 0;
    c = m->heap[0];
    it->ev = c->cur;
    it->next = c->has_nxt ? &c->nxt : NULL;
    it->thread = c->th;
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
    free(m);
}

void frp_report_damage(const struct frp_report *r, struct ftr_damage *d)
{
    ftr_reader_damage(r->priv->rd, d);
    d->truncated |= r->priv->truncated;
}
