/*
 * modules.c - the registry of loaded modules and their sites: find them (patcher/), give each
 * site a process-wide index and a stub near its module, describe them to the trace (MODULE and
 * SITES chunks), and bring every site to the state the settings want.
 *
 * Decide, generate, verify, write: the pokes are computed here without touching text;
 * patcher/text_poke.c checks every site's live bytes against what the scan saw and writes only
 * those that match; the others are counted as skipped. How they are written depends on who
 * else may run the text meanwhile (docs/design.md, "Rewriting live text"):
 *   - no other thread of the program: written as they are (start-up, single-threaded programs);
 *   - other threads: a breakpoint batch (text_poke_live), which no thread can see torn and
 *     which interrupts nobody. -fpatchable-function-entry's five 1-byte NOPs get the sled
 *     states (only their first byte changes) where their module has a sled mirror, and are
 *     converted only alone where it has none.
 * The executable is the first module dl_iterate_phdr() reports; its path is taken once, at
 * start (/proc/self/exe stops resolving when the file is replaced or the main thread exits).
 * dlwrap.c holds the registry's lock across dlopen()/dlclose() and their rescan.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "forkpage.h"
#include "ftr_patcher.h"
#include "libcalls.h"
#include "tracer.h"
#include "values.h"

#define REACH ((int64_t)1 << 31)
/* the stub area's jump slots: ftr_tramp_fentry, ftr_tramp_mcount, ftr_tramp_fentry_chain,
 * ftr_tramp_through */
#define STUB_HEAD 32

struct mod {
    struct ftr_module m;
    uint8_t *stubs; /* stub area: STUB_HEAD bytes of jump slots, then FTR_STUB_SIZE per site */
    size_t stubs_len;
    uint8_t *mirror; /* sled mirror (ftr_x86_sled_target()): jmp to the stub of each 5 x 90 site */
    size_t mirror_len;
    uint32_t id;
    int ready;              /* stubs built and described to the trace */
    int gone;               /* unloaded (dlclose): its sites are forgotten */
    int seen;               /* scratch: found by the last dl_iterate_phdr walk */
    int is_main;            /* the executable */
    int fresh;              /* found by this rescan, loaded while no thread was made */
    struct ftr_libcalls lc; /* its library calls (libcalls.c) */
};

/* dlopen/dlclose/patching; recursive: held across dlopen(), whose constructors may dlopen */
static pthread_mutex_t mods_lock FTR_FORK_PAGE = PTHREAD_RECURSIVE_MUTEX_INITIALIZER_NP;
static struct mod *mods;
static size_t nmods;
static uint32_t next_site = 1, next_module_id;
static char exe_path[4096]; /* the executable, as /proc/self/exe said at start */

/* rewrites that waited for a thread seen running with SIGTRAP blocked, and how long in all
 * (ftrace-ctl status) */
static unsigned blocked_waits, blocked_wait_ms;

/* the last rewrite, for FTRACE_VERBOSE */
static struct {
    const char *how; /* "alone", "live" */
    struct ftr_poke_stats live;
    size_t pokes;
} last;

/* The first functions that could not be traced (ftr_g.skipped counts them all), for the
 * summary line: written under mods_lock, only ever appended to. */
static char skipped_list[256];
static unsigned skipped_listed;
static int skipped_more; /* and others, unnamed or past the first few */

static void note_skipped(const char *name)
{
    if (!name || skipped_listed >= FTR_SKIPPED_NAMES) {
        skipped_more = 1;
        return;
    }
    size_t l = strlen(skipped_list);
    snprintf(skipped_list + l, sizeof skipped_list - l, "%s%s", l ? ", " : "", name);
    skipped_listed++;
}

static void note_skipped_in(const struct ftr_module *m)
{
    const char *p = m->skipped_names;
    for (unsigned i = 0; p && i < m->nskipped_names; i++, p += strlen(p) + 1)
        note_skipped(p);
    if (m->skipped > m->nskipped_names) skipped_more = 1;
}

