/*
 * modules.c - the sites of every loaded module: find them (patcher/), give each a process-wide
 * index and a stub near its module, describe them to the trace (MODULE and SITES chunks), and
 * rewrite them under the stop-the-world handshake.
 *
 * Decide, generate, verify, write: the pokes are computed here without touching text;
 * patcher/text_poke.c checks every site's live bytes against what the scan saw and writes only
 * those that match; the others are counted as skipped.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <errno.h>
#include <pthread.h>
#include <link.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ftr_patcher.h"
#include "tracer.h"

#define STW_TIMEOUT_MS 2000
#define REACH ((int64_t)1 << 31)

struct mod {
    struct ftr_module m;
    uint8_t *stubs; /* stub area: 2 jump slots, then FTR_STUB_SIZE bytes per site */
    size_t stubs_len;
    uint32_t id;
    int ready;   /* stubs built and described to the trace */
    int gone;    /* unloaded (dlclose): its sites are forgotten */
    int seen;    /* scratch: found by the last dl_iterate_phdr walk */
    int is_main; /* the executable */
};

static pthread_mutex_t mods_lock = PTHREAD_MUTEX_INITIALIZER; /* dlopen/dlclose/patching */
static struct mod *mods;
static size_t nmods;
static struct ftr_stw_stats last_stw; /* of the last rewrite, for FTRACE_VERBOSE */
static uint32_t next_site = 1, next_module_id;

static struct mod *find_loaded(uint64_t base, const char *path)
{
    for (size_t k = 0; k < nmods; k++)
        if (!mods[k].gone && mods[k].m.base == base && strcmp(mods[k].m.path, path) == 0)
            return &mods[k];
    return NULL;
}

static int is_self(const struct dl_phdr_info *info)
{
    Dl_info di;
    if (!dladdr((void *)ftr_modules_scan, &di)) return 0;
    return (uintptr_t)di.dli_fbase == info->dlpi_addr ||
           (info->dlpi_name && di.dli_fname && strcmp(info->dlpi_name, di.dli_fname) == 0 &&
            info->dlpi_name[0]);
}

/* dl_iterate_phdr callback; arg points to the walk's count of modules visited so far. */
static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    int *visited = arg;
    const char *path = info->dlpi_name;
    char exe[4096];
    if (!path || !*path) {
        if ((*visited)++ > 0) return 0; /* only the first module, unnamed, is the executable */
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0) return 0;
        exe[n] = 0;
        path = exe;
    } else
        (*visited)++;
    if (strstr(path, "linux-vdso") || is_self(info)) return 0;
    struct mod *known = find_loaded(info->dlpi_addr, path);
    if (known) {
        known->seen = 1;
        return 0;
    }
    for (size_t k = 0; k < nmods; k++) /* a module without sites, seen before */
        if (mods[k].gone && mods[k].m.nsites == 0 && mods[k].m.base == info->dlpi_addr &&
            mods[k].m.path && strcmp(mods[k].m.path, path) == 0) {
            mods[k].seen = 1;
            return 0;
        }
    struct mod *nm = realloc(mods, (nmods + 1) * sizeof *mods);
    if (!nm) return 1;
    mods = nm;
    struct mod *md = &mods[nmods];
    memset(md, 0, sizeof *md);
    char err[256];
    md->seen = 1;
    if (ftr_module_scan(path, info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum, &md->m, err,
                        sizeof err) < 0 ||
        md->m.nsites == 0) {
        /* remembered as a site-less placeholder, so that it is not scanned again */
        ftr_g.skipped += md->m.skipped;
        ftr_module_free(&md->m);
        memset(&md->m, 0, sizeof md->m);
        md->m.path = strdup(path);
        md->m.base = info->dlpi_addr;
        md->gone = 1;
        nmods++;
        return 0;
    }
    md->id = next_module_id++;
    md->is_main = path == exe;
    nmods++;
    return 0;
}

