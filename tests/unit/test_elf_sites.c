/*
 * test_elf_sites.c - site discovery (patcher/elf_sites.c) and live rewriting
 * (patcher/text_poke.c) on real code.
 *
 * Each test builds a small shared object at run time with the system gcc / clang and one set of
 * instrumentation flags, dlopens it, scans it and checks the exact functions and shapes found;
 * then it rewrites every site to the NOP state, to the CALL state (through real per-site stubs
 * to a counting trampoline) and back to the original bytes, calling the functions at each step.
 * Flag sets that need non-PIC code (-mnop-mcount) still link into a .so: the test functions use
 * no absolute addresses, only __mcount_loc gets (TEXTREL) relocations.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ftr_patcher.h"

/* ---- the code under test, compiled at run time ---- */

static const char test_source[] =
    "#include <string.h>\n"
    "__attribute__((noinline)) int t_leaf(int x) { return x * 3 + 1; }\n"
    "extern int t_alias(int) __attribute__((weak, alias(\"t_leaf\")));\n"
    "static __attribute__((noinline)) int t_static(int x) { return (x ^ 5) + 7; }\n"
    "/* called through a pointer so that it keeps its name and signature (no clones) */\n"
    "static int (*volatile t_static_ptr)(int) = t_static;\n"
    "int t_caller(int x) { return t_static_ptr(x) + t_leaf(x + 1); }\n"
    "double t_many(double a, int b, long c, float d, const char *e, int f, int g)\n"
    "{ return a * 2 + b + c + d + e[0] + f + g; }\n"
    "int t_aligned(int x)\n"
    "{\n"
    "    int __attribute__((aligned(64))) v[4] = {x, x + 1, x + 2, x + 3};\n"
    "    __asm__ volatile(\"\" : : \"r\"(v) : \"memory\");\n"
    "    return v[0] + v[3];\n"
    "}\n"
    "int t_huge(int x)\n"
    "{\n"
    "    volatile char a[100000];\n"
    "    a[(unsigned)x % sizeof a] = (char)x;\n"
    "    return a[(unsigned)x % sizeof a] + 1;\n"
    "}\n"
    "/* a VLA plus an over-aligned local: gcc realigns through a DRAP register */\n"
    "int t_drap(int n)\n"
    "{\n"
    "    char __attribute__((aligned(64))) a[64];\n"
    "    char buf[n > 0 && n < 256 ? n : 1];\n"
    "    memset(buf, 1, sizeof buf);\n"
    "    a[0] = buf[0];\n"
    "    __asm__ volatile(\"\" : : \"r\"(a), \"r\"(buf) : \"memory\");\n"
    "    return a[0] + (int)sizeof buf;\n"
    "}\n";

static const char *const all_funcs[] = {"t_leaf",    "t_static", "t_caller", "t_many",
                                        "t_aligned", "t_huge",   "t_drap"};
#define NFUNCS (sizeof all_funcs / sizeof all_funcs[0])

struct fns {
    int (*leaf)(int), (*caller)(int), (*aligned)(int), (*huge)(int), (*drap)(int);
    double (*many)(double, int, long, float, const char *, int, int);
};

struct results {
    int leaf, caller, aligned, huge, drap;
    double many;
};

static struct results call_all(const struct fns *f)
{
    struct results r;
    r.leaf = f->leaf(5);
    r.caller = f->caller(9);
    r.many = f->many(1.5, 2, 3, 4.0f, "A", 6, 7);
    r.aligned = f->aligned(10);
    r.huge = f->huge(12345);
    r.drap = f->drap(20);
    return r;
}

static void assert_results(const struct results *a, const struct results *b, const char *when)
{
    cr_assert(a->leaf == b->leaf && a->caller == b->caller && a->many == b->many &&
                  a->aligned == b->aligned && a->huge == b->huge && a->drap == b->drap,
              "results changed %s", when);
}

/* ---- temporary directory ---- */

static char tmpdir[64];

static void rm_tmpdir(void)
{
    if (!tmpdir[0]) return;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", tmpdir);
    tmpdir[0] = 0;
}

TestSuite(elf_sites, .fini = rm_tmpdir);

static void make_tmpdir(void)
{
    strcpy(tmpdir, "/tmp/ftr_elf_sites_XXXXXX");
    cr_assert_not_null(mkdtemp(tmpdir));
    char path[128];
    snprintf(path, sizeof path, "%s/t.c", tmpdir);
    FILE *f = fopen(path, "w");
    cr_assert_not_null(f);
    fputs(test_source, f);
    fclose(f);
}