void ftr_modules_skipped_names(char *out, size_t len)
{
    snprintf(out, len, "%s%s", skipped_list,
             !skipped_more     ? ""
             : skipped_list[0] ? ", ..."
                               : "...");
}

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
    if ((*visited)++ == 0) {
        /* the first module is the executable, whatever /proc/self/exe says now */
        if (!path || !*path) path = exe_path[0] ? exe_path : "[executable]";
    } else if (!path || !*path)
        return 0;
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
    struct ftr_file_id id;
    int clear = ftr_nosites_known(path, &id), rc = 0;
    if (clear ||
        (rc = ftr_module_scan(path, info->dlpi_addr, info->dlpi_phdr, info->dlpi_phnum, &md->m, err,
                              sizeof err)) < 0 ||
        md->m.nsites == 0) {
        /* remembered as a site-less placeholder, so that it is not scanned again */
        if (!clear && rc == 0 && md->m.skipped == 0) ftr_nosites_add(&id);
        ftr_g.skipped += md->m.skipped;
        note_skipped_in(&md->m);
        ftr_module_free(&md->m);
        memset(&md->m, 0, sizeof md->m);
        md->m.path = strdup(path);
        md->m.base = info->dlpi_addr;
        md->gone = 1;
        nmods++;
        return 0;
    }
    md->id = next_module_id++;
    md->is_main = *visited == 1;
    nmods++;
    return 0;
}

/* Maps the stub area within rel32 reach of every site of the module. */
static int map_stubs(struct mod *md)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = (STUB_HEAD + md->m.nsites * FTR_STUB_SIZE + page - 1) & ~(page - 1);
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
    uint64_t tramp[4] = {(uint64_t)ftr_tramp_fentry, (uint64_t)ftr_tramp_mcount,
                         (uint64_t)ftr_tramp_fentry_chain, (uint64_t)ftr_tramp_through};
    memcpy(md->stubs, tramp, sizeof tramp);
    for (size_t i = 0; i < md->m.nsites; i++) {
        struct ftr_site *s = &md->m.sites[i];
        s->index = next_site++;
        if (s->through && !ftr_through_publish(s)) s->through = 0;
        uint64_t at = base + STUB_HEAD + i * FTR_STUB_SIZE;
        unsigned tr = s->through ? 3 : s->mcount ? 1 : s->chain ? 2 : 0;
        if (ftr_x86_gen_stub(md->stubs + STUB_HEAD + i * FTR_STUB_SIZE, at, s->index,
                             base + 8 * tr) < 0)
            return -1;
    }
    if (mprotect(md->stubs, md->stubs_len, PROT_READ | PROT_EXEC) < 0) return -1;
    ftr_unwind_code_add(md->stubs, md->stubs_len);
    return 0;
}

static uint64_t stub_of(const struct mod *md, size_t i)
{
    return (uint64_t)md->stubs + STUB_HEAD + i * FTR_STUB_SIZE;
}

/* Is site i a 5 x 90 sled given the sled states (its mirror exists)? */
static int sled(const struct mod *md, const struct ftr_site *s)
{
    return md->mirror && s->shape == FTR_SHAPE_NOPS && s->len == 5;
}

/* The sled mirror: for each 5 x 90 site, at ftr_x86_sled_target(site), a jmp to its stub.
 * Without one (the address range is taken), such sites are only rewritten alone. */
