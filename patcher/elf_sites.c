/*
 * elf_sites.c - the hook sites of one loaded module.
 *
 * The ELF file gives the structure (sections, symbols, relocations, notes); live memory gives
 * everything the dynamic loader may have changed or that must be checked as it is now: the
 * compiler's site lists (relocated by ld.so: in a PIE or a .so, __mcount_loc holds
 * R_X86_64_RELATIVE entries, in a read-only segment through DT_TEXTREL), the PLT stubs and the
 * site bytes themselves.
 *
 * Runs in the preload constructor, before any tracing: plain libc and malloc are fine, but
 * nothing here may be built with instrumentation.
 */
#define _GNU_SOURCE /* memmem */
#include "ftr_patcher.h"

#include <emmintrin.h>
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <inttypes.h>
#include <libelf.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

enum { HOOK_FENTRY, HOOK_MCOUNT, HOOK_KINDS };

/* Longest prologue walked before an mcount call, and bytes scanned for a hook call when
 * deciding whether a function without a recognised site is worth counting as skipped. */
#define PROLOGUE_SPAN 1024
#define SKIP_SCAN 64

struct seg {
    uint64_t lo, hi; /* runtime [lo, hi) */
    uint32_t flags;  /* PF_* */
};

struct fsym {
    uint64_t addr, size;
    const char *name; /* in the ELF file's string table: valid until elf_end() */
    unsigned rank;    /* naming preference: 0 GLOBAL, 1 WEAK, 2 LOCAL */
};

struct scan {
    const char *path;
    uint64_t base;
    Elf *elf;
    int have_shstr;
    size_t shstrndx;
    struct seg *segs;
    size_t nsegs;
    struct fsym *syms; /* FUNC symbols in executable sections, sorted by addr then rank */
    size_t nsyms;
    uint64_t *starts; /* function starts from .eh_frame_hdr, sorted */
    size_t nstarts;
    uint64_t got[HOOK_KINDS], jslot[HOOK_KINDS]; /* GLOB_DAT and JUMP_SLOT slots */
    uint64_t call[HOOK_KINDS][2];
    uint64_t plt_lo, plt_hi;
    struct ftr_hook_targets t;
    struct ftr_site *sites;
    size_t nsites, capsites;
    size_t skipped;
    char *skip_names; /* the first FTR_SKIPPED_NAMES refused functions (ftr_module's) */
    size_t skip_len;
    unsigned nskip_names;
    char *err;
    size_t errlen;
};

static int fail(struct scan *s, const char *fmt, ...)
{
    va_list ap;
    if (s->err && s->errlen) {
        va_start(ap, fmt);
        vsnprintf(s->err, s->errlen, fmt, ap);
        va_end(ap);
    }
    return -1;
}

static int oom(struct scan *s)
{
    return fail(s, "%s: out of memory", s->path);
}

/* ---- live memory ---- */

/* Pointer to the live bytes at runtime address addr when they lie in a PT_LOAD segment with
 * the wanted flags; *avail = how many of want are readable without leaving it. */
static const uint8_t *live(const struct scan *s, uint64_t addr, size_t want, size_t *avail,
                           uint32_t need)
{
    for (size_t i = 0; i < s->nsegs; i++) {
        const struct seg *g = &s->segs[i];
        if ((g->flags & need) == need && addr >= g->lo && addr < g->hi) {
            uint64_t room = g->hi - addr;
            *avail = room < want ? (size_t)room : want;
            return (const uint8_t *)(uintptr_t)addr;
        }
    }
    *avail = 0;
    return NULL;
}

static int is_endbr64(const uint8_t *c, size_t avail)
{
    return avail >= 4 && !memcmp(c, "\xf3\x0f\x1e\xfa", 4);
}

static int load_segments(struct scan *s, const void *phdr, unsigned phnum, struct ftr_module *m)
{
    size_t n = phnum;
    if (!phdr && elf_getphdrnum(s->elf, &n) != 0) return fail(s, "%s: no program headers", s->path);
    s->segs = calloc(n ? n : 1, sizeof *s->segs);
    if (!s->segs) return oom(s);
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (phdr) {
            const Elf64_Phdr *p = (const Elf64_Phdr *)phdr + i;
            ph.p_type = p->p_type;
            ph.p_flags = p->p_flags;
            ph.p_vaddr = p->p_vaddr;
            ph.p_memsz = p->p_memsz;
        } else if (!gelf_getphdr(s->elf, (int)i, &ph)) {
            continue;
        }
        if (ph.p_type != PT_LOAD || !ph.p_memsz) continue;
        struct seg *g = &s->segs[s->nsegs++];
        g->lo = s->base + ph.p_vaddr;
        g->hi = g->lo + ph.p_memsz;
        g->flags = ph.p_flags;
        if (!m->lo || g->lo < m->lo) m->lo = g->lo;
        if (g->hi > m->hi) m->hi = g->hi;
    }
    return 0;
}

