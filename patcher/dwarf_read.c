/*
 * dwarf_read.c - a small reader of .debug_info on libelf, and the module around it (see
 * dwarf_read.h).
 */
#include "dwarf_read.h"

#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HOPS 16 /* typedef / qualifier chain followed by ftr_dw_type() */
enum { FORM_data4 = 0x06, FORM_data8 = 0x07, FORM_indirect = 0x16, FORM_implicit_const = 0x21 };
#define MAX_DEPTH 256 /* DIE nesting followed by ftr_dw_children() */

// clang-format off
static const struct { uint16_t at; uint8_t slot; } slots[] = {
    {0x01, A_SIBLING}, {0x02, A_LOCATION}, {0x03, A_NAME}, {0x0b, A_BYTE_SIZE},
    {0x0d, A_BIT_SIZE}, {0x11, A_LOW_PC}, {0x13, A_LANG}, {0x1c, A_CONST_VALUE},
    {0x25, A_PRODUCER}, {0x27, A_PROTOTYPED}, {0x2f, A_UPPER_BOUND}, {0x31, A_ORIGIN},
    {0x34, A_ARTIFICIAL}, {0x36, A_CC}, {0x37, A_COUNT}, {0x38, A_MEMBER_LOC}, {0x3c, A_DECL},
    {0x3e, A_ENCODING}, {0x3f, A_EXTERNAL}, {0x40, A_FRAME_BASE}, {0x47, A_SPEC}, {0x49, A_TYPE},
    {0x6b, A_DATA_BIT_OFFSET}, {0x6e, A_LINKAGE_NAME}, {0x72, A_STR_OFF_BASE},
    {0x73, A_ADDR_BASE}, {0x76, A_DWO_NAME}, {0x88, A_ALIGNMENT}, {0x8a, A_DELETED},
    {0x8b, A_DEFAULTED}, {0x8c, A_LOCLISTS_BASE},
    {0x2007, A_LINKAGE_NAME /* DW_AT_MIPS_linkage_name */},
    {0x2107, A_VECTOR /* DW_AT_GNU_vector */}, {0x2130, A_DWO_NAME /* DW_AT_GNU_dwo_name */},
};

enum { Z_NONE = 32, Z_ADDR, Z_OFF, Z_REF_ADDR, Z_ULEB, Z_SLEB, Z_STRING, Z_IMPLICIT,
       Z_BLOCK1, Z_BLOCK2, Z_BLOCK4, Z_BLOCK /* in this order */ };
static const struct { uint8_t kind, z; } forms[0x2d] = {
    [0x01] = {V_ADDR, Z_ADDR},      [0x03] = {V_BLOCK, Z_BLOCK2},  [0x04] = {V_BLOCK, Z_BLOCK4},
    [0x05] = {V_CONST, 2},          [0x06] = {V_CONST, 4},         [0x07] = {V_CONST, 8},
    [0x08] = {V_STRING, Z_STRING},  [0x09] = {V_BLOCK, Z_BLOCK},   [0x0a] = {V_BLOCK, Z_BLOCK1},
    [0x0b] = {V_CONST, 1},          [0x0c] = {V_CONST, 1},         [0x0d] = {V_CONST, Z_SLEB},
    [0x0e] = {V_STRP, Z_OFF},       [0x0f] = {V_CONST, Z_ULEB},    [0x10] = {V_REF, Z_REF_ADDR},
    [0x11] = {V_REL, 1},            [0x12] = {V_REL, 2},           [0x13] = {V_REL, 4},
    [0x14] = {V_REL, 8},            [0x15] = {V_REL, Z_ULEB},      [0x17] = {V_SECOFF, Z_OFF},
    [0x18] = {V_BLOCK, Z_BLOCK},    [0x19] = {V_CONST, Z_NONE},    [0x1a] = {V_STRX, Z_ULEB},
    [0x1b] = {V_ADDRX, Z_ULEB},     [0x1c] = {V_BADREF, 4},        [0x1d] = {V_OTHER, Z_OFF},
    [0x1e] = {V_OTHER, 16},         [0x1f] = {V_LSTRP, Z_OFF},     [0x20] = {V_BADREF, 8},
    [0x21] = {V_CONST, Z_IMPLICIT}, [0x22] = {V_OTHER, Z_ULEB},    [0x23] = {V_OTHER, Z_ULEB},
    [0x24] = {V_BADREF, 8},         [0x25] = {V_STRX, 1},          [0x26] = {V_STRX, 2},
    [0x27] = {V_STRX, 3},           [0x28] = {V_STRX, 4},          [0x29] = {V_ADDRX, 1},
    [0x2a] = {V_ADDRX, 2},          [0x2b] = {V_ADDRX, 3},         [0x2c] = {V_ADDRX, 4},
};
/* GNU forms: GNU_addr_index, GNU_str_index (split DWARF), GNU_ref_alt, GNU_strp_alt (dwz) */
static const struct { uint16_t form; uint8_t kind, z; } gnu_forms[] = {
    {0x1f01, V_OTHER, Z_ULEB}, {0x1f02, V_OTHER, Z_ULEB}, {0x1f20, V_BADREF, Z_OFF},
    {0x1f21, V_OTHER, Z_OFF},
};
// clang-format on