/* Maps the stub area within rel32 reach of every site of the module. */
static int map_stubs(struct mod *md)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = (16 + md->m.nsites * FTR_STUB_SIZE + page - 1) & ~(page - 1);
    uint64_t lo = md->m.lo, hi = md->m.hi;
    /* candidates: just below the module, then just above, stepping away 1 MiB at a time */
    for (int side = 0; side < 2; side++) {
        for (uint64_t step = 0; step < 1024; step++) {
            uint64_t at = side == 0 ? ((lo - len) & ~(uint64_t)(page - 1)) - (step << 20)
                                    : ((hi + page - 1) & ~(uint64_t)(page - 1)) + (step << 20);
            if ((int64_t)(hi - at) >= REACH - 64 || (int64_t)(at + len - lo) >= REACH - 64) break;
            void *p = mmap((void *)at, len, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
            if (p == MAP_FAILED) continue;
            if ((uint64_t)p != at) { /* old kernels treat the flag as a hint */
                munmap(p, len);
                continue;
            }
            md->stubs = p;
            md->stubs_len = len;
            return 0;
        }
    }
    return -1;
}

static int build_stubs(struct mod *md)
{
    if (map_stubs(md) < 0) return -1;
    uint64_t base = (uint64_t)md->stubs;
    uint64_t fentry_slot = base, mcount_slot = base + 8;
    uint64_t a = (uint64_t)ftr_tramp_fentry, b = (uint64_t)ftr_tramp_mcount;
    memcpy(md->stubs, &a, 8);
    memcpy(md->stubs + 8, &b, 8);
    for (size_t i = 0; i < md->m.nsites; i++) {
        struct ftr_site *s = &md->m.sites[i];
        s->index = next_site++;
        uint64_t at = base + 16 + i * FTR_STUB_SIZE;
        if (ftr_x86_gen_stub(md->stubs + 16 + i * FTR_STUB_SIZE, at, s->index,
                             s->mcount ? mcount_slot : fentry_slot) < 0)
            return -1;
    }
    return mprotect(md->stubs, md->stubs_len, PROT_READ | PROT_EXEC);
}

static uint64_t stub_of(const struct mod *md, size_t i)
{
    return (uint64_t)md->stubs + 16 + i * FTR_STUB_SIZE;
}

static void describe(struct ftr_enc *enc, const struct mod *md, struct ftr_buf *out)
{
    struct ftr_module_info mi = {
        .module_id = md->id,
        .base = md->m.base,
        .build_id_len = md->m.build_id_len,
        .build_id = md->m.build_id,
        .path = md->m.path,
    };
    ftr_enc_module(enc, ftr_g.pid, &mi, out);
    struct ftr_site_info *si = calloc(md->m.nsites, sizeof *si);
    if (!si) return;
    for (size_t i = 0; i < md->m.nsites; i++) {
        const struct ftr_site *s = &md->m.sites[i];
        si[i] = (struct ftr_site_info){
            .site = s->index, .addr = s->addr, .func = s->func, .name = s->name};
    }
    ftr_enc_sites(enc, ftr_g.pid, md->id, si, md->m.nsites, out);
    free(si);
}

struct patch_job {
    struct ftr_poke *pokes;
    size_t n;
    size_t *bad; /* indices of the pokes refused for unexpected bytes */
    long refused;
};

static int apply(void *arg)
{
    struct patch_job *job = arg;
    job->refused = ftr_text_poke(job->pokes, job->n, job->bad, job->n);
    return job->refused < 0 ? -1 : 0;
}

/* A parked thread whose ip is inside a site being rewritten resumes after it. */
static uint64_t fix_ip(void *arg, uint64_t ip)
{
    (void)arg;
    for (size_t k = 0; k < nmods; k++) {
        const struct ftr_module *m = &mods[k].m;
        if (mods[k].gone || ip < m->lo || ip >= m->hi || !m->nsites) continue;
        size_t lo = 0, hi = m->nsites;
        while (lo < hi) { /* last site with addr < ip */
            size_t mid = (lo + hi) / 2;
            if (m->sites[mid].addr < ip)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo > 0) return ftr_site_fixup_ip(&m->sites[lo - 1], ip);
    }
    return ip;
}