/* ---- sections, symbols, notes ---- */

static const char *scn_name(const struct scan *s, const GElf_Shdr *sh)
{
    const char *n = s->have_shstr ? elf_strptr(s->elf, s->shstrndx, sh->sh_name) : NULL;
    return n ? n : "";
}

static Elf_Scn *find_scn_type(const struct scan *s, uint32_t type)
{
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    while ((scn = elf_nextscn(s->elf, scn)))
        if (gelf_getshdr(scn, &sh) && sh.sh_type == type) return scn;
    return NULL;
}

static int scn_is_exec(const struct scan *s, size_t ndx)
{
    GElf_Shdr sh;
    Elf_Scn *scn = elf_getscn(s->elf, ndx);
    return scn && gelf_getshdr(scn, &sh) && (sh.sh_flags & SHF_EXECINSTR);
}

static int hook_kind(const char *name)
{
    if (!strcmp(name, "__fentry__")) return HOOK_FENTRY;
    if (!strcmp(name, "mcount") || !strcmp(name, "_mcount")) return HOOK_MCOUNT;
    return -1;
}

static void add_call(struct scan *s, int kind, uint64_t target)
{
    uint64_t *c = s->call[kind];
    if (!target || c[0] == target || c[1] == target) return;
    if (!c[0])
        c[0] = target;
    else if (!c[1])
        c[1] = target;
}

static int cmp_fsym(const void *a, const void *b)
{
    const struct fsym *x = a, *y = b;
    if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
    return (int)x->rank - (int)y->rank;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* FUNC symbols of one symbol table section, and the module's own __fentry__ / mcount. */
static int load_symbols(struct scan *s, Elf_Scn *scn, int keep)
{
    GElf_Shdr sh;
    Elf_Data *d = gelf_getshdr(scn, &sh) ? elf_getdata(scn, NULL) : NULL;
    if (!d || !sh.sh_entsize) return 0;
    size_t n = sh.sh_size / sh.sh_entsize;
    if (keep) {
        s->syms = calloc(n ? n : 1, sizeof *s->syms);
        if (!s->syms) return oom(s);
    }
    for (size_t i = 1; i < n; i++) {
        GElf_Sym sym;
        if (!gelf_getsym(d, (int)i, &sym) || GELF_ST_TYPE(sym.st_info) != STT_FUNC) continue;
        if (sym.st_shndx == SHN_UNDEF || sym.st_shndx >= SHN_LORESERVE) continue;
        const char *name = elf_strptr(s->elf, sh.sh_link, sym.st_name);
        if (!name || !*name) continue;
        int kind = hook_kind(name);
        if ((!keep && kind < 0) || !scn_is_exec(s, sym.st_shndx)) continue;
        if (kind >= 0)
            add_call(s, kind, s->base + sym.st_value); /* defined here: calls may be direct */
        if (!keep) continue;
        unsigned bind = GELF_ST_BIND(sym.st_info);
        struct fsym *f = &s->syms[s->nsyms++];
        f->addr = s->base + sym.st_value;
        f->size = sym.st_size;
        f->name = name;
        f->rank = bind == STB_GLOBAL ? 0 : bind == STB_WEAK ? 1 : 2;
    }
    if (keep) qsort(s->syms, s->nsyms, sizeof *s->syms, cmp_fsym);
    return 0;
}

/* GOT slots of __fentry__ / mcount, from the dynamic relocations that fill them. */
static void load_got_slots(struct scan *s)
{
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    while ((scn = elf_nextscn(s->elf, scn))) {
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA || !sh.sh_entsize) continue;
        Elf_Scn *symscn = elf_getscn(s->elf, sh.sh_link);
        GElf_Shdr symsh;
        Elf_Data *rd = elf_getdata(scn, NULL);
        Elf_Data *sd = symscn ? elf_getdata(symscn, NULL) : NULL;
        if (!rd || !sd || !gelf_getshdr(symscn, &symsh)) continue;
        size_t n = sh.sh_size / sh.sh_entsize;
        for (size_t i = 0; i < n; i++) {
            GElf_Rela r;
            GElf_Sym sym;
            if (!gelf_getrela(rd, (int)i, &r)) continue;
            unsigned type = GELF_R_TYPE(r.r_info);
            if ((type != R_X86_64_GLOB_DAT && type != R_X86_64_JUMP_SLOT) ||
                !GELF_R_SYM(r.r_info) || !gelf_getsym(sd, (int)GELF_R_SYM(r.r_info), &sym))
                continue;
            const char *name = elf_strptr(s->elf, symsh.sh_link, sym.st_name);
            int kind = name ? hook_kind(name) : -1;
            if (kind < 0) continue;
            uint64_t *slot = type == R_X86_64_GLOB_DAT ? &s->got[kind] : &s->jslot[kind];
            if (!*slot) *slot = s->base + r.r_offset;
        }
    }
}