static int have_compiler(const char *cc)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", cc);
    return system(cmd) == 0;
}

/* Builds tmpdir/<name>.so; the compiler's messages go to tmpdir/<name>.log. */
static void build(const char *name, const char *cc, const char *flags, const char *ldflags,
                  char *so, size_t solen)
{
    char cmd[1024];
    snprintf(so, solen, "%s/%s.so", tmpdir, name);
    snprintf(cmd, sizeof cmd, "%s %s -shared %s -o '%s' '%s/t.c' >'%s/%s.log' 2>&1", cc, flags,
             ldflags, so, tmpdir, tmpdir, name);
    int rc = system(cmd);
    if (rc != 0) {
        char log[128];
        snprintf(log, sizeof log, "cat '%s/%s.log' >&2", tmpdir, name);
        if (system(log) != 0) fprintf(stderr, "(no log)\n");
    }
    cr_assert_eq(rc, 0, "build failed: %s", cmd);
}

/* ---- the loaded module ---- */

struct loaded {
    const char *path;
    uint64_t base;
    const void *phdr;
    unsigned phnum;
    int found;
};

static int find_module(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct loaded *l = arg;
    if (!info->dlpi_name || strcmp(info->dlpi_name, l->path)) return 0;
    l->base = info->dlpi_addr;
    l->phdr = info->dlpi_phdr;
    l->phnum = info->dlpi_phnum;
    l->found = 1;
    return 1;
}

static void *load(const char *so, struct loaded *l, struct fns *f)
{
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(h, "dlopen: %s", dlerror());
    *l = (struct loaded){.path = so};
    dl_iterate_phdr(find_module, l);
    cr_assert(l->found, "%s not in dl_iterate_phdr", so);
    f->leaf = (int (*)(int))dlsym(h, "t_leaf");
    f->caller = (int (*)(int))dlsym(h, "t_caller");
    f->aligned = (int (*)(int))dlsym(h, "t_aligned");
    f->huge = (int (*)(int))dlsym(h, "t_huge");
    f->drap = (int (*)(int))dlsym(h, "t_drap");
    f->many = (double (*)(double, int, long, float, const char *, int, int))dlsym(h, "t_many");
    cr_assert(f->leaf && f->caller && f->aligned && f->huge && f->drap && f->many);
    return h;
}

/* ---- CALL state: per-site stubs and a counting trampoline ----
 * The stub leaves the site index in the red zone, at -128 from rsp on the trampoline's first
 * byte; the trampoline counts, touching nothing else but the flags. */
unsigned test_hits[64];
void test_tramp(void);
__asm__(".text\n"
        ".globl test_tramp\n"
        ".type test_tramp, @function\n"
        "test_tramp:\n"
        "    push %rax\n"
        "    push %rcx\n"
        "    mov -112(%rsp), %ecx\n" /* -128 from rsp before the two pushes */
        "    lea test_hits(%rip), %rax\n"
        "    lock incl (%rax,%rcx,4)\n"
        "    pop %rcx\n"
        "    pop %rax\n"
        "    ret\n"
        ".size test_tramp, .-test_tramp\n");

#define STUB_PAGE 4096