/* ---- bounded reads ---- */
const uint8_t *ftr_dw_take(struct ftr_dw_cur *c, uint64_t n)
{
    if (c->bad || n > (uint64_t)(c->end - c->p)) {
        c->bad = 1;
        return NULL;
    }
    const uint8_t *r = c->p;
    c->p += n;
    return r;
}

uint64_t ftr_dw_rd(struct ftr_dw_cur *c, unsigned n)
{
    const uint8_t *b = ftr_dw_take(c, n);
    uint64_t v = 0;
    if (b && n == 1) return *b;
    for (unsigned i = 0; b && i < n; i++)
        v |= (uint64_t)b[i] << (8 * i);
    return v;
}

uint64_t ftr_dw_leb(struct ftr_dw_cur *c, int sign)
{
    uint64_t v = 0;
    unsigned shift = 0;
    if (!c->bad && c->p < c->end && !(*c->p & 0x80)) { /* one byte: most */
        v = *c->p++;
        return sign && (v & 0x40) ? v | ~(uint64_t)0x7f : v;
    }
    for (;;) {
        const uint8_t *b = ftr_dw_take(c, 1);
        if (!b) return 0;
        if (shift < 64) v |= (uint64_t)(*b & 0x7f) << shift;
        shift += 7;
        if (!(*b & 0x80)) break;
        if (shift >= 70) { /* longer than any 64-bit value */
            c->bad = 1;
            return 0;
        }
    }
    if (sign && shift < 64 && (v >> (shift - 1)) & 1) v |= ~(uint64_t)0 << shift;
    return v;
}

/* ---- abbreviation tables ---- */
struct ftr_dw_abbrev {
    uint64_t code;
    uint32_t tag, first, nspec; /* specs [first, first + nspec) of the pool */
    uint8_t children;
};
struct ftr_dw_spec {
    uint32_t form;
    uint8_t slot; /* where the value is kept, or NO_SLOT */
    int64_t ic;   /* DW_FORM_implicit_const's value */
};
#define NO_SLOT 0xff
struct ftr_dw_table {
    uint64_t off;    /* in .debug_abbrev */
    size_t first, n; /* abbrevs [first, first + n) of the pool, sorted by code */
    int ok;
};

int ftr_dw_grow(void **p, size_t *cap, size_t need, size_t size, int *oom)
{
    if (need <= *cap) return 0;
    size_t n = *cap ? *cap * 2 : 64;
    while (n < need)
        n *= 2;
    void *q = realloc(*p, n * size);
    if (!q) {
        *oom = 1;
        return -1;
    }
    *p = q;
    *cap = n;
    return 0;
}

static int cmp_abbrev(const void *a, const void *b)
{
    const struct ftr_dw_abbrev *x = a, *y = b;
    return x->code < y->code ? -1 : x->code > y->code;
}