/* PLT stubs jumping through a __fentry__ / mcount slot. Entries are decoded from live memory
 * whatever their layout (bfd .plt / .plt.sec / .plt.got, with endbr64 or a bnd prefix, or
 * another linker's): the jmp *disp(%rip) (ff 25) anywhere in the entry must resolve exactly to
 * the slot, and the entry's start is what calls reach. */
static void load_plt(struct scan *s)
{
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    while ((scn = elf_nextscn(s->elf, scn))) {
        if (!gelf_getshdr(scn, &sh) || !(sh.sh_flags & SHF_EXECINSTR)) continue;
        const char *name = scn_name(s, &sh);
        if (strcmp(name, ".plt") && strcmp(name, ".plt.sec") && strcmp(name, ".plt.got") &&
            strcmp(name, ".plt.bnd"))
            continue;
        uint64_t lo = s->base + sh.sh_addr;
        size_t avail;
        const uint8_t *p = live(s, lo, sh.sh_size, &avail, PF_X);
        if (!p) continue;
        if (!s->plt_lo || lo < s->plt_lo) s->plt_lo = lo;
        if (lo + avail > s->plt_hi) s->plt_hi = lo + avail;
        size_t es = sh.sh_entsize >= 6 ? sh.sh_entsize : 16;
        for (size_t e = 0; e + 6 <= avail; e += es) {
            size_t end = e + es < avail ? e + es : avail;
            for (size_t k = e; k + 6 <= end; k++) {
                if (p[k] != 0xff || p[k + 1] != 0x25) continue;
                int32_t d;
                memcpy(&d, p + k + 2, 4);
                uint64_t slot = lo + k + 6 + (int64_t)d;
                for (int kind = 0; kind < HOOK_KINDS; kind++)
                    if ((s->got[kind] && slot == s->got[kind]) ||
                        (s->jslot[kind] && slot == s->jslot[kind]))
                        add_call(s, kind, lo + e);
            }
        }
    }
}

static void build_targets(struct scan *s)
{
    struct ftr_hook_targets *t = &s->t;
    t->fentry_got = s->got[HOOK_FENTRY];
    t->mcount_got = s->got[HOOK_MCOUNT];
    t->fentry_call = s->call[HOOK_FENTRY][0];
    t->fentry_call2 = s->call[HOOK_FENTRY][1];
    t->mcount_call = s->call[HOOK_MCOUNT][0];
    t->mcount_call2 = s->call[HOOK_MCOUNT][1];
    /* An imported hook with no decoded PLT stub: accept calls into the PLT as that hook, but
     * only when it is the only such hook, or calls could not be told apart. */
    int fu = s->jslot[HOOK_FENTRY] && !s->call[HOOK_FENTRY][0];
    int mu = s->jslot[HOOK_MCOUNT] && !s->call[HOOK_MCOUNT][0];
    if (fu != mu && s->plt_lo < s->plt_hi) {
        t->plt_lo = s->plt_lo;
        t->plt_hi = s->plt_hi;
        t->plt_shape = fu ? FTR_SHAPE_FENTRY_REL : FTR_SHAPE_MCOUNT_REL;
    }
}

static int have_targets(const struct ftr_hook_targets *t)
{
    return t->fentry_got || t->mcount_got || t->fentry_call || t->mcount_call || t->plt_shape;
}

/* Function starts from the .eh_frame_hdr search table: they also cover the static functions
 * of a stripped file. Only the encoding every linker uses (datarel | sdata4) is read. */
static size_t enc_size(uint8_t enc)
{
    if (enc == 0xff) return 0; /* omitted */
    switch (enc & 0x0f) {
    case 0x00:
    case 0x04:
    case 0x0c:
        return 8;
    case 0x02:
    case 0x0a:
        return 2;
    case 0x03:
    case 0x0b:
        return 4;
    default:
        return 0; /* LEB128: not used by linkers here */
    }
}

