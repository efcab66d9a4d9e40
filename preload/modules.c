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
#include <errno.h>
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
    uint8_t *stubs;      /* stub area: 2 jump slots, then FTR_STUB_SIZE bytes per site */
    size_t stubs_len;
    uint32_t id;
};

static struct mod *mods;
static size_t nmods;
static uint32_t next_site = 1;

static int is_self(const struct dl_phdr_info *info)
{
    Dl_info di;
    if (!dladdr((void *)ftr_modules_patch_all, &di))
        return 0;
    return (uintptr_t)di.dli_fbase == info->dlpi_addr ||
           (info->dlpi_name && di.dli_fname && strcmp(info->dlpi_name, di.dli_fname) == 0 &&
            info->dlpi_name[0]);
}

static int collect(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    (void)arg;
    static int visited;
    const char *path = info->dlpi_name;
    char exe[4096];
    if (!path || !*path) {
        if (visited++ > 0)
            return 0; /* only the first module, unnamed, is the executable */
        ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
        if (n <= 0)
            return 0;
        exe[n] = 0;
        path = exe;
    }
    else
        visited++;
    if (strstr(path, "linux-vdso") || is_self(info))
        return 0;
    struct mod *nm = realloc(mods, (nmods + 1) * sizeof *mods);
    if (!nm)
        return 1;
    mods = nm;
    struct mod *md = &mods[nmods];
    memset(md, 0, sizeof *md);
    char err[256];
    if (ftr_module_scan(path, info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum, &md->m, err,
                        sizeof err) < 0 ||
        md->m.nsites == 0) {
        if (md->m.skipped)
            ftr_g.skipped += md->m.skipped;
        ftr_module_free(&md->m);
        return 0;
    }
    md->id = (uint32_t)nmods;
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
            if ((int64_t)(hi - at) >= REACH - 64 || (int64_t)(at + len - lo) >= REACH - 64)
                break;
            void *p = mmap((void *)at, len, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
            if (p == MAP_FAILED)
                continue;
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
    if (map_stubs(md) < 0)
        return -1;
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
    if (!si)
        return;
    for (size_t i = 0; i < md->m.nsites; i++) {
        const struct ftr_site *s = &md->m.sites[i];
        si[i] = (struct ftr_site_info){.site = s->index, .addr = s->addr, .func = s->func,
                                       .name = s->name};
    }
    ftr_enc_sites(enc, ftr_g.pid, md->id, si, md->m.nsites, out);
    free(si);
}

struct patch_job {
    struct ftr_poke *pokes;
    size_t n;
    long refused;
};

static int apply(void *arg)
{
    struct patch_job *job = arg;
    size_t bad[1];
    job->refused = ftr_text_poke(job->pokes, job->n, bad, 0);
    return job->refused < 0 ? -1 : 0;
}

/* A parked thread whose ip is inside a site being rewritten resumes after it. */
static uint64_t fix_ip(void *arg, uint64_t ip)
{
    (void)arg;
    for (size_t k = 0; k < nmods; k++) {
        const struct ftr_module *m = &mods[k].m;
        if (ip < m->lo || ip >= m->hi || !m->nsites)
            continue;
        size_t lo = 0, hi = m->nsites;
        while (lo < hi) { /* last site with addr < ip */
            size_t mid = (lo + hi) / 2;
            if (m->sites[mid].addr < ip)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo > 0)
            return ftr_site_fixup_ip(&m->sites[lo - 1], ip);
    }
    return ip;
}

static int cmp_poke(const void *a, const void *b)
{
    const struct ftr_poke *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

int ftr_modules_patch_all(char *err, size_t errlen)
{
    if (ftr_stw_init(ftr_g.stw_signal, err, errlen) < 0)
        return -1;
    ftr_stw_ignore((int)ftr_writer_tid);
    dl_iterate_phdr(collect, NULL);

    size_t total = 0;
    for (size_t k = 0; k < nmods; k++)
        total += mods[k].m.nsites;
    if (total == 0) {
        snprintf(err, errlen,
                 "no function entry hooks found: build with -pg -mfentry (or -pg, "
                 "-mnop-mcount -mrecord-mcount, -fpatchable-function-entry=5)");
        return -1;
    }

    struct ftr_enc *enc = ftr_enc_new(ftr_g.zstd_level);
    struct ftr_buf meta = {0};
    struct ftr_poke *pokes = calloc(total, sizeof *pokes);
    if (!enc || !pokes) {
        snprintf(err, errlen, "out of memory");
        free(pokes);
        ftr_enc_free(enc);
        return -1;
    }
    size_t n = 0;
    for (size_t k = 0; k < nmods; k++) {
        struct mod *md = &mods[k];
        if (!md->m.nsites)
            continue;
        if (build_stubs(md) < 0) {
            ftr_msg("%s: no room for stubs within reach; its functions are not traced",
                    md->m.path);
            continue;
        }
        describe(enc, md, &meta);
        for (size_t i = 0; i < md->m.nsites; i++) {
            const struct ftr_site *s = &md->m.sites[i];
            struct ftr_poke *p = &pokes[n];
            p->addr = s->addr;
            p->len = s->len;
            memcpy(p->expect, s->orig, s->len);
            if (ftr_x86_gen_call(p->bytes, s->len, s->addr, stub_of(md, i)) == 0)
                n++;
        }
        ftr_g.sites += md->m.nsites;
        ftr_g.skipped += md->m.skipped;
    }
    ftr_writer_add_meta(&meta);
    ftr_buf_free(&meta);
    ftr_enc_free(enc);

    qsort(pokes, n, sizeof *pokes, cmp_poke);
    struct patch_job job = {.pokes = pokes, .n = n};
    struct ftr_stw_stats st;
    int rc = ftr_stw_run(apply, fix_ip, &job, STW_TIMEOUT_MS, &st, err, errlen);
    free(pokes);
    if (rc < 0) {
        if (job.refused < 0)
            snprintf(err, errlen, "cannot rewrite code: %s", strerror(errno));
        return -1;
    }
    ftr_g.patched = n - (size_t)job.refused;
    ftr_g.skipped += (size_t)job.refused;
    if (ftr_g.verbose) {
        size_t used = 0;
        for (size_t k = 0; k < nmods; k++)
            used += mods[k].m.nsites > 0;
        ftr_msg("patched %llu of %llu sites in %zu modules (%llu skipped); stopped %u other "
                "threads for %.1f us, moved %u out of a site",
                (unsigned long long)ftr_g.patched, (unsigned long long)ftr_g.sites, used,
                (unsigned long long)ftr_g.skipped, st.threads, (double)st.ns / 1e3,
                st.moved_ips);
    }
    return 0;
}