static void load_table(struct ftr_dw *x, struct ftr_dw_table *t)
{
    if (t->off >= x->abbrev.n) return;
    struct ftr_dw_cur c = {x->abbrev.p + t->off, x->abbrev.p + x->abbrev.n, 0};
    t->first = x->nab;
    for (;;) {
        uint64_t code = ftr_dw_leb(&c, 0);
        if (c.bad) return;
        if (!code) break;
        struct ftr_dw_abbrev a = {code, (uint32_t)ftr_dw_leb(&c, 0), (uint32_t)x->nsp, 0, 0};
        a.children = (uint8_t)ftr_dw_rd(&c, 1);
        for (;;) {
            uint64_t name = ftr_dw_leb(&c, 0), form = ftr_dw_leb(&c, 0);
            int64_t ic = form == FORM_implicit_const ? (int64_t)ftr_dw_leb(&c, 1) : 0;
            if (c.bad) return;
            if (!name && !form) break;
            if (ftr_dw_grow((void **)&x->sp, &x->capsp, x->nsp + 1, sizeof *x->sp, &x->oom)) return;
            struct ftr_dw_spec sp = {(uint32_t)form, NO_SLOT, ic};
            for (size_t i = 0; i < sizeof slots / sizeof *slots; i++)
                if (slots[i].at == name) sp.slot = slots[i].slot;
            x->sp[x->nsp++] = sp;
            a.nspec++;
        }
        if (ftr_dw_grow((void **)&x->ab, &x->capab, x->nab + 1, sizeof *x->ab, &x->oom)) return;
        x->ab[x->nab++] = a;
    }
    t->n = x->nab - t->first;
    if (t->n) qsort(x->ab + t->first, t->n, sizeof *x->ab, cmp_abbrev);
    t->ok = 1;
}

static const struct ftr_dw_abbrev *find_abbrev(const struct ftr_dw *x, const struct ftr_dw_unit *u,
                                               uint64_t code)
{
    if (u->tab == SIZE_MAX || !x->tabs[u->tab].n) return NULL;
    const struct ftr_dw_table *t = &x->tabs[u->tab];
    const struct ftr_dw_abbrev *a = x->ab + t->first;
    if (code - 1 < t->n && a[code - 1].code == code) return &a[code - 1]; /* dense codes */
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (a[mid].code == code) return &a[mid];
        if (a[mid].code < code)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}

/* ---- DIEs ---- */
static int read_form(const struct ftr_dw_unit *u, struct ftr_dw_cur *c, uint64_t form, int64_t ic,
                     struct ftr_dw_val *v)
{
    for (int indirect = 0; form == FORM_indirect; indirect++) {
        form = ftr_dw_leb(c, 0);
        if (c->bad || indirect == 2 || form == FORM_implicit_const) return -1;
    }
    unsigned kind = 0, z = 0;
    if (form < sizeof forms / sizeof *forms) {
        kind = forms[form].kind;
        z = forms[form].z;
    }
    for (size_t i = 0; !kind && i < sizeof gnu_forms / sizeof *gnu_forms; i++)
        if (gnu_forms[i].form == form) kind = gnu_forms[i].kind, z = gnu_forms[i].z;
    if (!kind) return -1; /* a form we do not know: its size neither */
    v->kind = (uint8_t)(kind == V_REL ? V_REF : kind);
    v->form = (uint16_t)form;
    v->blk = NULL;
    if (z == Z_NONE || z == Z_IMPLICIT) {
        v->u = z == Z_NONE ? 1 : (uint64_t)ic; /* flag_present, implicit_const */
    } else if (z == Z_ULEB || z == Z_SLEB) {
        v->u = ftr_dw_leb(c, z == Z_SLEB);
    } else if (z == Z_STRING) {
        const uint8_t *nul = c->bad ? NULL : memchr(c->p, 0, (size_t)(c->end - c->p));
        if (!nul) return -1;
        v->blk = ftr_dw_take(c, (uint64_t)(nul - c->p) + 1);
    } else if (z >= Z_BLOCK1) {
        v->u = z == Z_BLOCK ? ftr_dw_leb(c, 0) : ftr_dw_rd(c, 1u << (z - Z_BLOCK1));
        v->blk = ftr_dw_take(c, v->u);
    } else {
        unsigned n = z == Z_ADDR ? u->addrsz : z == Z_OFF ? u->offsz : z;
        if (z == Z_REF_ADDR) n = u->ver == 2 ? u->addrsz : u->offsz;
        if (n > 8)
            ftr_dw_take(c, n); /* data16 */
        else
            v->u = ftr_dw_rd(c, n);
    }
    if (kind == V_REL) v->u += u->off;
    return c->bad ? -1 : 0;
}