static int load_eh_frame_hdr(struct scan *s, const void *phdr, unsigned phnum)
{
    uint64_t at = 0, size = 0;
    size_t n = phnum;
    if (!phdr && elf_getphdrnum(s->elf, &n) != 0) return 0;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (phdr) {
            const Elf64_Phdr *p = (const Elf64_Phdr *)phdr + i;
            ph.p_type = p->p_type;
            ph.p_vaddr = p->p_vaddr;
            ph.p_memsz = p->p_memsz;
        } else if (!gelf_getphdr(s->elf, (int)i, &ph)) {
            continue;
        }
        if (ph.p_type == PT_GNU_EH_FRAME) {
            at = s->base + ph.p_vaddr;
            size = ph.p_memsz;
        }
    }
    size_t avail;
    const uint8_t *h = at ? live(s, at, size, &avail, PF_R) : NULL;
    if (!h || avail < 4 || h[0] != 1 || h[3] != 0x3b) return 0;
    size_t ps = enc_size(h[1]), cs = enc_size(h[2]);
    if (!ps || !cs || cs > 8 || 4 + ps + cs > avail) return 0;
    uint64_t count = 0;
    memcpy(&count, h + 4 + ps, cs); /* little-endian: the low cs bytes */
    size_t tab = 4 + ps + cs;
    if (count > (avail - tab) / 8) count = (avail - tab) / 8;
    s->starts = calloc(count ? count : 1, sizeof *s->starts);
    if (!s->starts) return oom(s);
    for (uint64_t i = 0; i < count; i++) {
        int32_t rel;
        memcpy(&rel, h + tab + i * 8, 4);
        uint64_t f = at + (int64_t)rel;
        size_t a;
        if (live(s, f, 1, &a, PF_X)) s->starts[s->nstarts++] = f;
    }
    qsort(s->starts, s->nstarts, sizeof *s->starts, cmp_u64);
    return 0;
}

static void load_build_id(struct scan *s, struct ftr_module *m)
{
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    size_t n = 0;
    /* program headers first: they survive strip --strip-section-headers */
    if (elf_getphdrnum(s->elf, &n) == 0) {
        for (size_t i = 0; i < n; i++) {
            GElf_Phdr ph;
            if (!gelf_getphdr(s->elf, (int)i, &ph) || ph.p_type != PT_NOTE) continue;
            Elf_Data *d = elf_getdata_rawchunk(s->elf, ph.p_offset, ph.p_filesz, ELF_T_NHDR);
            size_t off = 0, no, dof;
            GElf_Nhdr nh;
            while (d && (off = gelf_getnote(d, off, &nh, &no, &dof)) > 0) {
                if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
                    !memcmp((const char *)d->d_buf + no, "GNU", 4)) {
                    size_t l = nh.n_descsz < sizeof m->build_id ? nh.n_descsz : sizeof m->build_id;
                    memcpy(m->build_id, (const char *)d->d_buf + dof, l);
                    m->build_id_len = (uint32_t)l;
                    return;
                }
            }
        }
    }
    while ((scn = elf_nextscn(s->elf, scn))) {
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE) continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        size_t off = 0, no, dof;
        GElf_Nhdr nh;
        while (d && (off = gelf_getnote(d, off, &nh, &no, &dof)) > 0) {
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
                !memcmp((const char *)d->d_buf + no, "GNU", 4)) {
                size_t l = nh.n_descsz < sizeof m->build_id ? nh.n_descsz : sizeof m->build_id;
                memcpy(m->build_id, (const char *)d->d_buf + dof, l);
                m->build_id_len = (uint32_t)l;
                return;
            }
        }
    }
}

/* ---- the function a site belongs to ---- */

/* The FUNC symbol containing addr (the highest start wins; at one start, the best binding),
 * else the closest .eh_frame_hdr start at or below addr. @return 0 when neither exists. */