/* The state a site should be in: a call to its stub when its function is selected. */
static int wanted(const struct mod *md, const struct ftr_site *s)
{
    return (int)ftr_site_wanted(md->m.path, md->is_main, s);
}

/* Rewrites every ready site whose state differs from wanted(), under the handshake. Must hold
 * mods_lock. @return 0 or -1 (err). */
static int repatch(char *err, size_t errlen)
{
    size_t total = 0;
    for (size_t k = 0; k < nmods; k++)
        total += mods[k].ready ? mods[k].m.nsites : 0;
    struct ftr_poke *pokes = calloc(total ? total : 1, sizeof *pokes);
    struct ftr_site **which = calloc(total ? total : 1, sizeof *which);
    if (!pokes || !which) {
        free(pokes);
        free(which);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    size_t n = 0;
    for (size_t k = 0; k < nmods; k++) {
        struct mod *md = &mods[k];
        if (!md->ready) continue;
        for (size_t i = 0; i < md->m.nsites; i++) {
            struct ftr_site *s = &md->m.sites[i];
            int want = wanted(md, s);
            if (s->patched == want) continue;
            struct ftr_poke *p = &pokes[n];
            p->addr = s->addr;
            p->len = s->len;
            /* what is there now: the original bytes, or our own last state */
            if (s->patched == FTR_SITE_ORIGINAL)
                memcpy(p->expect, s->orig, s->len);
            else if (s->patched == FTR_SITE_NOP)
                ftr_x86_gen_nop(p->expect, s->len);
            else
                ftr_x86_gen_call(p->expect, s->len, s->addr, stub_of(md, i));
            if (want == FTR_SITE_NOP)
                ftr_x86_gen_nop(p->bytes, s->len);
            else if (ftr_x86_gen_call(p->bytes, s->len, s->addr, stub_of(md, i)) < 0)
                continue;
            which[n++] = s;
        }
    }
    /* each module's sites are in address order, which is what text_poke groups pages by */
    int rc = 0;
    if (n) {
        size_t *bad = calloc(n, sizeof *bad);
        struct patch_job job = {.pokes = pokes, .n = n, .bad = bad};
        struct ftr_stw_stats st = {0};
        if (!bad) {
            snprintf(err, errlen, "out of memory");
            rc = -1;
        } else {
            rc = ftr_stw_run(apply, fix_ip, &job, STW_TIMEOUT_MS, &st, err, errlen);
        }
        if (rc == 0) {
            size_t nbad = job.refused > 0 ? (size_t)job.refused : 0;
            for (size_t i = 0, b = 0; i < n; i++) {
                if (b < nbad && bad[b] == i) {
                    b++;
                    which[i]->patched = FTR_SITE_BROKEN;
                    ftr_g.skipped++;
                    continue;
                }
                which[i]->patched =
                    (uint8_t)(pokes[i].bytes[0] == 0xe8 ? FTR_SITE_CALL : FTR_SITE_NOP);
            }
        } else if (job.refused < 0) {
            snprintf(err, errlen, "cannot rewrite code: %s", strerror(errno));
        }
        last_stw = st;
        free(bad);
    }
    free(pokes);
    free(which);
    return rc;
}

/* Builds the stubs of the modules found since the last call and describes them to the trace.
 * Must hold mods_lock. */
static void prepare_new(void)
{
    struct ftr_enc *enc = ftr_enc_new(ftr_g.zstd_level);
    struct ftr_buf meta = {0};
    for (size_t k = 0; k < nmods; k++) {
        struct mod *md = &mods[k];
        if (md->ready || md->gone) continue;
        if (build_stubs(md) < 0) {
            ftr_msg("%s: no room for stubs within reach; its functions are not traced", md->m.path);
            md->gone = 1;
            continue;
        }
        md->ready = 1;
        if (enc) describe(enc, md, &meta);
        ftr_g.sites += md->m.nsites;
        ftr_g.skipped += md->m.skipped;
    }
    if (meta.len) ftr_writer_add_meta(&meta);
    ftr_buf_free(&meta);
    ftr_enc_free(enc);
}

static size_t count_traced(size_t *modules)
{
    size_t used = 0, traced = 0;
    for (size_t k = 0; k < nmods; k++) {
        if (!mods[k].ready || mods[k].gone) continue;
        used++;
        for (size_t i = 0; i < mods[k].m.nsites; i++)
            traced += mods[k].m.sites[i].patched == FTR_SITE_CALL;
    }
    if (modules) *modules = used;
    return traced;
}

size_t ftr_modules_scan(void)
{
    pthread_mutex_lock(&mods_lock);
    int visited = 0;
    dl_iterate_phdr(collect, &visited);
    size_t total = 0;
    for (size_t k = 0; k < nmods; k++)
        total += mods[k].gone ? 0 : mods[k].m.nsites;
    pthread_mutex_unlock(&mods_lock);
    return total;
}

int ftr_modules_patch(char *err, size_t errlen)
{
    pthread_mutex_lock(&mods_lock);
    prepare_new();
    int rc = repatch(err, errlen);
    size_t used;
    ftr_g.patched = count_traced(&used);
    if (rc == 0 && ftr_g.verbose)
        ftr_msg("%llu sites traced in %zu modules (%llu skipped); stopped %u other threads for "
                "%.1f us, moved %u out of a site",
                (unsigned long long)ftr_g.patched, used, (unsigned long long)ftr_g.skipped,
                last_stw.threads, (double)last_stw.ns / 1e3, last_stw.moved_ips);
    pthread_mutex_unlock(&mods_lock);
    return rc;
}

void ftr_modules_describe(struct ftr_buf *out)
{
    struct ftr_enc *enc = ftr_enc_new(ftr_g.zstd_level);
    if (!enc) return;
    pthread_mutex_lock(&mods_lock);
    for (size_t k = 0; k < nmods; k++)
        if (mods[k].ready && !mods[k].gone) describe(enc, &mods[k], out);
    pthread_mutex_unlock(&mods_lock);
    ftr_enc_free(enc);
}

/* After dlopen(): scan and patch what it brought. After dlclose(): forget the modules that are
 * no longer mapped (site indices are never reused, so no stale name can come back). */
void ftr_modules_rescan(void)
{
    if (!ftr_g.ready) return;
    pthread_mutex_lock(&mods_lock);
    for (size_t k = 0; k < nmods; k++)
        mods[k].seen = 0;
    int visited = 0;
    dl_iterate_phdr(collect, &visited);
    for (size_t k = 0; k < nmods; k++) {
        struct mod *md = &mods[k];
        if (md->seen) continue;
        if (!md->gone && md->stubs)
            munmap(md->stubs, md->stubs_len); /* unloaded: nothing can reach them any more */
        md->stubs = NULL;
        md->gone = 1;
        if (md->m.nsites == 0) { /* a site-less placeholder: forget its name too */
            free(md->m.path);
            md->m.path = NULL;
        }
    }
    pthread_mutex_unlock(&mods_lock);
    char err[256];
    if (ftr_modules_patch(err, sizeof err) < 0) ftr_msg("%s; new functions are not traced", err);
}

/* ---- dlopen / dlclose ----
 * A library loaded later is patched as soon as dlopen() returns, under the same handshake.
 * dlopen() searches the calling object's DT_RUNPATH and expands its $ORIGIN: with a wrapper in
 * between, the caller would be libftrace.so. So a bare name is first resolved here along the
 * caller's own search path (dlinfo RTLD_DI_SERINFO on the caller's link map), and the real
 * dlopen() gets the full path; names it cannot resolve go to dlopen() unchanged. */
typedef void *(*dlopen_fn)(const char *, int);
typedef int (*dlclose_fn)(void *);
static dlopen_fn real_dlopen;
static dlclose_fn real_dlclose;

static const char *caller_search(const void *caller, const char *file, char *out, size_t len)
{
    Dl_info di;
    struct link_map *lm = NULL;
    if (!file || strchr(file, '/') || !dladdr1(caller, &di, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
        return file;
    Dl_serinfo size;
    if (dlinfo(lm, RTLD_DI_SERINFOSIZE, &size) != 0 || size.dls_size == 0) return file;
    Dl_serinfo *si = malloc(size.dls_size);
    if (!si) return file;
    *si = size;
    const char *found = file;
    if (dlinfo(lm, RTLD_DI_SERINFO, si) == 0) {
        for (unsigned i = 0; i < si->dls_cnt; i++) {
            snprintf(out, len, "%s/%s", si->dls_serpath[i].dls_name, file);
            if (access(out, R_OK) == 0) {
                found = out;
                break;
            }
        }
    }
    free(si);
    return found;
}

__attribute__((visibility("default"))) void *dlopen(const char *file, int mode)
{
    if (!real_dlopen) real_dlopen = (dlopen_fn)dlsym(RTLD_NEXT, "dlopen");
    if (!real_dlopen) return NULL;
    char path[4096];
    void *h = NULL;
    if (file && !strchr(file, '/'))
        h = real_dlopen(file, mode | RTLD_NOLOAD); /* already loaded: no search happens */
    if (h && !(mode & RTLD_NOLOAD)) {
        if (!real_dlclose) real_dlclose = (dlclose_fn)dlsym(RTLD_NEXT, "dlclose");
        real_dlclose(h); /* undo the NOLOAD reference; the real open takes its own */
        h = real_dlopen(file, mode);
    } else if (!h) {
        h = real_dlopen(caller_search(__builtin_return_address(0), file, path, sizeof path), mode);
        if (!h && file && !strchr(file, '/'))
            h = real_dlopen(file, mode); /* same error message as without us */
    }
    if (h && !(mode & RTLD_NOLOAD)) ftr_modules_rescan();
    return h;
}

__attribute__((visibility("default"))) int dlclose(void *handle)
{
    if (!real_dlclose) real_dlclose = (dlclose_fn)dlsym(RTLD_NEXT, "dlclose");
    int rc = real_dlclose ? real_dlclose(handle) : -1;
    if (rc == 0) ftr_modules_rescan();
    return rc;
}

/* The filter selected no site: say so, with the names that come closest. */
void ftr_modules_say_unmatched(const char *expr)
{
    pthread_mutex_lock(&mods_lock);
    size_t total = 0;
    for (size_t k = 0; k < nmods; k++)
        total += mods[k].ready && !mods[k].gone ? mods[k].m.nsites : 0;
    const char **names = calloc(total ? total : 1, sizeof *names);
    size_t n = 0;
    for (size_t k = 0; names && k < nmods; k++)
        for (size_t i = 0; mods[k].ready && !mods[k].gone && i < mods[k].m.nsites; i++)
            names[n++] = mods[k].m.sites[i].name;
    const char *near[5];
    size_t m = names ? ftr_settings_nearest(names, n, near, 5) : 0;
    char list[512] = "";
    for (size_t i = 0; i < m; i++)
        snprintf(list + strlen(list), sizeof list - strlen(list), "%s%s", i ? ", " : "", near[i]);
    ftr_msg("filter '%s' matches none of the %zu functions%s%s; running untraced", expr, n,
            m ? "; nearest: " : "", list);
    free(names);
    pthread_mutex_unlock(&mods_lock);
}

void ftr_modules_lock(int how)
{
    if (how > 0)
        pthread_mutex_lock(&mods_lock);
    else if (how == 0)
        pthread_mutex_unlock(&mods_lock);
    else
        pthread_mutex_init(&mods_lock, NULL);
}