/* Reads the DIE at .debug_info offset off of unit u. @return 0, or -1 (malformed). */
int ftr_dw_read_die(const struct ftr_dw *x, const struct ftr_dw_unit *u, uint64_t off,
                    struct ftr_dw_die *d)
{
    if (off < u->die || off >= u->end) return -1;
    struct ftr_dw_cur c = {x->info.p + off, x->info.p + u->end, 0};
    uint64_t code = ftr_dw_leb(&c, 0);
    if (c.bad) return -1;
    d->off = off;
    d->tag = 0;
    d->children = 0;
    d->have = 0;
    if (code) {
        const struct ftr_dw_abbrev *a = find_abbrev(x, u, code);
        if (!a) return -1;
        d->tag = a->tag;
        d->children = a->children;
        for (uint32_t i = 0; i < a->nspec; i++) {
            const struct ftr_dw_spec *s = &x->sp[a->first + i];
            struct ftr_dw_val v;
            if (read_form(u, &c, s->form, s->ic, &v)) return -1;
            if (s->slot == NO_SLOT) continue;
            d->v[s->slot] = v;
            d->have |= (uint64_t)1 << s->slot;
        }
    }
    d->next = (uint64_t)(c.p - x->info.p);
    return 0;
}

/* A constant (sizes, encodings, offsets). DWARF 2-3's data4/data8 may be section offsets. */
int ftr_dw_constant(const struct ftr_dw_unit *u, const struct ftr_dw_die *d, int slot,
                    uint64_t *out)
{
    const struct ftr_dw_val *v = ftr_dw_attr(d, slot);
    if (!v || v->kind != V_CONST) return 0;
    if (u->ver < 4 && (v->form == FORM_data4 || v->form == FORM_data8)) return 0;
    *out = v->u;
    return 1;
}

static const struct ftr_dw_unit *unit_of(const struct ftr_dw *x, uint64_t off)
{
    size_t lo = 0, hi = x->nunits;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        const struct ftr_dw_unit *u = &x->units[mid];
        if (off < u->die)
            hi = mid;
        else if (off >= u->end)
            lo = mid + 1;
        else
            return u;
    }
    return NULL;
}

/* The DIE a reference points to (never a null entry), counted against the budget. */
const struct ftr_dw_unit *ftr_dw_deref(struct ftr_dw *x, const struct ftr_dw_val *v,
                                       struct ftr_dw_die *d)
{
    if (!v || v->kind != V_REF || --x->budget < 0) return NULL;
    const struct ftr_dw_unit *u = unit_of(x, v->u);
    if (!u || ftr_dw_read_die(x, u, v->u, d) || !d->tag) return NULL;
    return u;
}

/* @return 1 with *pos = d's DW_AT_sibling, when it has a usable one. */
int ftr_dw_sibling(const struct ftr_dw_unit *u, const struct ftr_dw_die *d, uint64_t *pos)
{
    const struct ftr_dw_val *v = ftr_dw_attr(d, A_SIBLING);
    if (!v || v->kind != V_REF || v->u <= d->off || v->u > u->end) return 0;
    *pos = v->u;
    return 1;
}

int ftr_dw_children(struct ftr_dw *x, const struct ftr_dw_unit *u, const struct ftr_dw_die *parent,
                    int packs, ftr_dw_child_fn fn, void *arg)
{
    if (!parent->children) return 0;
    uint64_t pos = parent->next;
    int depth = 1, pack = 0; /* pack: inside a direct parameter pack (depth 2) */
    for (;;) {
        struct ftr_dw_die d;
        if (--x->budget < 0 || ftr_dw_read_die(x, u, pos, &d)) return -1;
        pos = d.next;
        if (!d.tag) {
            if (--depth == 0) return 0;
            if (depth == 1) pack = 0;
            continue;
        }
        if ((depth == 1 || (depth == 2 && pack)) && fn(x, u, &d, arg)) return -1;
        if (!d.children) continue;
        if (depth == 1 && packs && d.tag == TAG_param_pack) {
            pack = 1;
        } else {
            if (ftr_dw_sibling(u, &d, &pos)) continue; /* skip the subtree */
        }
        if (++depth > MAX_DEPTH) return -1;
    }
}