/* Index of the first symbol whose address is above addr (or at least addr when at_least). */
static size_t sym_bound(const struct scan *s, uint64_t addr, int at_least)
{
    size_t lo = 0, hi = s->nsyms;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (at_least ? s->syms[mid].addr < addr : s->syms[mid].addr <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo;
}

static int func_of(const struct scan *s, uint64_t addr, uint64_t *func, const char **name)
{
    size_t lo = sym_bound(s, addr, 0), hi;
    const struct fsym *best = NULL;
    for (size_t i = lo, steps = 0; i-- > 0 && steps < 64; steps++) {
        const struct fsym *f = &s->syms[i];
        if (best && f->addr < best->addr) break;
        if (addr < f->addr + f->size || (!f->size && addr == f->addr))
            if (!best || f->rank <= best->rank)
                best = f; /* walking down: at equal addr the lower index ranks better */
    }
    if (best) {
        *func = best->addr;
        *name = best->name;
        return 1;
    }
    lo = 0, hi = s->nstarts;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (s->starts[mid] <= addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    if (!lo) return 0;
    *func = s->starts[lo - 1];
    *name = NULL;
    return 1;
}

/* A refused candidate: counted, and the first few named (func: its function, or the site
 * itself when none is known; name NULL: "0x<offset>"). */
static void refuse(struct scan *s, uint64_t func, const char *name)
{
    s->skipped++;
    if (s->nskip_names >= FTR_SKIPPED_NAMES) return;
    char hex[32];
    if (!name) {
        snprintf(hex, sizeof hex, "0x%" PRIx64, func - s->base);
        name = hex;
    }
    size_t l = strlen(name) + 1;
    char *n = realloc(s->skip_names, s->skip_len + l);
    if (!n) return; /* only the name is lost */
    memcpy(n + s->skip_len, name, l);
    s->skip_names = n;
    s->skip_len += l;
    s->nskip_names++;
}

/* refuse() for a site address: named after the function that holds it, if any. */
static void refuse_at(struct scan *s, uint64_t addr)
{
    uint64_t func = addr;
    const char *name = NULL;
    if (!func_of(s, addr, &func, &name)) func = addr;
    refuse(s, func, name);
}

static int add_site(struct scan *s, uint64_t addr, uint64_t func, const char *name, unsigned shape,
                    uint8_t len, int mcount, int chain, const uint8_t *bytes)
{
    if (s->nsites == s->capsites) {
        size_t cap = s->capsites ? 2 * s->capsites : 64;
        struct ftr_site *n = realloc(s->sites, cap * sizeof *n);
        if (!n) return oom(s);
        s->sites = n;
        s->capsites = cap;
    }
    struct ftr_site *st = &s->sites[s->nsites++];
    memset(st, 0, sizeof *st);
    st->addr = addr;
    st->func = func;
    st->name = name; /* NULL: named after func by finish() */
    st->len = len;
    st->shape = (uint8_t)shape;
    st->mcount = (uint8_t)mcount;
    st->chain = (uint8_t)chain;
    memcpy(st->orig, bytes, len);
    return 0;
}

/* ---- sites from the compiler's lists ---- */

static int collect_list(struct scan *s, const GElf_Shdr *sh, uint64_t **v, size_t *n, size_t *cap)
{
    size_t avail;
    size_t cnt = sh->sh_size / 8;
    const uint8_t *p = live(s, s->base + sh->sh_addr, sh->sh_size, &avail, PF_R);
    if (!p || avail < sh->sh_size) {
        s->skipped += cnt; /* the list is not mapped where the file says */
        return 0;
    }
    if (*n + cnt > *cap) {
        size_t c = *n + cnt;
        uint64_t *nv = realloc(*v, (c ? c : 1) * sizeof *nv);
        if (!nv) return oom(s);
        *v = nv;
        *cap = c;
    }
    for (size_t i = 0; i < cnt; i++) {
        uint64_t a;
        memcpy(&a, p + 8 * i, 8); /* __mcount_loc is only byte-aligned */
        /* entries of functions the linker discarded are 0 (relocated: base) */
        if (a && a != s->base) (*v)[(*n)++] = a;
    }
    return 0;
}

/* One listed address: classify it and decide whether it is at the entry or after the
 * frame-pointer prologue. */
static int list_site(struct scan *s, uint64_t addr)
{
    size_t avail;
    const uint8_t *c = live(s, addr, 16, &avail, PF_X);
    if (c && is_endbr64(c, avail)) /* some compilers list the endbr64, not the site after it */
        c = live(s, addr += 4, 16, &avail, PF_X);
    uint8_t len = 0;
    unsigned shape = c ? ftr_x86_classify(c, avail, addr, &s->t, &len) : FTR_SHAPE_NONE;
    if (shape == FTR_SHAPE_NONE) {
        refuse_at(s, addr);
        return 0;
    }
    int is_fentry = shape == FTR_SHAPE_FENTRY_GOT || shape == FTR_SHAPE_FENTRY_REL;
    uint64_t func;
    const char *name;
    if (!func_of(s, addr, &func, &name)) {
        /* nothing says where the function starts: only a __fentry__ call shows by itself
         * that it is the entry */
        size_t a;
        const uint8_t *b = live(s, addr - 4, 4, &a, PF_X);
        if (!is_fentry) {
            refuse(s, addr, NULL);
            return 0;
        }
        return add_site(s, addr, b && is_endbr64(b, a) ? addr - 4 : addr, NULL, shape, len, 0, 0,
                        c);
    }
    size_t favail;
    const uint8_t *f = live(s, func, PROLOGUE_SPAN, &favail, PF_X);
    uint64_t entry = func + (f && is_endbr64(f, favail) ? 4 : 0);
    int mcount = 0, chain = 0;
    if (addr == entry)
        mcount = 0; /* even an mcount call there: the return address is at the top */
    else if (f && addr > func && ftr_x86_chain_site(f, favail, addr - func, len))
        chain = 1; /* a nested function's: the return address is one word above the top */
    else if (!is_fentry && f && addr > func && ftr_x86_prologue_reaches(f, favail, addr - func))
        mcount = 1;
    else {
        refuse(s, func, name); /* e.g. after a DRAP realignment, or listed before the function */
        return 0;
    }
    return add_site(s, addr, func, name, shape, len, mcount, chain, c);
}

static int scan_lists(struct scan *s, int *found_mcount_loc, int *found_pfe)
{
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    uint64_t *v = NULL;
    size_t n = 0, cap = 0;
    int rc = 0;

    while ((scn = elf_nextscn(s->elf, scn)) && !rc) {
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC))
            continue;
        const char *name = scn_name(s, &sh);
        if (!strcmp(name, "__mcount_loc"))
            *found_mcount_loc = 1;
        else if (!strcmp(name, "__patchable_function_entries"))
            *found_pfe = 1;
        else
            continue;
        rc = collect_list(s, &sh, &v, &n, &cap);
    }
    if (!rc && n) {
        qsort(v, n, sizeof *v, cmp_u64);
        for (size_t i = 0; i < n && !rc; i++)
            if (!i || v[i] != v[i - 1]) rc = list_site(s, v[i]);
    }
    free(v);
    return rc;
}