/* An RX page within rel32 reach of [lo, hi): slot (the trampoline's address) then stubs. */
static uint8_t *make_stubs(const struct ftr_module *m)
{
    uint8_t *page = NULL;
    for (uint64_t d = 1ull << 24; d < 1ull << 30 && !page; d <<= 1) {
        uint64_t hints[2] = {(m->hi + d) & ~(uint64_t)(STUB_PAGE - 1),
                             (m->lo - d) & ~(uint64_t)(STUB_PAGE - 1)};
        for (int k = 0; k < 2 && !page; k++) {
            void *p = mmap((void *)(uintptr_t)hints[k], STUB_PAGE, PROT_READ | PROT_WRITE,
                           MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
            if (p == MAP_FAILED) continue;
            if ((uint64_t)(uintptr_t)p != hints[k]) {
                munmap(p, STUB_PAGE);
                continue;
            }
            page = p;
        }
    }
    cr_assert_not_null(page, "no page near the module");
    uint64_t slot = (uint64_t)(uintptr_t)page;
    uint64_t tramp = (uint64_t)(uintptr_t)test_tramp;
    memcpy(page, &tramp, 8);
    cr_assert_lt(16 + m->nsites * FTR_STUB_SIZE, (size_t)STUB_PAGE);
    for (size_t i = 0; i < m->nsites; i++) {
        uint8_t *stub = page + 16 + i * FTR_STUB_SIZE;
        cr_assert_eq(ftr_x86_gen_stub(stub, (uint64_t)(uintptr_t)stub, (uint32_t)(i + 1), slot), 0);
    }
    cr_assert_eq(mprotect(page, STUB_PAGE, PROT_READ | PROT_EXEC), 0);
    return page;
}

/* ---- one flag set ---- */

struct config {
    const char *name, *cc, *flags, *ldflags;
    const char *method;
    unsigned shape;
    uint8_t len;
    int mcount;
    int entry;     /* offset of an entry site from the function start (endbr64: 4) */
    int drap_skip; /* gcc mcount-style: t_drap is refused (counted in skipped) */
    int stripped;  /* no .symtab: t_static is named after its offset */
};

static const struct ftr_site *site_named(const struct ftr_module *m, const char *name)
{
    for (size_t i = 0; i < m->nsites; i++)
        if (!strcmp(m->sites[i].name, name)) return &m->sites[i];
    return NULL;
}

static void check_sites(const struct config *c, const struct ftr_module *m, void *h,
                        const struct loaded *l)
{
    cr_assert_str_eq(m->method, c->method);
    cr_assert_eq(m->base, l->base);
    cr_assert_str_eq(m->path, l->path);
    cr_assert_eq(m->build_id_len, 20, "GNU build-id (sha1)");
    cr_assert(m->lo <= l->base + 0x1000 && m->hi > m->lo);
    size_t want = NFUNCS - (c->drap_skip ? 1 : 0);
    cr_assert_eq(m->nsites, want, "%s: %zu sites, expected %zu", c->name, m->nsites, want);
    cr_assert_eq(m->skipped, c->drap_skip ? 1u : 0u, "%s: skipped %zu", c->name, m->skipped);

    for (size_t i = 0; i < m->nsites; i++) {
        const struct ftr_site *s = &m->sites[i];
        if (i) cr_assert_gt(s->addr, m->sites[i - 1].addr, "sorted, no duplicates");
        cr_assert(s->addr >= m->lo && s->addr + s->len <= m->hi);
        cr_assert_eq(s->shape, c->shape, "%s: %s is %s", c->name, s->name,
                     ftr_site_shape_name(s->shape));
        cr_assert_eq(s->len, c->len);
        cr_assert_eq(s->mcount, c->mcount, "%s: %s", c->name, s->name);
        cr_assert_eq(s->patched, 0);
        cr_assert_eq(s->index, 0);
        cr_assert_arr_eq(s->orig, (const void *)(uintptr_t)s->addr, s->len);
        if (c->mcount) {
            const uint8_t *f = (const uint8_t *)(uintptr_t)s->func;
            int skip = !memcmp(f, "\xf3\x0f\x1e\xfa", 4) ? 4 : 0;
            cr_assert_eq(f[skip], 0x55, "%s: frame-pointer prologue", s->name);
            cr_assert_gt(s->addr, s->func + skip + 3);
        } else {
            cr_assert_eq(s->addr, s->func + (uint64_t)c->entry, "%s: %s", c->name, s->name);
        }
    }
    for (size_t k = 0; k < NFUNCS; k++) {
        const char *fn = all_funcs[k];
        if (c->drap_skip && !strcmp(fn, "t_drap")) {
            cr_assert_null(site_named(m, fn));
            continue;
        }
        if (c->stripped && !strcmp(fn, "t_static")) continue;
        const struct ftr_site *s = site_named(m, fn);
        cr_assert_not_null(s, "%s: no site for %s", c->name, fn);
        void *sym = dlsym(h, fn);
        if (sym) cr_assert_eq(s->func, (uint64_t)(uintptr_t)sym, "%s: func of %s", c->name, fn);
    }
    cr_assert_null(site_named(m, "t_alias"), "the GLOBAL name wins over the WEAK alias");
    if (c->stripped) {
        /* the static function: found through .eh_frame_hdr, named after its offset */
        size_t hex = 0;
        for (size_t i = 0; i < m->nsites; i++) {
            const struct ftr_site *s = &m->sites[i];
            if (strncmp(s->name, "0x", 2)) continue;
            hex++;
            cr_assert_eq(strtoull(s->name + 2, NULL, 16) + m->base, s->func);
        }
        cr_assert_eq(hex, 1);
    }
    /* what the module calls for each hook */
    const struct ftr_hook_targets *t = &m->targets;
    cr_assert_eq(t->stub_lo, 0);
    cr_assert_eq(t->stub_hi, 0);
    if (c->shape == FTR_SHAPE_FENTRY_GOT) cr_assert_neq(t->fentry_got, 0);
    if (c->shape == FTR_SHAPE_MCOUNT_GOT) cr_assert_neq(t->mcount_got, 0);
    if (c->shape == FTR_SHAPE_FENTRY_REL) cr_assert_neq(t->fentry_call, 0);
    if (c->shape == FTR_SHAPE_MCOUNT_REL) cr_assert_neq(t->mcount_call, 0);
}

static void poke_all(const struct ftr_module *m, const uint8_t (*from)[FTR_SITE_LEN_MAX],
                     const uint8_t (*to)[FTR_SITE_LEN_MAX])
{
    struct ftr_poke p[NFUNCS];
    size_t bad[NFUNCS];
    for (size_t i = 0; i < m->nsites; i++) {
        p[i] = (struct ftr_poke){.addr = m->sites[i].addr, .len = m->sites[i].len};
        memcpy(p[i].expect, from[i], FTR_SITE_LEN_MAX);
        memcpy(p[i].bytes, to[i], FTR_SITE_LEN_MAX);
    }
    cr_assert_eq(ftr_text_poke(p, m->nsites, bad, NFUNCS), 0, "poke: %s", strerror(errno));
    for (size_t i = 0; i < m->nsites; i++)
        cr_assert_arr_eq((const void *)(uintptr_t)m->sites[i].addr, to[i], m->sites[i].len);
}

static void run_config(const struct config *c)
{
    if (!have_compiler(c->cc)) cr_skip_test("%s not installed", c->cc);
    make_tmpdir();
    char so[128];
    build(c->name, c->cc, c->flags, c->ldflags, so, sizeof so);
    struct loaded l;
    struct fns f;
    void *h = load(so, &l, &f);
    struct results before = call_all(&f);

    struct ftr_module m;
    char err[256] = "";
    cr_assert_eq(ftr_module_scan(so, l.base, l.phdr, l.phnum, &m, err, sizeof err), 0, "%s", err);
    check_sites(c, &m, h, &l);

    /* the three states of every site: original -> NOP -> CALL -> original */
    uint8_t orig[NFUNCS][FTR_SITE_LEN_MAX], nop[NFUNCS][FTR_SITE_LEN_MAX],
        call[NFUNCS][FTR_SITE_LEN_MAX];
    uint8_t *stubs = make_stubs(&m);
    for (size_t i = 0; i < m.nsites; i++) {
        const struct ftr_site *s = &m.sites[i];
        memset(orig[i], 0, FTR_SITE_LEN_MAX);
        memcpy(orig[i], s->orig, s->len);
        ftr_x86_gen_nop(nop[i], s->len);
        uint64_t stub = (uint64_t)(uintptr_t)(stubs + 16 + i * FTR_STUB_SIZE);
        cr_assert_eq(ftr_x86_gen_call(call[i], s->len, s->addr, stub), 0);
    }

    poke_all(&m, orig, nop);
    struct results r = call_all(&f);
    assert_results(&before, &r, "in the NOP state");

    poke_all(&m, nop, call);
    memset(test_hits, 0, sizeof test_hits);
    r = call_all(&f);
    assert_results(&before, &r, "in the CALL state");
    for (size_t i = 0; i < m.nsites; i++)
        cr_assert_geq(test_hits[i + 1], 1, "%s: %s not hooked", c->name, m.sites[i].name);
    const struct ftr_site *leaf = site_named(&m, "t_leaf");
    size_t li = (size_t)(leaf - m.sites);
    memset(test_hits, 0, sizeof test_hits);
    for (int k = 0; k < 3; k++)
        cr_assert_eq(f.leaf(k), 3 * k + 1);
    cr_assert_eq(test_hits[li + 1], 3);
    /* the CALL state is recognised as ours once the stub range is known */
    struct ftr_hook_targets t = m.targets;
    t.stub_lo = (uint64_t)(uintptr_t)stubs;
    t.stub_hi = t.stub_lo + STUB_PAGE;
    uint8_t len;
    cr_assert_eq(
        ftr_x86_classify((const uint8_t *)(uintptr_t)leaf->addr, leaf->len, leaf->addr, &t, &len),
        FTR_SHAPE_CALL_OURS);

    poke_all(&m, call, orig);
    r = call_all(&f);
    assert_results(&before, &r, "after restoring");

    /* stale expectations: every poke refused, nothing written */
    struct ftr_poke p[NFUNCS];
    size_t bad[2] = {99, 99};
    for (size_t i = 0; i < m.nsites; i++) {
        p[i] = (struct ftr_poke){.addr = m.sites[i].addr, .len = m.sites[i].len};
        memcpy(p[i].expect, call[i], FTR_SITE_LEN_MAX); /* we restored them already */
        memcpy(p[i].bytes, nop[i], FTR_SITE_LEN_MAX);
    }
    cr_assert_eq(ftr_text_poke(p, m.nsites, bad, 2), (long)m.nsites);
    cr_assert(bad[0] == 0 && bad[1] == 1);
    for (size_t i = 0; i < m.nsites; i++)
        cr_assert_arr_eq((const void *)(uintptr_t)m.sites[i].addr, orig[i], m.sites[i].len);

    munmap(stubs, STUB_PAGE);
    ftr_module_free(&m);
    cr_assert_null(m.sites);
    dlclose(h);
}

#define CONFIG_TEST(tname, ...)                                                                    \
    Test(elf_sites, tname)                                                                         \
    {                                                                                              \
        const struct config c = {#tname, __VA_ARGS__};                                             \
        run_config(&c);                                                                            \
    }

/* gcc */
CONFIG_TEST(gcc_O2_fentry, "gcc", "-O2 -pg -mfentry -fPIC", "", "symbols", FTR_SHAPE_FENTRY_GOT, 6,
            0, 0, 0, 0)
CONFIG_TEST(gcc_O2_fentry_stripped, "gcc", "-O2 -pg -mfentry -fPIC", "-s", "symbols",
            FTR_SHAPE_FENTRY_GOT, 6, 0, 0, 0, 1)
CONFIG_TEST(gcc_O2_mcount, "gcc", "-O2 -pg -fPIC", "", "symbols", FTR_SHAPE_MCOUNT_GOT, 6, 1, 0, 1,
            0)
CONFIG_TEST(gcc_O0_mcount, "gcc", "-O0 -pg -fPIC", "", "symbols", FTR_SHAPE_MCOUNT_GOT, 6, 1, 0, 1,
            0)
CONFIG_TEST(gcc_O2_fentry_record_cet, "gcc",
            "-O2 -pg -mfentry -mrecord-mcount -fPIC -fcf-protection", "", "__mcount_loc",
            FTR_SHAPE_FENTRY_GOT, 6, 0, 4, 0, 0)
CONFIG_TEST(gcc_O2_mcount_record_clash, "gcc",
            "-O2 -pg -mrecord-mcount -fPIC -fstack-clash-protection", "", "__mcount_loc",
            FTR_SHAPE_MCOUNT_GOT, 6, 1, 0, 1, 0)
CONFIG_TEST(gcc_O2_fentry_nop_mcount, "gcc",
            "-O2 -pg -mfentry -mnop-mcount -mrecord-mcount -fno-pie", "", "__mcount_loc",
            FTR_SHAPE_NOP5, 5, 0, 0, 0, 0)
CONFIG_TEST(gcc_O2_nop_mcount_no_fentry, "gcc", "-O2 -pg -mnop-mcount -mrecord-mcount -fno-pie", "",
            "__mcount_loc", FTR_SHAPE_NOP5, 5, 1, 0, 1, 0)
CONFIG_TEST(gcc_O2_fentry_nopic, "gcc", "-O2 -pg -mfentry -fno-pie", "", "symbols",
            FTR_SHAPE_FENTRY_REL, 5, 0, 0, 0, 0)
CONFIG_TEST(gcc_O2_patchable, "gcc", "-O2 -fpatchable-function-entry=5 -fPIC", "",
            "__patchable_function_entries", FTR_SHAPE_NOPS, 5, 0, 0, 0, 0)
CONFIG_TEST(gcc_O0_patchable_cet, "gcc", "-O0 -fpatchable-function-entry=5 -fPIC -fcf-protection",
            "", "__patchable_function_entries", FTR_SHAPE_NOPS, 5, 0, 4, 0, 0)
/* clang */
CONFIG_TEST(clang_O2_fentry, "clang", "-O2 -pg -mfentry -fPIC", "", "symbols", FTR_SHAPE_FENTRY_REL,
            5, 0, 0, 0, 0)
CONFIG_TEST(clang_O2_mcount, "clang", "-O2 -pg -fPIC", "", "symbols", FTR_SHAPE_MCOUNT_REL, 5, 1, 0,
            0, 0)
CONFIG_TEST(clang_O0_mcount_ibtplt, "clang", "-O0 -pg -fPIC -fcf-protection", "-Wl,-z,ibtplt",
            "symbols", FTR_SHAPE_MCOUNT_REL, 5, 1, 0, 0, 0)
CONFIG_TEST(clang_O2_mcount_protector_clash, "clang",
            "-O2 -pg -fPIC -fstack-protector-all -fstack-clash-protection", "", "symbols",
            FTR_SHAPE_MCOUNT_REL, 5, 1, 0, 0, 0)
CONFIG_TEST(clang_O2_patchable_cet, "clang",
            "-O2 -fpatchable-function-entry=5 -fPIC -fcf-protection", "",
            "__patchable_function_entries", FTR_SHAPE_NOP5, 5, 0, 4, 0, 0)

/* ---- scanning without program headers, other modules, errors ---- */

Test(elf_sites, phdrs_from_the_file)
{
    make_tmpdir();
    char so[128];
    build("fentry", "gcc", "-O2 -pg -mfentry -fPIC", "", so, sizeof so);
    struct loaded l;
    struct fns f;
    void *h = load(so, &l, &f);
    struct ftr_module a, b;
    char err[256];
    cr_assert_eq(ftr_module_scan(so, l.base, l.phdr, l.phnum, &a, err, sizeof err), 0, "%s", err);
    cr_assert_eq(ftr_module_scan(so, l.base, NULL, 0, &b, err, sizeof err), 0, "%s", err);
    cr_assert_eq(a.nsites, NFUNCS);
    cr_assert_eq(b.nsites, a.nsites);
    cr_assert(a.lo == b.lo && a.hi == b.hi);
    for (size_t i = 0; i < a.nsites; i++) {
        cr_assert_eq(a.sites[i].addr, b.sites[i].addr);
        cr_assert_str_eq(a.sites[i].name, b.sites[i].name);
    }
    ftr_module_free(&a);
    ftr_module_free(&b);
    dlclose(h);
}

static int find_libc(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct loaded *l = arg;
    if (!info->dlpi_name || !strstr(info->dlpi_name, "/libc.so.6")) return 0;
    l->path = info->dlpi_name;
    l->base = info->dlpi_addr;
    l->phdr = info->dlpi_phdr;
    l->phnum = info->dlpi_phnum;
    l->found = 1;
    return 1;
}

static int find_main(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct loaded *l = arg;
    l->base = info->dlpi_addr;
    l->phdr = info->dlpi_phdr;
    l->phnum = info->dlpi_phnum;
    return 1;
}

Test(elf_sites, uninstrumented_modules_have_no_sites)
{
    struct loaded l = {0};
    dl_iterate_phdr(find_libc, &l);
    cr_assert(l.found);
    struct ftr_module m;
    char err[256];
    cr_assert_eq(ftr_module_scan(l.path, l.base, l.phdr, l.phnum, &m, err, sizeof err), 0, "%s",
                 err);
    cr_assert_eq(m.nsites, 0);
    cr_assert_eq(m.skipped, 0);
    cr_assert_str_eq(m.method, "symbols");
    cr_assert_gt(m.build_id_len, 0);
    /* libc defines both hooks itself */
    cr_assert_neq(m.targets.fentry_call, 0);
    cr_assert_neq(m.targets.mcount_call, 0);
    ftr_module_free(&m);

    /* this test program: not built with -pg (the main program is the first module) */
    dl_iterate_phdr(find_main, &l);
    cr_assert_eq(ftr_module_scan("/proc/self/exe", l.base, l.phdr, l.phnum, &m, err, sizeof err), 0,
                 "%s", err);
    cr_assert_eq(m.nsites, 0);
    cr_assert_eq(m.skipped, 0);
    ftr_module_free(&m);
}

/* A module with its own hidden __fentry__ and no list of sites: its calls go straight to it
 * (the linker relaxes the GOT call to addr32 call), no relocation names the hook. The scan's
 * cheap answer for modules that cannot have sites must not take it for one of those. */
Test(elf_sites, own_hidden_hook_called_directly)
{
    if (!have_compiler("gcc")) cr_skip_test("gcc not installed");
    make_tmpdir();
    char src[128], so[128], cmd[512];
    snprintf(src, sizeof src, "%s/own.c", tmpdir);
    snprintf(so, sizeof so, "%s/own.so", tmpdir);
    FILE *f = fopen(src, "w");
    cr_assert_not_null(f);
    fputs("__asm__(\".text\\n.globl __fentry__\\n.hidden __fentry__\\n"
          ".type __fentry__, @function\\n__fentry__: ret\\n\");\n"
          "__attribute__((noinline)) int own_a(int x) { return x + 1; }\n"
          "__attribute__((noinline)) int own_b(int x) { return own_a(x) * 2; }\n",
          f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "gcc -O2 -pg -mfentry -fPIC -shared -o '%s' '%s'", so, src);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    cr_assert_not_null(h, "dlopen: %s", dlerror());
    struct loaded l = {.path = so};
    dl_iterate_phdr(find_module, &l);
    cr_assert(l.found);
    struct ftr_module m;
    char err[256];
    cr_assert_eq(ftr_module_scan(so, l.base, l.phdr, l.phnum, &m, err, sizeof err), 0, "%s", err);
    cr_assert_eq(m.nsites, 2, "%zu sites", m.nsites);
    cr_assert_str_eq(m.sites[0].name, "own_a");
    cr_assert_str_eq(m.sites[1].name, "own_b");
    cr_assert_eq(m.sites[0].shape, FTR_SHAPE_FENTRY_REL);
    ftr_module_free(&m);
    dlclose(h);
}

Test(elf_sites, errors)
{
    struct ftr_module m;
    char err[256];
    cr_assert_eq(ftr_module_scan("/nonexistent/lib.so", 0, NULL, 0, &m, err, sizeof err), -1);
    cr_assert(strstr(err, "/nonexistent/lib.so") && strstr(err, "No such file"), "%s", err);
    cr_assert_null(m.sites);
    cr_assert_null(m.path);

    make_tmpdir();
    char path[128];
    snprintf(path, sizeof path, "%s/t.c", tmpdir);
    cr_assert_eq(ftr_module_scan(path, 0, NULL, 0, &m, err, sizeof err), -1);
    cr_assert(strstr(err, "not an ELF file"), "%s", err);
    cr_assert_eq(ftr_module_scan("", 0, NULL, 0, &m, err, sizeof err), -1);
    cr_assert_eq(ftr_module_scan(path, 0, NULL, 0, &m, NULL, 0), -1, "no room for a message");
    ftr_module_free(&m);
    ftr_module_free(NULL);
}

/* ---- text_poke on anonymous pages ---- */

static long page;

static const char *prot_of(const void *addr, char *perms)
{
    FILE *f = fopen("/proc/self/maps", "r");
    cr_assert_not_null(f);
    char line[512];
    unsigned long lo, hi;
    perms[0] = 0;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "%lx-%lx %4s", &lo, &hi, perms) == 3 && (uintptr_t)addr >= lo &&
            (uintptr_t)addr < hi)
            break;
        else
            perms[0] = 0;
    fclose(f);
    return perms;
}