void ftr_dw_walk(struct ftr_dw *x, const struct ftr_dw_unit *u, ftr_dw_walk_fn fn, void *arg)
{
    uint64_t pos = u->die;
    int depth = 0;
    while (pos < u->end && !x->oom) {
        struct ftr_dw_die d;
        if (ftr_dw_read_die(x, u, pos, &d)) return;
        pos = d.next;
        if (!d.tag) {
            if (depth == 0) continue; /* padding */
            fn(x, u, &d, depth, arg);
            if (--depth == 0) return;
            continue;
        }
        if (d.children && depth + 1 == FTR_DW_MAX_DEPTH) return;
        int skip = fn(x, u, &d, depth, arg);
        if (!d.children || (skip && ftr_dw_sibling(u, &d, &pos))) continue;
        depth++;
    }
}

int ftr_dw_no_subprogram(uint32_t tag)
{
    return tag == TAG_struct || tag == TAG_class || tag == TAG_union || tag == TAG_enum ||
           tag == TAG_array || tag == TAG_subroutine_type || tag == TAG_inlined;
}

int ftr_dw_addrx(const struct ftr_dw *x, const struct ftr_dw_unit *u, uint64_t i, uint64_t *addr)
{
    if (!u->has_addr_base || !x->addr.p || u->addr_base > x->addr.n ||
        i >= (x->addr.n - u->addr_base) / u->addrsz)
        return 0;
    struct ftr_dw_cur c = {x->addr.p + u->addr_base + i * u->addrsz, x->addr.p + x->addr.n, 0};
    *addr = ftr_dw_rd(&c, u->addrsz);
    return !c.bad;
}

int ftr_dw_low_pc(const struct ftr_dw *x, const struct ftr_dw_unit *u, const struct ftr_dw_die *d,
                  uint64_t *pc)
{
    const struct ftr_dw_val *v = ftr_dw_attr(d, A_LOW_PC);
    if (!v) return 0;
    if (v->kind == V_ADDR) {
        *pc = v->u;
        return 1;
    }
    return v->kind == V_ADDRX && ftr_dw_addrx(x, u, v->u, pc);
}

int ftr_dw_member_offset(const struct ftr_dw_unit *u, const struct ftr_dw_die *m, uint64_t *off)
{
    const struct ftr_dw_val *v = ftr_dw_attr(m, A_MEMBER_LOC);
    *off = 0;
    if (!v) return 0;
    if (v->kind == V_BLOCK) { /* DWARF 2-3: DW_OP_plus_uconst n */
        struct ftr_dw_cur c = {v->blk, v->blk + v->u, 0};
        if (!v->blk || ftr_dw_rd(&c, 1) != OP_plus_uconst) return -1;
        *off = ftr_dw_leb(&c, 0);
        return !c.bad && c.p == c.end ? 1 : -1;
    }
    return ftr_dw_constant(u, m, A_MEMBER_LOC, off) ? 1 : -1;
}

/* ---- units ---- */
static const char *string_at(const struct ftr_dw_sec *s, uint64_t off)
{
    if (!s->p || off >= s->n) return NULL;
    const char *p = (const char *)s->p + off;
    return memchr(p, 0, s->n - off) ? p : NULL;
}

const char *ftr_dw_string(const struct ftr_dw *x, const struct ftr_dw_unit *u,
                          const struct ftr_dw_die *d, int slot)
{
    const struct ftr_dw_val *v = ftr_dw_attr(d, slot);
    uint64_t str_off_base = u->str_off_base;
    if (!v) return NULL;
    switch (v->kind) {
    case V_STRING:
        return (const char *)v->blk; /* read_form() checked its NUL */
    case V_STRP:
        return string_at(&x->str, v->u);
    case V_LSTRP:
        return string_at(&x->line_str, v->u);
    case V_STRX: {
        if (!x->str_off.p || str_off_base > x->str_off.n ||
            v->u >= (x->str_off.n - str_off_base) / u->offsz)
            return NULL;
        struct ftr_dw_cur c = {x->str_off.p + str_off_base + v->u * u->offsz,
                               x->str_off.p + x->str_off.n, 0};
        uint64_t off = ftr_dw_rd(&c, u->offsz);
        return c.bad ? NULL : string_at(&x->str, off);
    }
    default:
        return NULL;
    }
}