/* ---- sites from function starts ---- */

static int scan_functions(struct scan *s)
{
    if (!have_targets(&s->t)) return 0; /* nothing here calls a hook: no function can have a site */
    size_t n = s->nsyms + s->nstarts;
    uint64_t *f = malloc((n ? n : 1) * sizeof *f);
    if (!f) return oom(s);
    for (size_t i = 0; i < s->nsyms; i++)
        f[i] = s->syms[i].addr;
    if (s->nstarts) memcpy(f + s->nsyms, s->starts, s->nstarts * sizeof *f);
    qsort(f, n, sizeof *f, cmp_u64);

    int rc = 0;
    for (size_t i = 0; i < n && !rc; i++) {
        if (i && f[i] == f[i - 1]) continue;
        uint64_t limit = PROLOGUE_SPAN, fn, size = 0;
        const char *name = NULL;
        for (size_t k = sym_bound(s, f[i], 1); k < s->nsyms && s->syms[k].addr == f[i]; k++)
            if (s->syms[k].size > size)
                size = s->syms[k].size; /* the largest alias bounds the walk */
        if (size && size < limit) limit = size;
        size_t j = i + 1;
        while (j < n && f[j] == f[i])
            j++;
        if (j < n && f[j] - f[i] < limit) limit = f[j] - f[i];
        size_t avail;
        const uint8_t *c = live(s, f[i], (size_t)limit, &avail, PF_X);
        if (!c) continue;
        unsigned shape;
        uint8_t len;
        int off = ftr_x86_find_site(c, avail, f[i], &s->t, &shape, &len);
        if (off < 0) {
            /* a hook call near the start that we could not reach is a site we refuse */
            size_t end = avail < SKIP_SCAN ? avail : SKIP_SCAN;
            for (size_t k = 0; k < end; k++) {
                uint8_t l;
                unsigned sh = ftr_x86_classify(c + k, avail - k, f[i] + k, &s->t, &l);
                if (sh >= FTR_SHAPE_FENTRY_GOT && sh <= FTR_SHAPE_MCOUNT_REL) {
                    if (!func_of(s, f[i], &fn, &name) || fn != f[i]) name = NULL;
                    refuse(s, f[i], name);
                    break;
                }
            }
            continue;
        }
        uint64_t addr = f[i] + (uint64_t)off;
        int chain = ftr_x86_chain_site(c, avail, (size_t)off, len);
        int mcount = !chain && off > (is_endbr64(c, avail) ? 4 : 0);
        if (!func_of(s, addr, &fn, &name) || fn != f[i]) name = NULL;
        rc = add_site(s, addr, f[i], name, shape, len, mcount, chain, c + off);
    }
    free(f);
    return rc;
}

/* ---- modules that cannot have sites ----
 * Most modules of a process are not instrumented (the C library, the dynamic linker, every
 * library of an uninstrumented program that a traced one runs): they are told apart before the
 * costly part of the scan (every symbol sorted, .eh_frame_hdr, every function's first bytes
 * decoded), which would find nothing in them. */