static void map_mirror(struct mod *md)
{
    uint64_t lo = UINT64_MAX, hi = 0;
    for (size_t i = 0; i < md->m.nsites; i++) {
        const struct ftr_site *s = &md->m.sites[i];
        if (s->shape != FTR_SHAPE_NOPS || s->len != 5) continue;
        uint64_t t = ftr_x86_sled_target(s->addr);
        if (t < lo) lo = t;
        if (t + 5 > hi) hi = t + 5;
    }
    if (hi == 0) return;
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    lo &= ~(uint64_t)(page - 1);
    size_t len = (size_t)((hi - lo + page - 1) & ~(uint64_t)(page - 1));
    void *p = mmap((void *)lo, len, PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return;
    if ((uint64_t)p != lo) {
        munmap(p, len);
        return;
    }
    for (size_t i = 0; i < md->m.nsites; i++) {
        const struct ftr_site *s = &md->m.sites[i];
        if (s->shape != FTR_SHAPE_NOPS || s->len != 5) continue;
        uint64_t t = ftr_x86_sled_target(s->addr);
        if (ftr_x86_gen_jmp((uint8_t *)p + (t - lo), 5, t, stub_of(md, i)) < 0) {
            munmap(p, len);
            return;
        }
    }
    if (mprotect(p, len, PROT_READ | PROT_EXEC) < 0) {
        munmap(p, len);
        return;
    }
    md->mirror = p;
    md->mirror_len = len;
    ftr_unwind_code_add(p, len);
}

/* The bytes of site i in a state (enum ftr_site_state). @return 0, or -1 (out of reach). */
static int state_bytes(const struct mod *md, size_t i, int state, uint8_t *out)
{
    const struct ftr_site *s = &md->m.sites[i];
    if (state == FTR_SITE_ORIGINAL || (state == FTR_SITE_NOP && sled(md, s))) {
        memcpy(out, s->orig, s->len);
        return 0;
    }
    if (state == FTR_SITE_NOP) {
        ftr_x86_gen_nop(out, s->len);
        return 0;
    }
    /* call-through: a jmp (the stub's trampoline calls the body itself) */
    int (*gen)(uint8_t *, unsigned, uint64_t, uint64_t) =
        s->through ? ftr_x86_gen_jmp : ftr_x86_gen_call;
    if (sled(md, s)) return gen(out, s->len, s->addr, ftr_x86_sled_target(s->addr));
    return gen(out, s->len, s->addr, stub_of(md, i));
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
    size_t n = md->m.nsites + md->lc.n;
    struct ftr_site_info *si = calloc(n, sizeof *si);
    if (!si) return;
    for (size_t i = 0; i < n; i++) {
        const struct ftr_site *s = i < md->m.nsites ? &md->m.sites[i] : &md->lc.v[i - md->m.nsites];
        si[i] = (struct ftr_site_info){.site = s->index,
                                       .addr = s->addr,
                                       .func = s->func,
                                       .name = s->name,
                                       .kind = s->libcall ? FTR_SITE_LIBCALL : FTR_SITE_FUNCTION};
    }
    ftr_enc_sites(enc, ftr_g.pid, md->id, si, n, out);
    free(si);
}

struct patch_job {
    struct ftr_poke *pokes;
    size_t n;
    size_t *bad; /* indices of the pokes refused for unexpected bytes */
    long refused;
};

/* The state a site should be in: a call to its stub when its function is selected. */
static int wanted(const struct mod *md, const struct ftr_site *s)
{
    return (int)ftr_site_wanted(md->m.path, md->is_main, s);
}

/* The pid of a debugger attached to this process, or 0. Under a debugger an int3 of ours stops
 * the thread in the debugger, which would resume it after the int3, inside the site. */
static int debugger_pid(void)
{
    char buf[4096];
    int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    ssize_t n = read(fd, buf, sizeof buf - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    const char *p = strstr(buf, "\nTracerPid:");
    return p ? atoi(p + 11) : 0;
}

static uint64_t ns_since(const struct timespec *a)
{
    struct timespec b;
    clock_gettime(CLOCK_MONOTONIC, &b);
    return (uint64_t)(b.tv_sec - a->tv_sec) * 1000000000u + (uint64_t)b.tv_nsec -
           (uint64_t)a->tv_nsec;
}

/* How a job may be written: live where other threads run (W_LIVE), never live (W_ALONE_ONLY:
 * 5 x 90 sites without a mirror), or, for the text of a module just loaded while no thread was
 * made, which no other thread can be running yet: live where possible, else alone (W_FRESH),
 * or alone (W_FRESH_ALONE: its 5 x 90 sites without a mirror). */
enum { W_LIVE, W_ALONE_ONLY, W_FRESH, W_FRESH_ALONE };

static int write_alone(struct patch_job *job, const char *how, const struct timespec *t0, char *err,
                       size_t errlen)
{
    last.how = how;
    job->refused = ftr_text_poke(job->pokes, job->n, job->bad, job->n);
    last.live.ns = ns_since(t0);
    if (job->refused < 0) snprintf(err, errlen, "cannot rewrite code: %s", strerror(errno));
    return job->refused < 0 ? -1 : 0;
}

/* Writes the pokes, alone or live (see the top of this file).
 * @return 0, -1 (err: the write failed), -2 (err: live needed and not possible). */
static int write_pokes(struct patch_job *job, int how, char *err, size_t errlen)
{
    int alone_only = how == W_ALONE_ONLY;
    memset(&last, 0, sizeof last);
    last.pokes = job->n;
    struct timespec t0;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    if (ftr_stw_others() == 0) return write_alone(job, "alone", &t0, err, errlen);
    if (how == W_FRESH_ALONE) return write_alone(job, "alone (just loaded)", &t0, err, errlen);
    int dbg = debugger_pid(), blocker = dbg ? 0 : ftr_stw_blocking_running(SIGTRAP);
    /* a thread pthread_create() is starting runs with every signal blocked for a moment */
    /* (text just loaded is written alone instead: no need to wait) */
    blocked_waits += blocker > 0 && how != W_FRESH;
    for (int i = 0; blocker > 0 && how != W_FRESH && i < 200; i++) {
        struct timespec ms = {0, 1000 * 1000};
        nanosleep(&ms, NULL);
        blocker = ftr_stw_blocking_running(SIGTRAP);
        blocked_wait_ms++;
    }
    if (alone_only)
        snprintf(err, errlen,
                 "the 1-byte NOPs of -fpatchable-function-entry code cannot be "
                 "rewritten while other threads run");
    else if (dbg > 0)
        snprintf(err, errlen,
                 "a debugger (pid %d) is attached: code is not rewritten while other threads run",
                 dbg);
    else if (blocker > 0) /* it would die of the first int3 it met */
        snprintf(err, errlen,
                 "thread %d runs with SIGTRAP blocked: code is not rewritten while it runs",
                 blocker);
    if ((dbg > 0 || blocker > 0) && how == W_FRESH)
        return write_alone(job, "alone (just loaded)", &t0, err, errlen);
    if (alone_only || dbg > 0 || blocker > 0) return -2;
    last.how = "live";
    job->refused = ftr_text_poke_live(job->pokes, job->n, job->bad, job->n, &last.live);
    if (job->refused < 0)
        snprintf(err, errlen, "cannot rewrite code while other threads run: %s",
                 errno == ENOTRECOVERABLE ? "an earlier rewrite failed half-way" : strerror(errno));
    return job->refused < 0 ? -1 : 0;
}

/* Marks the sites of pokes [0, n) after a write: refused ones broken, the others in their new
 * state. */
static void settle(const struct patch_job *job, struct ftr_site **which, const uint8_t *want)
{
    size_t nbad = job->refused > 0 ? (size_t)job->refused : 0;
    for (size_t i = 0, b = 0; i < job->n; i++) {
        if (b < nbad && job->bad[b] == i) {
            b++;
            which[i]->patched = FTR_SITE_BROKEN;
            ftr_g.skipped++;
            note_skipped(which[i]->name);
            continue;
        }
        which[i]->patched = want[i];
    }
}

/* Rewrites every ready site whose state differs from wanted(). Must hold mods_lock.
 * @return 0 or -1 (err). */
static int repatch(char *err, size_t errlen)
{
    size_t total = 0;
    for (size_t k = 0; k < nmods; k++)
        total += mods[k].ready && !mods[k].gone ? mods[k].m.nsites : 0;
    size_t bytes =
        total * (sizeof(struct ftr_poke) + sizeof(struct ftr_site *) + sizeof(size_t) + 1);
    uint8_t *mem = ftr_mmap_zero(bytes);
    if (!mem) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    struct ftr_poke *pokes = (struct ftr_poke *)mem;
    struct ftr_site **which = (struct ftr_site **)(pokes + total);
    size_t *bad = (size_t *)(which + total);
    uint8_t *want = (uint8_t *)(bad + total);
    /* In groups, written in this order: the pokes that may be written live (W_LIVE), those of
     * modules just loaded while no thread was made (W_FRESH, then their W_FRESH_ALONE ones),
     * and the first conversions of 5 x 90 sites that have no sled mirror (W_ALONE_ONLY). */
    static const int order[4] = {W_LIVE, W_FRESH, W_FRESH_ALONE, W_ALONE_ONLY};
    size_t n = 0, from[5] = {0};
    for (int g = 0; g < 4; g++) {
        from[g] = n;
        for (size_t k = 0; k < nmods; k++) {
            struct mod *md = &mods[k];
            if (!md->ready || md->gone) continue;
            for (size_t i = 0; i < md->m.nsites; i++) {
                struct ftr_site *s = &md->m.sites[i];
                int w = wanted(md, s);
                if (s->patched == w || s->patched == FTR_SITE_BROKEN) continue;
                int alone_only =
                    s->shape == FTR_SHAPE_NOPS && !sled(md, s) && s->patched == FTR_SITE_ORIGINAL;
                int how = md->fresh ? (alone_only ? W_FRESH_ALONE : W_FRESH)
                                    : (alone_only ? W_ALONE_ONLY : W_LIVE);
                if (how != order[g]) continue;
                struct ftr_poke *p = &pokes[n];
                p->addr = s->addr;
                p->len = s->len;
                if (state_bytes(md, i, s->patched, p->expect) < 0 ||
                    state_bytes(md, i, w, p->bytes) < 0)
                    continue;
                want[n] = (uint8_t)w;
                which[n++] = s;
            }
        }
    }
    from[4] = n;
    int rc = 0;
    for (int g = 0; g < 4 && rc == 0; g++) {
        size_t lo = from[g], hi = from[g + 1];
        if (lo == hi) continue;
        struct patch_job job = {.pokes = pokes + lo, .n = hi - lo, .bad = bad};
        rc = write_pokes(&job, order[g], err, errlen);
        if (rc == 0) {
            settle(&job, which + lo, want + lo);
        } else if (rc == -2 && order[g] == W_ALONE_ONLY) {
            /* never: a thread could be stopped between two of the NOPs */
            ftr_msg("%s: %zu functions are not traced", err, hi - lo);
            for (size_t i = lo; i < hi; i++) {
                which[i]->patched = FTR_SITE_BROKEN;
                ftr_g.skipped++;
                note_skipped(which[i]->name);
            }
            rc = 0;
        }
    }
    if (rc == -2) rc = -1;
    ftr_munmap(mem, bytes);
    /* library calls: one atomic store per GOT slot, whoever runs */
    for (size_t k = 0; k < nmods; k++)
        if (mods[k].ready && !mods[k].gone) ftr_libcalls_apply(&mods[k].lc);
    return rc;
}

/* Does a module with sites hold addr? Its functions are traced there, not as library calls. */
static int traced_at(uint64_t addr)
{
    for (size_t k = 0; k < nmods; k++)
        if (!mods[k].gone && mods[k].m.nsites && addr >= mods[k].m.lo && addr < mods[k].m.hi)
            return 1;
    return 0;
}

/* Builds the stubs of the modules found since the last call and describes them to the trace.
 * Must hold mods_lock. */
static void prepare_new(int fresh)
{
    struct ftr_enc *enc = ftr_enc_new(ftr_cfg.zstd_level);
    struct ftr_buf meta = {0};
    for (size_t k = 0; k < nmods; k++) {
        struct mod *md = &mods[k];
        if (md->ready || md->gone) continue;
        ftr_through_decide(&md->m);
        ftr_values_module(&md->m);
        if (build_stubs(md) < 0) {
            ftr_msg("%s: no room for stubs within reach; its functions are not traced", md->m.path);
            md->gone = 1;
            continue;
        }
        map_mirror(md);
        ftr_libcalls_scan(&md->m, md->is_main, &next_site, traced_at, &md->lc);
        md->ready = 1;
        md->fresh = fresh;
        if (enc) describe(enc, md, &meta);
        ftr_g.sites += md->m.nsites;
        ftr_g.libcalls += md->lc.n;
        ftr_g.skipped += md->m.skipped;
        note_skipped_in(&md->m);
    }
    if (meta.len) ftr_writer_add_meta(&meta);
    ftr_buf_free(&meta);
    ftr_enc_free(enc);
}

static size_t count_traced(size_t *modules, uint64_t *through)
{
    size_t used = 0, traced = 0, thru = 0;
    for (size_t k = 0; k < nmods; k++) {
        if (!mods[k].ready || mods[k].gone) continue;
        used++;
        for (size_t i = 0; i < mods[k].m.nsites; i++) {
            const struct ftr_site *s = &mods[k].m.sites[i];
            traced += s->patched == FTR_SITE_CALL;
            thru += s->patched == FTR_SITE_CALL && s->through;
        }
        traced += ftr_libcalls_traced(&mods[k].lc);
    }
    if (modules) *modules = used;
    if (through) *through = thru;
    return traced;
}

size_t ftr_modules_scan(void)
{
    pthread_mutex_lock(&mods_lock);
    if (!exe_path[0]) { /* once, at start: later it may no longer resolve */
        ssize_t n = readlink("/proc/self/exe", exe_path, sizeof exe_path - 1);
        exe_path[n > 0 ? n : 0] = 0;
    }
    int visited = 0;
    dl_iterate_phdr(collect, &visited);
    size_t total = 0;
    for (size_t k = 0; k < nmods; k++)
        total += mods[k].gone ? 0 : mods[k].m.nsites;
    pthread_mutex_unlock(&mods_lock);
    return total;
}

/* ftr_modules_patch() with the modules found now taken as just loaded (fresh) or not */
static int patch(int fresh, char *err, size_t errlen)
{
    pthread_mutex_lock(&mods_lock);
    prepare_new(fresh);
    int rc = repatch(err, errlen);
    for (size_t k = 0; k < nmods; k++)
        mods[k].fresh = 0;
    size_t used;
    ftr_g.patched = count_traced(&used, &ftr_g.through);
    if (rc == 0 && ftr_cfg.verbose && last.how)
        ftr_msg("%llu sites traced (%llu called through) in %zu modules (%llu skipped); %zu "
                "rewritten %s: %.1f us, %llu threads trapped",
                (unsigned long long)ftr_g.patched, (unsigned long long)ftr_g.through, used,
                (unsigned long long)ftr_g.skipped, last.pokes, last.how, (double)last.live.ns / 1e3,
                (unsigned long long)last.live.traps);
    pthread_mutex_unlock(&mods_lock);
    return rc;
}

int ftr_modules_patch(char *err, size_t errlen)
{
    return patch(0, err, errlen);
}

void ftr_modules_blocked_waits(unsigned *rewrites, unsigned *ms)
{
    pthread_mutex_lock(&mods_lock);
    *rewrites = blocked_waits;
    *ms = blocked_wait_ms;
    pthread_mutex_unlock(&mods_lock);
}

void ftr_modules_describe(struct ftr_buf *out)
{
    struct ftr_enc *enc = ftr_enc_new(ftr_cfg.zstd_level);
    if (!enc) return;
    pthread_mutex_lock(&mods_lock);
    for (size_t k = 0; k < nmods; k++)
        if (mods[k].ready && !mods[k].gone) describe(enc, &mods[k], out);
    pthread_mutex_unlock(&mods_lock);
    ftr_enc_free(enc);
}

/* Is any page holding a site of md still mapped? (msync fails with ENOMEM on unmapped memory) */
static int text_mapped(const struct mod *md)
{
    long ps = sysconf(_SC_PAGESIZE);
    uint64_t page = ps > 0 ? (uint64_t)ps : 4096, prev = 0;
    for (size_t i = 0; i < md->m.nsites; i++) {
        uint64_t pg = md->m.sites[i].addr & ~(page - 1);
        if (pg == prev) continue;
        prev = pg;
        if (msync((void *)(uintptr_t)pg, page, MS_ASYNC) == 0 || errno != ENOMEM) return 1;
    }
    return 0;
}

/* After dlopen(): scan and patch what it brought. After dlclose(): forget the modules that are
 * no longer mapped (site indices are never reused, so no stale name can come back). */
void ftr_modules_rescan(int fresh_alone)
{
    if (!ftr_g.ready) return;
    pthread_mutex_lock(&mods_lock);
    for (size_t k = 0; k < nmods; k++)
        mods[k].seen = 0;
    int visited = 0;
    dl_iterate_phdr(collect, &visited);
    for (size_t k = 0; k < nmods; k++) {
        struct mod *md = &mods[k];
        if (md->seen || md->is_main) continue; /* the executable never goes */
        /* Unloaded: nothing can reach its stubs any more, once its text is really gone; if the
         * pages are still mapped (or mapped again), the stubs stay (a page or so, for good). */
        int text_gone = !md->gone && md->stubs && !text_mapped(md);
        ftr_libcalls_free(&md->lc, text_gone);
        if (text_gone) {
            ftr_unwind_code_remove(md->stubs);
            munmap(md->stubs, md->stubs_len);
            if (md->mirror) {
                ftr_unwind_code_remove(md->mirror);
                munmap(md->mirror, md->mirror_len);
            }
        }
        md->stubs = NULL;
        md->mirror = NULL;
        md->gone = 1;
        if (md->m.nsites == 0) { /* a site-less placeholder: forget its name too */
            free(md->m.path);
            md->m.path = NULL;
        }
    }
    pthread_mutex_unlock(&mods_lock);
    char err[256];
    if (patch(fresh_alone, err, sizeof err) < 0) ftr_msg("%s; new functions are not traced", err);
}

void ftr_modules_values_refresh(void)
{
    pthread_mutex_lock(&mods_lock);
    for (size_t k = 0; k < nmods; k++)
        if (mods[k].ready && !mods[k].gone) ftr_values_module(&mods[k].m);
    pthread_mutex_unlock(&mods_lock);
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
    else {
        pthread_mutexattr_t a;
        pthread_mutexattr_init(&a);
        pthread_mutexattr_settype(&a, PTHREAD_MUTEX_RECURSIVE);
        pthread_mutex_init(&mods_lock, &a);
        pthread_mutexattr_destroy(&a);
    }
}