/* The unit header at off: @return the offset of the next one, or 0 when the rest of the
 * section cannot be walked. u->end == 0 when this unit is not usable. */
static uint64_t read_header(const struct ftr_dw *x, uint64_t off, struct ftr_dw_unit *u)
{
    struct ftr_dw_cur c = {x->info.p + off, x->info.p + x->info.n, 0};
    uint64_t len = ftr_dw_rd(&c, 4);
    memset(u, 0, sizeof *u);
    u->str_off_base = UINT64_MAX;
    u->offsz = 4;
    if (len == 0xffffffff) {
        u->offsz = 8;
        len = ftr_dw_rd(&c, 8);
    } else if (len >= 0xfffffff0) {
        return 0;
    }
    if (c.bad || len > (uint64_t)(c.end - c.p)) return 0;
    uint64_t end = (uint64_t)(c.p - x->info.p) + len;
    c.end = c.p + len;
    u->off = off;
    u->ver = (uint8_t)ftr_dw_rd(&c, 2);
    u->type = UT_compile;
    if (u->ver >= 5) {
        u->type = (uint8_t)ftr_dw_rd(&c, 1);
        u->addrsz = (uint8_t)ftr_dw_rd(&c, 1);
        u->abbrev_off = ftr_dw_rd(&c, u->offsz);
        if (u->type == UT_skeleton || u->type == UT_split_compile) ftr_dw_take(&c, 8);
        if (u->type == UT_type || u->type == UT_split_type) ftr_dw_take(&c, 8 + u->offsz);
    } else {
        u->abbrev_off = ftr_dw_rd(&c, u->offsz);
        u->addrsz = (uint8_t)ftr_dw_rd(&c, 1);
    }
    u->die = (uint64_t)(c.p - x->info.p);
    u->tab = SIZE_MAX;
    if (!c.bad && u->ver >= 2 && u->ver <= 5 && (u->addrsz == 4 || u->addrsz == 8) && c.p < c.end)
        u->end = end;
    return end;
}