/* Sites listed by the compiler? */
static void find_lists(const struct scan *s, int *found_mcount_loc, int *found_pfe)
{
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    while ((scn = elf_nextscn(s->elf, scn))) {
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS || !(sh.sh_flags & SHF_ALLOC))
            continue;
        const char *name = scn_name(s, &sh);
        *found_mcount_loc |= !strcmp(name, "__mcount_loc");
        *found_pfe |= !strcmp(name, "__patchable_function_entries");
    }
}

/* May a symbol of the module be named after a hook? Not when no string table of a symbol table
 * holds the name: then no symbol and no relocation refers to one. Any occurrence counts
 * ("_mcount" and "x_mcount@V" too): a false "may" only costs the full scan. */
static int may_name_a_hook(const struct scan *s)
{
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    while ((scn = elf_nextscn(s->elf, scn))) {
        if (!gelf_getshdr(scn, &sh) || (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM))
            continue;
        Elf_Scn *str = elf_getscn(s->elf, sh.sh_link);
        Elf_Data *d = str ? elf_getdata(str, NULL) : NULL;
        if (!d || !d->d_buf) return 1; /* cannot tell */
        if (memmem(d->d_buf, d->d_size, "__fentry__", 10) ||
            memmem(d->d_buf, d->d_size, "mcount", 6))
            return 1;
    }
    return 0;
}

/* The only hooks are calls straight to a few addresses (a hook the module defines itself, or
 * PLT stubs): no GOT slot to call through, no PLT range taken as a hook. */
static int direct_only(const struct ftr_hook_targets *t)
{
    return !t->fentry_got && !t->mcount_got && !t->plt_shape;
}

static int reaches(const uint8_t *q, const uint64_t want[4])
{
    int32_t rel;
    memcpy(&rel, q + 1, 4);
    uint64_t to = (uint64_t)(uintptr_t)q + 5 + (int64_t)rel;
    return (want[0] && to == want[0]) || (want[1] && to == want[1]) || (want[2] && to == want[2]) ||
           (want[3] && to == want[3]);
}

/* Does any e8 rel32 in the executable segments reach a direct target? The linker's 67 e8 form
 * is covered too: its e8 reaches the same address. 16 bytes at a time (e8 is a common byte:
 * a memchr() per hit costs more than the whole pass). */
static int direct_call_reaches(const struct scan *s)
{
    const struct ftr_hook_targets *t = &s->t;
    const uint64_t want[4] = {t->fentry_call, t->fentry_call2, t->mcount_call, t->mcount_call2};
    const __m128i e8 = _mm_set1_epi8((char)0xe8);
    for (size_t i = 0; i < s->nsegs; i++) {
        const struct seg *g = &s->segs[i];
        if (!(g->flags & PF_X) || g->hi - g->lo < 5) continue;
        const uint8_t *p = (const uint8_t *)(uintptr_t)g->lo;
        size_t n = (size_t)(g->hi - g->lo) - 4, k = 0; /* an e8 at p[k], k < n, has its rel32 */
        for (; k + 16 <= n; k += 16) {
            __m128i v = _mm_loadu_si128((const __m128i *)(const void *)(p + k));
            unsigned mask = (unsigned)_mm_movemask_epi8(_mm_cmpeq_epi8(v, e8));
            for (; mask; mask &= mask - 1)
                if (reaches(p + k + (unsigned)__builtin_ctz(mask), want)) return 1;
        }
        for (; k < n; k++)
            if (p[k] == 0xe8 && reaches(p + k, want)) return 1;
    }
    return 0;
}

/* The hook targets (symbols, GOT slots, PLT stubs). @return 0, -1 (err) */
static int load_targets(struct scan *s, Elf_Scn *symtab, Elf_Scn *dynsym)
{
    if ((symtab && load_symbols(s, symtab, 0)) || (dynsym && load_symbols(s, dynsym, 0))) return -1;
    load_got_slots(s);
    load_plt(s);
    build_targets(s);
    return 0;
}

/* ---- result ---- */

static int cmp_site(const void *a, const void *b)
{
    const struct ftr_site *x = a, *y = b;
    return x->addr < y->addr ? -1 : x->addr > y->addr;
}

