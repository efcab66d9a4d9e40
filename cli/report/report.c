/*
 * report.c - loading a trace file into tables (report.h), selecting threads, naming sites,
 * and the words for the damage met and for ftrace-ctl's marks.
 *
 * Loading is one pass over the chunk headers: metadata chunks (PROCESS, MODULE, SITES, THREAD,
 * END) are decompressed and decoded into tables; EVENTS chunks are only indexed (merge.c reads
 * them). Strings live in the report's arena (util.c); display names come from names.c. Uses
 * util.c and names.c, which never call it.
 */
#define _GNU_SOURCE /* qsort_r */
#include "report.h"

#include "names.h"
#include "util.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

struct frp_report_priv {
    struct ftr_reader *rd;
    struct frp_arena arena; /* names live as long as the report */
    struct frp_hmap pids;   /* pid -> idx of its current process instance */
    struct frp_hmap tids;   /* proc idx << 32 | tid -> thread idx */
    size_t procs_cap, threads_cap, chunks_cap;
    struct ftr_buf payload;
    struct ftr_site_info *sitebuf;
    size_t sitebuf_cap;
    int truncated;
};

/* ---- tables ---- */
static struct frp_process *new_proc(struct frp_report *r, uint32_t pid)
{
    struct frp_report_priv *pv = r->priv;
    if (frp_grow((void **)&r->procs, &pv->procs_cap, r->nprocs + 1, sizeof *r->procs)) return NULL;
    struct frp_process *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->idx = r->nprocs;
    p->pid = pid;
    p->cmdline = "(no process record)";
    p->first_tsc = UINT64_MAX;
    p->selected = 1;
    if (frp_hmap_put(&pv->pids, pid, p->idx)) {
        free(p);
        return NULL;
    }
    r->procs[r->nprocs++] = p;
    return p;
}

static struct frp_process *proc_for(struct frp_report *r, uint32_t pid)
{
    uint32_t *v = frp_hmap_get(&r->priv->pids, pid);
    return v ? r->procs[*v] : new_proc(r, pid);
}