/* The root DIE: language, producer, .debug_addr base, split DWARF. */
static void read_root(const struct ftr_dw *x, struct ftr_dw_unit *u)
{
    struct ftr_dw_die d;
    if (ftr_dw_read_die(x, u, u->die, &d) ||
        (d.tag != TAG_compile_unit && d.tag != TAG_partial_unit))
        return;
    u->root = 1;
    const struct ftr_dw_val *ab = ftr_dw_attr(&d, A_ADDR_BASE);
    const struct ftr_dw_val *sb = ftr_dw_attr(&d, A_STR_OFF_BASE);
    const struct ftr_dw_val *lb = ftr_dw_attr(&d, A_LOCLISTS_BASE);
    if (ab && (ab->kind == V_SECOFF || ab->kind == V_CONST)) {
        u->has_addr_base = 1;
        u->addr_base = ab->u;
    }
    if (lb && lb->kind == V_SECOFF) {
        u->has_loclists_base = 1;
        u->loclists_base = lb->u;
    }
    if (!ftr_dw_low_pc(x, u, &d, &u->base)) u->base = 0;
    /* no base, no strx string (guessing one could read another unit's strings) */
    u->str_off_base = sb && sb->kind == V_SECOFF ? sb->u : UINT64_MAX;
    const char *p = ftr_dw_string(x, u, &d, A_PRODUCER);
    u->gnu = p && !strncmp(p, "GNU ", 4);
    u->thin = p && (strstr(p, " -g1") || strstr(p, " -gmlt") || strstr(p, " -gline-tables-only") ||
                    strstr(p, " -mabi=ms"));
    u->dwo = ftr_dw_attr(&d, A_DWO_NAME) != NULL;
    if (!ftr_dw_constant(u, &d, A_LANG, &u->lang)) u->lang = 0;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int load_units(struct ftr_dw *x)
{
    size_t cap = 0;
    for (uint64_t off = 0; off < x->info.n;) {
        if (ftr_dw_grow((void **)&x->units, &cap, x->nunits + 1, sizeof *x->units, &x->oom))
            return -1;
        struct ftr_dw_unit *u = &x->units[x->nunits];
        uint64_t next = read_header(x, off, u);
        if (u->end) x->nunits++;
        if (!next) break;
        off = next;
    }
    /* abbreviation tables: one per distinct offset */
    uint64_t *offs = malloc((x->nunits ? x->nunits : 1) * sizeof *offs);
    if (!offs) return x->oom = 1, -1;
    for (size_t i = 0; i < x->nunits; i++)
        offs[i] = x->units[i].abbrev_off;
    qsort(offs, x->nunits, sizeof *offs, cmp_u64);
    x->tabs = calloc(x->nunits ? x->nunits : 1, sizeof *x->tabs);
    if (!x->tabs) return free(offs), x->oom = 1, -1;
    for (size_t i = 0; i < x->nunits; i++)
        if (!x->ntabs || offs[i] != x->tabs[x->ntabs - 1].off) x->tabs[x->ntabs++].off = offs[i];
    free(offs);
    for (size_t i = 0; i < x->ntabs && !x->oom; i++)
        load_table(x, &x->tabs[i]);
    for (size_t i = 0; i < x->nunits && !x->oom; i++) {
        struct ftr_dw_unit *u = &x->units[i];
        size_t lo = 0, hi = x->ntabs;
        while (lo < hi) {
            size_t mid = lo + (hi - lo) / 2;
            if (x->tabs[mid].off < u->abbrev_off)
                lo = mid + 1;
            else
                hi = mid;
        }
        if (lo < x->ntabs && x->tabs[lo].off == u->abbrev_off && x->tabs[lo].ok) u->tab = lo;
        read_root(x, u);
    }
    return x->oom ? -1 : 0;
}

static void section_data(Elf_Scn *scn, const GElf_Shdr *sh, int gnu_z, struct ftr_dw_sec *out)
{
    if (sh->sh_type == SHT_NOBITS) return;
    if ((sh->sh_flags & SHF_COMPRESSED) && elf_compress(scn, 0, 0) < 0) return;
    /* a .zdebug section already decompressed (an earlier call) is refused: its data is used */
    int z = gnu_z && elf_compress_gnu(scn, 0, 0) < 0;
    Elf_Data *d = elf_getdata(scn, NULL);
    if (d && d->d_buf && d->d_size && !(z && d->d_size >= 4 && !memcmp(d->d_buf, "ZLIB", 4))) {
        out->p = d->d_buf;
        out->n = d->d_size;
    }
}

int ftr_dw_open(struct ftr_dw *x, Elf *elf)
{
    size_t shstrndx;
    memset(x, 0, sizeof *x);
    if (elf_getshdrstrndx(elf, &shstrndx)) return 0;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn))) {
        GElf_Shdr sh;
        const char *name = gelf_getshdr(scn, &sh) ? elf_strptr(elf, shstrndx, sh.sh_name) : NULL;
        if (!name) continue;
        int z = !strncmp(name, ".zdebug_", 8);
        if (!z && strncmp(name, ".debug_", 7)) continue;
        name += z ? 8 : 7;
        struct ftr_dw_sec *out = !strcmp(name, "info")          ? &x->info
                                 : !strcmp(name, "abbrev")      ? &x->abbrev
                                 : !strcmp(name, "str")         ? &x->str
                                 : !strcmp(name, "line_str")    ? &x->line_str
                                 : !strcmp(name, "str_offsets") ? &x->str_off
                                 : !strcmp(name, "addr")        ? &x->addr
                                 : !strcmp(name, "loc")         ? &x->loc
                                 : !strcmp(name, "loclists")    ? &x->loclists
                                                                : NULL;
        if (out) section_data(scn, &sh, z, out);
    }
    if (!x->info.p || !x->abbrev.p) return 0;
    return load_units(x);
}

void ftr_dw_close(struct ftr_dw *x)
{
    free(x->units);
    free(x->ab);
    free(x->sp);
    free(x->tabs);
    memset(x, 0, sizeof *x);
}