/* Sorts and deduplicates the sites and moves their names into one block owned by m. */
static int finish(struct scan *s, struct ftr_module *m)
{
    if (s->nsites) qsort(s->sites, s->nsites, sizeof *s->sites, cmp_site);
    size_t n = 0;
    for (size_t i = 0; i < s->nsites; i++)
        if (!n || s->sites[i].addr != s->sites[n - 1].addr) s->sites[n++] = s->sites[i];
    s->nsites = n;

    size_t total = 0;
    char hex[32];
    for (size_t i = 0; i < n; i++) {
        const struct ftr_site *st = &s->sites[i];
        total += st->name ? strlen(st->name) + 1
                          : (size_t)snprintf(hex, sizeof hex, "0x%" PRIx64, st->func - s->base) + 1;
    }
    char *names = malloc(total ? total : 1);
    if (!names) return oom(s);
    char *w = names;
    for (size_t i = 0; i < n; i++) {
        struct ftr_site *st = &s->sites[i];
        int l =
            st->name ? sprintf(w, "%s", st->name) : sprintf(w, "0x%" PRIx64, st->func - s->base);
        st->name = w;
        w += l + 1;
    }
    m->names = names;
    m->sites = s->sites;
    m->nsites = n;
    s->sites = NULL;
    if (!n) {
        free(m->sites);
        m->sites = NULL;
    }
    return 0;
}

int ftr_module_scan(const char *path, uint64_t base, const void *phdr, unsigned phnum,
                    struct ftr_module *m, char *err, size_t errlen)
{
    struct scan s = {.path = path ? path : "", .base = base, .err = err, .errlen = errlen};
    int fd = -1, rc = -1;

    memset(m, 0, sizeof *m);
    if (err && errlen) err[0] = 0;
    m->base = base;
    m->method = "symbols";
    if (!path || !*path) return fail(&s, "no path for the module at 0x%" PRIx64, base);
    if (!(m->path = strdup(path))) return oom(&s);
    if (elf_version(EV_CURRENT) == EV_NONE) {
        fail(&s, "libelf: %s", elf_errmsg(-1));
        goto out;
    }
    if ((fd = open(path, O_RDONLY | O_CLOEXEC)) < 0) {
        fail(&s, "%s: %s", path, strerror(errno));
        goto out;
    }
    s.elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    if (!s.elf || elf_kind(s.elf) != ELF_K_ELF) {
        fail(&s, "%s: not an ELF file", path);
        goto out;
    }
    GElf_Ehdr eh;
    if (!gelf_getehdr(s.elf, &eh) || eh.e_ident[EI_CLASS] != ELFCLASS64 ||
        eh.e_machine != EM_X86_64) {
        fail(&s, "%s: not an x86-64 ELF file", path);
        goto out;
    }
    s.have_shstr = elf_getshdrstrndx(s.elf, &s.shstrndx) == 0;
    if (load_segments(&s, phdr, phnum, m)) goto out;
    load_build_id(&s, m);

    Elf_Scn *symtab = find_scn_type(&s, SHT_SYMTAB);
    Elf_Scn *dynsym = find_scn_type(&s, SHT_DYNSYM);
    int mloc = 0, pfe = 0, targets_known = 0;
    find_lists(&s, &mloc, &pfe);
    if (!mloc && !pfe) { /* only calls to a hook can be sites: are there any? */
        if (may_name_a_hook(&s)) {
            if (load_targets(&s, symtab, dynsym)) goto out;
            targets_known = 1;
        }
        if (!have_targets(&s.t) || (direct_only(&s.t) && !direct_call_reaches(&s))) {
            m->targets = s.t;
            rc = finish(&s, m); /* no sites, none skipped */
            goto out;
        }
    }

    if (load_eh_frame_hdr(&s, phdr, phnum)) goto out;
    if (symtab ? load_symbols(&s, symtab, 1) : dynsym ? load_symbols(&s, dynsym, 1) : 0) goto out;
    if (!targets_known) {
        if (symtab && dynsym && load_symbols(&s, dynsym, 0)) /* own hooks exported but stripped */
            goto out;
        load_got_slots(&s);
        load_plt(&s);
        build_targets(&s);
    }
    m->targets = s.t;

    mloc = pfe = 0;
    if (scan_lists(&s, &mloc, &pfe)) goto out;
    if (mloc)
        m->method = "__mcount_loc";
    else if (pfe)
        m->method = "__patchable_function_entries";
    else if (scan_functions(&s))
        goto out;
    if (finish(&s, m)) goto out;
    m->skipped = s.skipped;
    m->skipped_names = s.skip_names;
    m->nskipped_names = s.nskip_names;
    s.skip_names = NULL;
    rc = 0;
out:
    if (s.elf) elf_end(s.elf);
    if (fd >= 0) close(fd);
    free(s.segs);
    free(s.syms);
    free(s.starts);
    free(s.sites);
    free(s.skip_names);
    if (rc) ftr_module_free(m);
    return rc;
}

void ftr_module_free(struct ftr_module *m)
{
    if (!m) return;
    free(m->path);
    free(m->sites);
    free(m->names);
    free(m->skipped_names);
    memset(m, 0, sizeof *m);
}