static uint8_t *rx_pages(int n)
{
    page = sysconf(_SC_PAGESIZE);
    uint8_t *p =
        mmap(NULL, (size_t)(n * page), PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(p, MAP_FAILED);
    memset(p, 0xcc, (size_t)(n * page));
    cr_assert_eq(mprotect(p, (size_t)(n * page), PROT_READ | PROT_EXEC), 0);
    return p;
}

Test(text_poke, straddling_pages_and_groups)
{
    uint8_t *p = rx_pages(4);
    static const uint8_t cc[6] = {0xcc, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc};
    struct ftr_poke k[4] = {
        {.addr = (uintptr_t)p + 16, .len = 5},
        {.addr = (uintptr_t)p + page - 3, .len = 6},     /* across the first boundary */
        {.addr = (uintptr_t)p + 3 * page + 8, .len = 5}, /* page 2 untouched: a second group */
        {.addr = (uintptr_t)p + 4 * page - 5, .len = 5},
    };
    for (int i = 0; i < 4; i++) {
        memcpy(k[i].expect, cc, 6);
        ftr_x86_gen_nop(k[i].bytes, k[i].len);
    }
    size_t bad[4];
    cr_assert_eq(ftr_text_poke(k, 4, bad, 4), 0);
    for (int i = 0; i < 4; i++) {
        const uint8_t *a = (const uint8_t *)(uintptr_t)k[i].addr;
        cr_assert_arr_eq(a, k[i].bytes, k[i].len);
        cr_assert_eq(a[-1], 0xcc);
        if (i != 3) /* the last one ends the mapping */
            cr_assert_eq(a[k[i].len], 0xcc);
    }
    char perms[8];
    for (int pg = 0; pg < 4; pg++)
        cr_assert_str_eq(prot_of(p + pg * page, perms), "r-xp", "page %d: W^X restored", pg);

    /* unsorted input still works, and is written */
    struct ftr_poke u[2] = {k[3], k[0]};
    for (int i = 0; i < 2; i++) {
        memcpy(u[i].expect, u[i].bytes, 6);
        memcpy(u[i].bytes, cc, 6);
    }
    cr_assert_eq(ftr_text_poke(u, 2, NULL, 0), 0);
    cr_assert_arr_eq(p + 16, cc, 5);
    cr_assert_arr_eq(p + 4 * page - 5, cc, 5);
    cr_assert_eq(ftr_text_poke(NULL, 0, NULL, 0), 0);
    munmap(p, (size_t)(4 * page));
}

Test(text_poke, refuses_mismatches)
{
    uint8_t *p = rx_pages(1);
    struct ftr_poke k[3] = {
        {.addr = (uintptr_t)p + 0, .len = 5, .expect = {0xcc, 0xcc, 0xcc, 0xcc, 0xcc}},
        {.addr = (uintptr_t)p + 8, .len = 5, .expect = {0xcc, 0xcc, 0xcc, 0xcc, 0x90}},
        {.addr = (uintptr_t)p + 16, .len = 6, .expect = {0x90, 0xcc, 0xcc, 0xcc, 0xcc, 0xcc}},
    };
    for (int i = 0; i < 3; i++)
        ftr_x86_gen_nop(k[i].bytes, k[i].len);
    size_t bad[1] = {99};
    cr_assert_eq(ftr_text_poke(k, 3, bad, 1), 2);
    cr_assert_eq(bad[0], 1, "only badcap indices are stored");
    cr_assert_arr_eq(p, k[0].bytes, 5);
    for (int i = 8; i < 22; i++)
        cr_assert_eq(p[i], 0xcc, "refused pokes write nothing");

    /* an invalid length is refused like a mismatch */
    struct ftr_poke z = {.addr = (uintptr_t)p + 32, .len = 0};
    cr_assert_eq(ftr_text_poke(&z, 1, NULL, 0), 1);
    z.len = FTR_SITE_LEN_MAX + 1;
    cr_assert_eq(ftr_text_poke(&z, 1, NULL, 0), 1);
    char perms[8];
    cr_assert_str_eq(prot_of(p, perms), "r-xp");
    munmap(p, (size_t)page);
}

Test(text_poke, mprotect_failure)
{
    /* a shared mapping of a read-only descriptor can never be made writable */
    int fd = open("/proc/self/exe", O_RDONLY);
    cr_assert_geq(fd, 0);
    uint8_t *p = mmap(NULL, 4096, PROT_READ, MAP_SHARED, fd, 0);
    cr_assert_neq(p, MAP_FAILED);
    struct ftr_poke k = {.addr = (uintptr_t)p + 4, .len = 5};
    memcpy(k.expect, p + 4, 5);
    ftr_x86_gen_nop(k.bytes, 5);
    errno = 0;
    cr_assert_eq(ftr_text_poke(&k, 1, NULL, 0), -1);
    cr_assert_eq(errno, EACCES);
    cr_assert_arr_eq(p + 4, k.expect, 5);
    munmap(p, 4096);
    close(fd);
}