/* ---- types, languages ---- */
int ftr_dw_type(struct ftr_dw *x, struct ftr_dw_die *d, int slot, const struct ftr_dw_unit **u)
{
    const struct ftr_dw_val *v = ftr_dw_attr(d, slot);
    for (int hop = 0; hop < MAX_HOPS; hop++) {
        if (!v) return 0;
        struct ftr_dw_die t;
        *u = ftr_dw_deref(x, v, &t);
        if (!*u) return -1;
        *d = t;
        switch (d->tag) {
        case TAG_typedef:
        case TAG_const:
        case TAG_volatile:
        case TAG_restrict:
        case TAG_atomic:
            v = ftr_dw_attr(d, A_TYPE);
            break;
        default:
            return 1;
        }
    }
    return -1;
}

int ftr_dw_c_family(uint64_t lang)
{
    static const uint8_t c[] = {0x01, 0x02, 0x0c, 0x1d, 0x2c};         /* C89 C C99 C11 C17 */
    static const uint8_t cxx[] = {0x04, 0x19, 0x1a, 0x21, 0x2a, 0x2b}; /* C++ 03 11 14 17 20 */
    for (size_t i = 0; i < sizeof cxx; i++)
        if (lang == cxx[i]) return 2;
    return lang && lang < 0x100 && memchr(c, (int)lang, sizeof c) ? 1 : 0;
}

int ftr_dw_c_unit(const struct ftr_dw_unit *u)
{
    return (u->type == UT_compile || u->type == UT_partial) && u->root && !u->dwo &&
           u->tab != SIZE_MAX && ftr_dw_c_family(u->lang);
}

/* ---- the module: executable sections, refused symbols ---- */
static void load_symbols(struct ftr_dw_file *f, Elf *elf, Elf_Scn *scn, const GElf_Shdr *sh,
                         int (*name_ok)(const char *), int *oom)
{
    Elf_Data *d = elf_getdata(scn, NULL);
    size_t n = d && sh->sh_entsize ? sh->sh_size / sh->sh_entsize : 0;
    for (size_t i = 1; i < n && !*oom; i++) {
        GElf_Sym sym;
        if (!gelf_getsym(d, (int)i, &sym) || sym.st_shndx == SHN_UNDEF) continue;
        unsigned type = GELF_ST_TYPE(sym.st_info);
        if (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE) continue;
        const char *name = elf_strptr(elf, sh->sh_link, sym.st_name);
        if (!name || name_ok(name)) continue;
        if (!ftr_dw_grow((void **)&f->drop, &f->capdrop, f->ndrop + 1, sizeof *f->drop, oom))
            f->drop[f->ndrop++] = sym.st_value;
    }
}

int ftr_dw_file_open(struct ftr_dw_file *f, Elf *elf, int (*name_ok)(const char *))
{
    GElf_Ehdr eh;
    memset(f, 0, sizeof *f);
    if (!elf || elf_kind(elf) != ELF_K_ELF || !gelf_getehdr(elf, &eh) ||
        eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_machine != EM_X86_64 ||
        (eh.e_type != ET_EXEC && eh.e_type != ET_DYN))
        return 0;
    int oom = 0;
    Elf_Scn *scn = NULL;
    while ((scn = elf_nextscn(elf, scn)) && !oom) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh)) continue;
        if ((sh.sh_flags & (SHF_ALLOC | SHF_EXECINSTR)) == (SHF_ALLOC | SHF_EXECINSTR) &&
            sh.sh_size &&
            !ftr_dw_grow((void **)&f->exec, &f->capexec, f->nexec + 1, sizeof *f->exec, &oom))
            f->exec[f->nexec++] = (struct ftr_dw_range){sh.sh_addr, sh.sh_addr + sh.sh_size};
        if (sh.sh_type == SHT_SYMTAB || sh.sh_type == SHT_DYNSYM)
            load_symbols(f, elf, scn, &sh, name_ok, &oom);
    }
    if (f->ndrop) qsort(f->drop, f->ndrop, sizeof *f->drop, cmp_u64);
    return oom ? -1 : 1;
}

void ftr_dw_file_close(struct ftr_dw_file *f)
{
    free(f->exec);
    free(f->drop);
    memset(f, 0, sizeof *f);
}

int ftr_dw_file_keeps(const struct ftr_dw_file *f, uint64_t a)
{
    int in = 0;
    for (size_t i = 0; i < f->nexec && !in; i++)
        in = a >= f->exec[i].lo && a < f->exec[i].hi;
    return in && !(f->ndrop && bsearch(&a, f->drop, f->ndrop, sizeof *f->drop, cmp_u64));
}