static struct frp_thread *thread_for(struct frp_report *r, struct frp_process *p, uint32_t tid)
{
    struct frp_report_priv *pv = r->priv;
    uint64_t key = (uint64_t)p->idx << 32 | tid;
    uint32_t *v = frp_hmap_get(&pv->tids, key);
    if (v) return r->threads[*v];
    if (frp_grow((void **)&r->threads, &pv->threads_cap, r->nthreads + 1, sizeof *r->threads))
        return NULL;
    struct frp_thread *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->idx = r->nthreads;
    t->tid = tid;
    t->proc = p;
    t->tsc_first = UINT64_MAX;
    t->selected = 1;
    if (frp_hmap_put(&pv->tids, key, t->idx)) {
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
    const char *s = frp_arena_str(&pv->arena, b.data ? (const char *)b.data : "", b.len);
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
    uint32_t *v = frp_hmap_get(&pv->pids, h->pid);
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
    p->tsc_cal = pi.tsc_calibration;
    p->clock_check = pi.clock_check;
    size_t n = pi.argc < cap ? pi.argc : cap;
    p->cmdline = join_argv(pv, argv, n, pi.argc > n);
    p->exe = pi.exe ? frp_arena_str(&pv->arena, pi.exe, strlen(pi.exe)) : NULL;
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
    memset(m, 0, sizeof *m);
    m->id = mi.module_id;
    m->base = mi.base;
    m->load_tsc = mi.load_tsc;
    m->path = mi.path ? frp_arena_str(&pv->arena, mi.path, strlen(mi.path)) : "?";
    if (!m->path) return FTR_E_NOMEM;
    if (mi.build_id_len && mi.build_id_len <= 64) {
        uint8_t *id = (uint8_t *)frp_arena_alloc(&pv->arena, mi.build_id_len);
        if (!id) return FTR_E_NOMEM;
        memcpy(id, mi.build_id, mi.build_id_len);
        m->build_id = id;
        m->build_id_len = mi.build_id_len;
    }
    p->nmodules++;
    return FTR_OK;
}

static int grow_sites(struct frp_process *p, uint32_t site)
{
    if (site < p->nsites) return FTR_OK;
    size_t n = p->nsites ? p->nsites : 256;
    while (n <= site)
        n *= 2;
    if (n > FRP_SITE_LIMIT) n = FRP_SITE_LIMIT;
    struct frp_name *s = realloc(p->sites, n * sizeof *s);
    if (!s) return FTR_E_NOMEM;
    memset(s + p->nsites, 0, (n - p->nsites) * sizeof *s);
    p->sites = s;
    struct frp_site_meta *m = realloc(p->meta, n * sizeof *m);
    if (!m) return FTR_E_NOMEM;
    memset(m + p->nsites, 0, (n - p->nsites) * sizeof *m);
    p->meta = m;
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
    uint32_t midx = 0;
    for (uint32_t k = 0; k < p->nmodules && !midx; k++)
        if (p->modules[k].id == mod) midx = k + 1;
    for (size_t i = 0; i < count; i++) {
        const struct ftr_site_info *s = &pv->sitebuf[i];
        if (s->site == 0 || s->site >= FRP_SITE_LIMIT || !s->name) {
            if (s->site >= FRP_SITE_LIMIT) r->bad_meta++;
            continue;
        }
        if (grow_sites(p, s->site)) return FTR_E_NOMEM;
        size_t len = strlen(s->name);
        const char *name = frp_arena_str(&pv->arena, s->name, len);
        if (!name) return FTR_E_NOMEM;
        p->sites[s->site] = (struct frp_name){name, (uint32_t)len};
        p->meta[s->site] = (struct frp_site_meta){name, s->func, midx, s->kind};
        if (midx) p->modules[midx - 1].nsites++;
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
        t->name = frp_arena_str(&r->priv->arena, ti.name, strlen(ti.name));
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

static int load_mark(struct frp_report *r, const struct ftr_chunk_hdr *h)
{
    struct ftr_mark_info mi;
    int rc = ftr_dec_mark(r->priv->payload.data, r->priv->payload.len, &mi);
    if (rc) return rc;
    struct frp_process *p = proc_for(r, h->pid);
    if (!p) return FTR_E_NOMEM;
    if ((p->nmarks & (p->nmarks - 1)) == 0) { /* 0, 1, 2, 4...: full, double */
        void *m = realloc(p->marks, (p->nmarks ? p->nmarks * 2 : 1) * sizeof *p->marks);
        if (!m) return FTR_E_NOMEM;
        p->marks = m;
    }
    const char *text =
        frp_arena_str(&r->priv->arena, mi.text ? mi.text : "", mi.text ? strlen(mi.text) : 0);
    if (!text) return FTR_E_NOMEM;
    p->marks[p->nmarks++] = (struct frp_mark){mi.tsc, mi.what, mi.value, text};
    return FTR_OK;
}

static int index_events(struct frp_report *r, const struct ftr_chunk_hdr *h, uint64_t off)
{
    struct frp_report_priv *pv = r->priv;
    struct frp_process *p = proc_for(r, h->pid);
    struct frp_thread *t = p ? thread_for(r, p, h->tid) : NULL;
    if (!t ||
        frp_grow((void **)&r->chunks, &pv->chunks_cap, (size_t)r->nchunks + 1, sizeof *r->chunks))
        return FTR_E_NOMEM;
    r->chunks[r->nchunks] =
        (struct frp_chunk){off, h->tsc_first, h->tsc_last, h->seq, t->idx, r->nchunks, 0};
    r->nchunks++;
    t->nchunks++;
    if (h->tsc_first < t->tsc_first) t->tsc_first = h->tsc_first;
    if (h->tsc_last > t->tsc_last) t->tsc_last = h->tsc_last;
    if (h->tsc_first < p->first_tsc) p->first_tsc = h->tsc_first;
    if (h->tsc_last > p->last_tsc) p->last_tsc = h->tsc_last;
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
        r->chunks_by_type[h.type < 8 ? h.type : 0]++;
        if (h.type == FTR_CHUNK_EVENTS) {
            if ((rc = index_events(r, &h, off))) return rc;
            r->good_chunks++;
            continue;
        }
        static int (*const loaders[])(struct frp_report *, const struct ftr_chunk_hdr *) = {
            [FTR_CHUNK_PROCESS] = load_process, [FTR_CHUNK_MODULE] = load_module,
            [FTR_CHUNK_SITES] = load_sites,     [FTR_CHUNK_THREAD] = load_thread,
            [FTR_CHUNK_END] = load_end,         [FTR_CHUNK_MARK] = load_mark};
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

/* Format 2: a thread's pieces in the order of their slots (their seq), whatever their times. */
static int cmp_piece(const void *a, const void *b)
{
    const struct frp_chunk *x = a, *y = b;
    if (x->thread != y->thread) return x->thread < y->thread ? -1 : 1;
    if (x->epoch != y->epoch) return x->epoch < y->epoch ? -1 : 1;
    if (x->piece != y->piece) return x->piece < y->piece ? -1 : 1;
    return cmp_chunk(a, b);
}

/* The time of a record is read before its slot is taken: a signal handler running in between
 * puts its own records in the slots before it. So a thread's pieces (a writer flushes a
 * thread's chunk in pieces) may start with times out of their order, and their place in the
 * file does not follow it either (a full chunk may be written after a piece of the next one).
 * Their seq tells their order, within one life of the thread: seq counts from 0 again when the
 * kernel gives the tid to a new thread. Lives are found in time order (they do not overlap): a
 * piece of seq 0 starts one, unless the current life has none yet (its first piece then came
 * later in time than a second one, as above). Files of format 1 have no seq: time order. */
static void order_pieces(struct frp_report *r)
{
    if (r->version_major < 2) return;
    uint32_t epoch = 0, thread = UINT32_MAX;
    int seen0 = 0;
    for (uint32_t i = 0; i < r->nchunks; i++) {
        struct frp_chunk *c = &r->chunks[i];
        if (c->thread != thread) {
            thread = c->thread;
            epoch = 0;
            seen0 = 0;
        }
        if (c->piece == 0) {
            epoch += seen0;
            seen0 = 1;
        }
        c->epoch = epoch;
    }
    qsort(r->chunks, r->nchunks, sizeof *r->chunks, cmp_piece);
}

/* Processes by when they started (the PROCESS chunk's start, else the first event), then by
 * file order. */
static uint64_t proc_start(const struct frp_process *p)
{
    return p->has_info && p->start_tsc ? p->start_tsc : p->first_tsc;
}

static int cmp_proc_start(const void *a, const void *b)
{
    const struct frp_process *x = *(struct frp_process *const *)a,
                             *y = *(struct frp_process *const *)b;
    uint64_t sx = proc_start(x), sy = proc_start(y);
    if (sx != sy) return sx < sy ? -1 : 1;
    return x->idx < y->idx ? -1 : x->idx > y->idx;
}

static int cmp_mark(const void *a, const void *b)
{
    const struct frp_mark *x = a, *y = b;
    return x->tsc < y->tsc ? -1 : x->tsc > y->tsc; /* qsort is not stable: ties are rare */
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
    if (r->nchunks) {
        qsort(r->chunks, r->nchunks, sizeof *r->chunks, cmp_chunk);
        order_pieces(r);
    }
    for (uint32_t i = 0; i < r->nchunks; i++) {
        struct frp_thread *t = r->threads[r->chunks[i].thread];
        if (i == 0 || r->chunks[i - 1].thread != t->idx) t->first_chunk = i;
    }
    uint64_t hz = 0;
    for (uint32_t i = 0; i < r->nprocs && !hz; i++)
        hz = r->procs[i]->tsc_hz;
    r->base_tsc = UINT64_MAX;
    struct frp_hmap latest = {0};
    for (uint32_t i = 0; i < r->nprocs; i++) {
        struct frp_process *p = r->procs[i];
        if (p->nmarks > 1) qsort(p->marks, p->nmarks, sizeof *p->marks, cmp_mark);
        uint64_t phz = p->tsc_hz ? p->tsc_hz : hz;
        p->ns_per_tick = phz ? 1e9 / (double)phz : 1.0;
        p->clock_guessed = !phz;
        double mul = p->ns_per_tick * 4294967296.0 + 0.5;
        p->ns_mul = mul >= 1.0 && mul < 1.8e19 ? (uint64_t)mul : 0;
        if (p->has_info && p->start_tsc < r->base_tsc) r->base_tsc = p->start_tsc;
        if (p->first_tsc < r->base_tsc) r->base_tsc = p->first_tsc;
    }
    /* Parents and exec'd images by start time, not by file order: a process writes its first
     * chunk when it has something to say, so a child (a daemon whose parent ended inside
     * daemon()) may precede its parent in the file. */
    struct frp_process **by_start = malloc((r->nprocs ? r->nprocs : 1) * sizeof *by_start);
    if (!by_start) return FTR_E_NOMEM;
    if (r->nprocs) memcpy(by_start, r->procs, r->nprocs * sizeof *by_start);
    if (r->nprocs > 1) qsort(by_start, r->nprocs, sizeof *by_start, cmp_proc_start);
    for (uint32_t i = 0; i < r->nprocs; i++) {
        struct frp_process *p = by_start[i];
        uint32_t *v = p->ppid ? frp_hmap_get(&latest, p->ppid) : NULL;
        p->parent = v ? r->procs[*v] : NULL;
        p->after_exec = frp_hmap_get(&latest, p->pid) != NULL;
        if (frp_hmap_put(&latest, p->pid, p->idx)) {
            free(by_start);
            frp_hmap_free(&latest);
            return FTR_E_NOMEM;
        }
    }
    /* a parent whose PROCESS chunk says it started later (synthetic files, clocks apart): the
     * first image with its pid */
    for (uint32_t i = 0; i < r->nprocs; i++) {
        struct frp_process *p = r->procs[i];
        for (uint32_t k = 0; p->ppid && !p->parent && k < r->nprocs; k++)
            if (by_start[k]->pid == p->ppid && by_start[k] != p) p->parent = by_start[k];
    }
    free(by_start);
    frp_hmap_free(&latest);
    if (r->base_tsc == UINT64_MAX) r->base_tsc = 0;
    r->order = malloc((r->nprocs ? r->nprocs : 1) * sizeof *r->order);
    if (!r->order) return FTR_E_NOMEM;
    if (r->nprocs) {
        memcpy(r->order, r->procs, r->nprocs * sizeof *r->order);
        qsort(r->order, r->nprocs, sizeof *r->order, cmp_start);
    }
    return FTR_OK;
}

/* The version and the size of the file, for --info (the reader checked the header). */
static int read_file_header(struct frp_report *r)
{
    uint8_t h[FTR_FILE_HEADER_SIZE];
    FILE *f = fopen(r->path, "rb");
    if (!f) return FTR_OK; /* the reader has it open: only the figures are lost */
    if (fread(h, 1, sizeof h, f) == sizeof h) {
        r->version_major = ftr_rd_le16(h + 8);
        r->version_minor = ftr_rd_le16(h + 10);
    }
    if (fseek(f, 0, SEEK_END) == 0) {
        long n = ftell(f);
        r->file_size = n > 0 ? (uint64_t)n : 0;
    }
    fclose(f);
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
    r->depth_max = FTR_DEPTH_MAX;
    int rc = ftr_reader_open(path, &pv->rd);
    if (rc == FTR_OK) rc = read_file_header(r);
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
    frp_names_free(r);
    for (uint32_t i = 0; i < r->nprocs; i++) {
        free(r->procs[i]->modules);
        free(r->procs[i]->sites);
        free(r->procs[i]->meta);
        free(r->procs[i]->marks);
        free(r->procs[i]);
    }
    for (uint32_t i = 0; i < r->nthreads; i++)
        free(r->threads[i]);
    free(r->procs);
    free(r->order);
    free(r->threads);
    free(r->chunks);
    if (pv->rd) ftr_reader_close(pv->rd);
    frp_arena_free(&pv->arena);
    frp_hmap_free(&pv->pids);
    frp_hmap_free(&pv->tids);
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

/* The name of a site p has its own record of (computed on first use), or {NULL}. */
static struct frp_name own_name(struct frp_report *r, struct frp_process *p, uint32_t site)
{
    if (site >= p->nsites) return (struct frp_name){0};
    if (!p->sites[site].s && p->meta && p->meta[site].raw) {
        struct frp_name n = frp_display_name(r, p, site);
        if (!n.s) n = (struct frp_name){p->meta[site].raw, (uint32_t)strlen(p->meta[site].raw)};
        p->sites[site] = n;
    }
    return p->sites[site];
}

struct frp_name frp_site_name(struct frp_report *r, struct frp_process *p, uint32_t site)
{
    struct frp_name name = own_name(r, p, site);
    if (name.s) return name;
    /* A forked child that wrote no names of its own runs its parent's code. */
    struct frp_process *q = p->has_sites || p->after_exec ? NULL : p->parent;
    for (; q && !name.s; q = q->after_exec ? NULL : q->parent)
        name = own_name(r, q, site);
    if (!name.s) {
        char tmp[32] = "<site ";
        char *e = frp_fmt_u64(tmp + 6, site);
        *e++ = '>';
        name.len = (uint32_t)(e - tmp);
        if (site >= FRP_SITE_LIMIT || !(name.s = frp_arena_str(&r->priv->arena, tmp, name.len)))
            return (struct frp_name){"<bad site>", 10};
    }
    if (site < FRP_SITE_LIMIT && grow_sites(p, site) == FTR_OK) p->sites[site] = name;
    return name;
}

void frp_report_damage(const struct frp_report *r, struct ftr_damage *d)
{
    ftr_reader_damage(r->priv->rd, d);
    d->truncated |= r->priv->truncated;
}

const char *frp_report_strdup(struct frp_report *r, const char *s, size_t n)
{
    return frp_arena_str(&r->priv->arena, s, n);
}

struct ftr_reader *frp_report_reader(struct frp_report *r)
{
    return r->priv->rd;
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
    if (r->deep_calls) {
        snprintf(tmp, sizeof tmp, "skipped %llu call%s nested deeper than %u",
                 (unsigned long long)r->deep_calls, r->deep_calls == 1 ? "" : "s", r->depth_max);
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

/* ---- marks ---- */
size_t frp_mark_text(const struct frp_mark *m, char *buf, size_t n)
{
    char t[40];
    const char *d = t;
    int len;
    switch (m->what) {
    case FTR_MARK_FILTER:
        len = *m->text ? snprintf(buf, n, "filter '%s'", m->text)
                       : snprintf(buf, n, "filter: every function");
        break;
    case FTR_MARK_ARGS:
    case FTR_MARK_RETVAL:
        len = *m->text ? snprintf(buf, n, "%s '%s'", ftr_mark_name(m->what), m->text)
                       : snprintf(buf, n, "%s: none", ftr_mark_name(m->what));
        break;
    case FTR_MARK_LIBCALL:
        len = snprintf(buf, n, "library calls %s", m->value ? "on" : "off");
        break;
    case FTR_MARK_DEPTH:
        len = m->value ? snprintf(buf, n, "max-depth %llu", (unsigned long long)m->value)
                       : snprintf(buf, n, "max-depth: unlimited");
        break;
    case FTR_MARK_THRESHOLD:
        frp_fmt_time(t, m->value);
        while (*d == ' ')
            d++;
        len = m->value ? snprintf(buf, n, "threshold %s", d) : snprintf(buf, n, "threshold: none");
        break;
    default: /* on, off; a newer writer's: its number */
        len = strcmp(ftr_mark_name(m->what), "?")
                  ? snprintf(buf, n, "%s", ftr_mark_name(m->what))
                  : snprintf(buf, n, "mark %u (%llu)", m->what, (unsigned long long)m->value);
        break;
    }
    return len < 0 ? 0 : (size_t)len < n ? (size_t)len : n ? n - 1 : 0;
}
