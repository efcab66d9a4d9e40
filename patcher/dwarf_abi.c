/*
 * dwarf_abi.c - the System V class of a type read from DWARF (see dwarf_abi.h).
 *
 * Scalars by their DWARF tag and encoding; aggregates as the ABI classifies them, member by
 * member, each marking the eightbytes it covers (3.2.3: INTEGER wins over SSE, x87 with
 * anything else and an unaligned member make it MEMORY); larger ones are only walked for their
 * alignment (the stack slot of a 16-byte aligned one is). C++ classes are first asked whether
 * they go by invisible reference ("non-trivial for the purposes of calls", Itanium C++ ABI).
 */
#include "ftr_patcher.h"
#include "dwarf_abi.h"

#include <string.h>

#define MAX_HOPS 16         /* array types of array types followed */
#define MAX_AGG_DEPTH 16    /* nesting of aggregates (bases, members) looked into */
#define MAX_SIZE (1u << 20) /* an array larger than this: not understood */

enum { CC_by_reference = 4, CC_by_value = 5, DEFAULTED_in_class = 1 };

static int is_cxx(const struct ftr_dw_unit *u)
{
    return ftr_dw_c_family(u->lang) == 2;
}

/* A base type named so: "long double" is x87; other 16-byte floats are _Float128 */
static int named_long_double(const struct ftr_dw *x, const struct ftr_dw_unit *u,
                             const struct ftr_dw_die *t)
{
    const char *n = ftr_dw_string(x, u, t, A_NAME);
    return n && strstr(n, "long double") != NULL;
}

static int base_type(const struct ftr_dw *x, const struct ftr_dw_unit *u,
                     const struct ftr_dw_die *t, struct ftr_dw_ty *ty)
{
    uint64_t enc, size;
    if (!ftr_dw_constant(u, t, A_ENCODING, &enc) || !ftr_dw_constant(u, t, A_BYTE_SIZE, &size))
        return -1;
    ty->size = ty->align = size;
    switch (enc) {
    case ATE_float:
        ty->eb[0] = EB_SSE;
        if (size == 4 || size == 8) ty->cls = FTR_PC_FLOAT;
        if (size == 2 || size == 4 || size == 8) return 1; /* _Float16: FTR_PC_NONE */
        if (size != 16) return -1;
        if (named_long_double(x, u, t)) {
            ty->kind = K_X87;
            ty->eb[0] = ty->eb[1] = EB_X87;
            ty->neb = 2;
        } else {
            ty->whole = 1;
        }
        return 1;
    case ATE_complex:
        ty->cls = FTR_PC_STRUCT;
        ty->align = size / 2;
        ty->eb[0] = ty->eb[1] = EB_SSE;
        if (size == 8 || size == 16) {
            ty->neb = (uint8_t)(size / 8);
            return 1;
        }
        if (size != 32) return -1;
        ty->cls = FTR_PC_NONE;
        ty->align = 16;
        ty->kind = named_long_double(x, u, t) ? K_X87 : K_MEM;
        ty->neb = 0;
        return 1;
    case ATE_boolean:
        ty->cls = FTR_PC_BOOL;
        break;
    case ATE_signed_char:
    case ATE_unsigned_char:
        ty->cls = size == 1 ? FTR_PC_CHAR : enc == ATE_signed_char ? FTR_PC_SINT : FTR_PC_UINT;
        break;
    case ATE_signed:
        ty->cls = FTR_PC_SINT;
        break;
    case ATE_unsigned:
    case ATE_address:
    case ATE_UTF:
    case ATE_UCS:
    case ATE_ASCII:
        ty->cls = FTR_PC_UINT;
        break;
    default:
        return -1;
    }
    if (size == 16) {
        ty->neb = 2;
        ty->eb[1] = EB_INT;
        return 1;
    }
    return size == 1 || size == 2 || size == 4 || size == 8 ? 1 : -1;
}

/* 1 when the pointer *p points to a (qualified) char type */
static int to_char(struct ftr_dw *x, struct ftr_dw_die p)
{
    const struct ftr_dw_unit *u;
    struct ftr_dw_ty t = {K_REG};
    return ftr_dw_type(x, &p, A_TYPE, &u) == 1 && p.tag == TAG_base &&
           base_type(x, u, &p, &t) > 0 && t.cls == FTR_PC_CHAR;
}

/* A scalar type *t (stripped): @return 1 with *ty, 0 when t is an aggregate or an array, -1
 * when it is not understood. */
static int scalar(struct ftr_dw *x, const struct ftr_dw_unit *u, const struct ftr_dw_die *t,
                  struct ftr_dw_ty *ty)
{
    *ty = (struct ftr_dw_ty){K_REG, FTR_PC_PTR, 1, {EB_INT, EB_NONE}, 0, 8, 8, 0};
    struct ftr_dw_die m = *t;
    const struct ftr_dw_unit *mu;
    uint64_t size;
    const char *name;
    switch (t->tag) {
    case TAG_pointer:
        if (to_char(x, *t)) ty->cls = FTR_PC_STR;
        return 1;
    case TAG_reference:
    case TAG_rvalue_ref:
        return 1;
    case TAG_unspec_type:
        name = ftr_dw_string(x, u, t, A_NAME);
        return name && !strcmp(name, "decltype(nullptr)") ? 1 : -1;
    case TAG_ptr_to_member: /* to a member function: {pointer, this adjustment} */
        if (ftr_dw_type(x, &m, A_TYPE, &mu) < 0) return -1;
        ty->cls = FTR_PC_SINT;
        if (m.tag == TAG_subroutine_type) {
            ty->cls = FTR_PC_STRUCT;
            ty->neb = 2;
            ty->eb[1] = EB_INT;
            ty->size = 16;
        }
        return 1;
    case TAG_enum:
        ty->cls = FTR_PC_ENUM;
        ty->enum_off = t->off;
        if (!ftr_dw_constant(u, t, A_BYTE_SIZE, &size)) { /* the underlying type's */
            if (ftr_dw_type(x, &m, A_TYPE, &mu) != 1 || m.tag != TAG_base ||
                base_type(x, mu, &m, ty) < 0)
                return -1;
            size = ty->size;
            ty->cls = FTR_PC_ENUM;
        }
        ty->size = ty->align = size;
        return size == 1 || size == 2 || size == 4 || size == 8 ? 1 : -1;
    case TAG_base:
        ty->cls = FTR_PC_NONE;
        return base_type(x, u, t, ty);
    case TAG_struct:
    case TAG_class:
    case TAG_union:
    case TAG_array:
        return 0;
    default:
        return -1;
    }
}

/* ---- aggregates: eightbyte classes, alignment ---- */

struct agg {
    uint8_t eb[2];
    uint8_t classify; /* of up to 16 bytes: classify them (else the alignment alone) */
    uint8_t mem;      /* an unaligned member */
    uint8_t bad;      /* not understood */
    int depth;
    uint64_t align;
};

static int merge(int a, int b)
{
    if (a == b || b == EB_NONE) return a;
    if (a == EB_NONE) return b;
    if (a == EB_MEM || b == EB_MEM) return EB_MEM;
    if (a == EB_INT || b == EB_INT) return EB_INT;
    if (a == EB_X87 || b == EB_X87) return EB_MEM;
    return EB_SSE;
}

/* Bytes [lo, hi) of the aggregate are of class cls */
static void mark(struct agg *g, uint64_t lo, uint64_t hi, int cls)
{
    if (!g->classify || hi <= lo) return;
    if (hi > 16) {
        g->bad = 1;
        return;
    }
    for (uint64_t i = lo / 8; i <= (hi - 1) / 8; i++)
        g->eb[i] = (uint8_t)merge(g->eb[i], cls);
}

static void add_type(struct ftr_dw *x, struct agg *g, struct ftr_dw_die m, uint64_t off,
                     uint64_t *size);

struct member_ctx {
    struct agg *g;
    uint64_t off;
    int in_union;
};

static void add_bitfield(const struct ftr_dw_unit *u, struct agg *g, const struct ftr_dw_die *m,
                         uint64_t off)
{
    uint64_t bits = 0, dbo, loc, size;
    if (!ftr_dw_constant(u, m, A_BIT_SIZE, &bits) || !bits || bits > 64) {
        g->bad = 1;
    } else if (ftr_dw_constant(u, m, A_DATA_BIT_OFFSET, &dbo)) {
        mark(g, off + dbo / 8, off + (dbo + bits + 7) / 8, EB_INT);
    } else if (ftr_dw_member_offset(u, m, &loc) >= 0 &&
               ftr_dw_constant(u, m, A_BYTE_SIZE, &size)) { /* DWARF 2-4: its storage unit */
        mark(g, off + loc, off + loc + size, EB_INT);
    } else {
        g->bad = 1;
    }
}

static int member_child(struct ftr_dw *x, const struct ftr_dw_unit *u, struct ftr_dw_die *m,
                        void *arg)
{
    struct member_ctx *c = arg;
    uint64_t off = 0, size;
    if (m->tag != TAG_member && m->tag != TAG_inheritance) return 0;
    if (m->tag == TAG_member && ftr_dw_flag(m, A_DECL)) return 0; /* a static data member */
    uint64_t a;
    if (ftr_dw_constant(u, m, A_ALIGNMENT, &a) && a > c->g->align) c->g->align = a;
    if (ftr_dw_attr(m, A_BIT_SIZE)) {
        add_bitfield(u, c->g, m, c->off);
        struct agg t = {.classify = 0, .depth = c->g->depth, .align = 1};
        add_type(x, &t, *m, 0, &size); /* its type's alignment counts */
        if (!t.bad && t.align > c->g->align) c->g->align = t.align;
        return 0;
    }
    int r = ftr_dw_member_offset(u, m, &off);
    if (r < 0 || (r == 0 && !c->in_union)) { /* a virtual base; no offset outside a union */
        c->g->bad = 1;
        return 0;
    }
    add_type(x, c->g, *m, c->off + off, &size);
    return 0;
}

/* Adds the aggregate *s at off; *size = its size */
static void add_agg(struct ftr_dw *x, struct agg *g, const struct ftr_dw_unit *u,
                    const struct ftr_dw_die *s, uint64_t off, uint64_t *size)
{
    uint64_t a;
    if (ftr_dw_flag(s, A_DECL) || !ftr_dw_constant(u, s, A_BYTE_SIZE, size)) {
        g->bad = 1;
        return;
    }
    if (ftr_dw_constant(u, s, A_ALIGNMENT, &a) && a > g->align) g->align = a;
    struct member_ctx c = {g, off, s->tag == TAG_union};
    g->depth++;
    if (ftr_dw_children(x, u, s, 0, member_child, &c)) g->bad = 1;
    g->depth--;
}

/* The elements of an array type, from its subranges (none for a flexible array) */
struct bounds {
    uint64_t n;
    int dims, bad; /* bad: a variable length */
};

static int bound_child(struct ftr_dw *x, const struct ftr_dw_unit *u, struct ftr_dw_die *d,
                       void *arg)
{
    struct bounds *b = arg;
    uint64_t k;
    (void)x;
    if (d->tag != TAG_subrange) return 0;
    b->dims++;
    if (ftr_dw_constant(u, d, A_COUNT, &k)) {
    } else if (ftr_dw_constant(u, d, A_UPPER_BOUND, &k) && k < UINT64_MAX) {
        k++;
    } else if (ftr_dw_attr(d, A_COUNT) || ftr_dw_attr(d, A_UPPER_BOUND)) {
        b->bad = 1;
        return 0;
    } else {
        k = 0;
    }
    b->n = k && b->n > UINT32_MAX / k ? UINT32_MAX : b->n * k;
    return 0;
}

static void add_array(struct ftr_dw *x, struct agg *g, const struct ftr_dw_unit *u,
                      const struct ftr_dw_die *t, uint64_t off, uint64_t *size)
{
    struct bounds b = {1, 0, 0};
    uint64_t es = 0;
    *size = 0;
    if (ftr_dw_flag(t, A_VECTOR) || ftr_dw_children(x, u, t, 0, bound_child, &b) || b.bad ||
        !b.dims) {
        g->bad = 1;
        return;
    }
    if (!b.n) return; /* a flexible or zero-length array: no bytes */
    g->depth++;
    add_type(x, g, *t, off, &es);
    if (!g->bad && es && b.n > MAX_SIZE / es) g->bad = 1;
    *size = es * b.n;
    /* the elements after the first: classified when they can be in 16 bytes (else the
     * alignment alone matters, and it is the first's) */
    for (uint64_t i = 1; g->classify && es && i < b.n && !g->bad; i++)
        add_type(x, g, *t, off + i * es, &es);
    g->depth--;
}

/* Adds the type the DIE m refers to (A_TYPE), at byte off of the aggregate */
static void add_type(struct ftr_dw *x, struct agg *g, struct ftr_dw_die m, uint64_t off,
                     uint64_t *size)
{
    const struct ftr_dw_unit *u;
    struct ftr_dw_ty t;
    *size = 0;
    if (g->depth > MAX_AGG_DEPTH || ftr_dw_type(x, &m, A_TYPE, &u) != 1) {
        g->bad = 1;
        return;
    }
    int r = scalar(x, u, &m, &t);
    if (r < 0 || (r > 0 && (t.whole || (g->classify && !t.neb)))) {
        g->bad = 1;
    } else if (r > 0) {
        *size = t.size;
        if (t.align > g->align) g->align = t.align;
        if (off % t.align) g->mem = 1; /* unaligned (packed): in memory */
        for (int i = 0; i < t.neb; i++)
            mark(g, off + 8u * i, off + (t.size < 8u * i + 8 ? t.size : 8u * i + 8), t.eb[i]);
    } else if (m.tag == TAG_array) {
        add_array(x, g, u, &m, off, size);
    } else {
        add_agg(x, g, u, &m, off, size);
    }
}

/* ---- C++: by value or by invisible reference ---- */

enum { PASS_VALUE, PASS_UNSURE, PASS_REF };

struct pass {
    int verdict, depth;
    uint64_t self;    /* the class's DIE */
    const char *name; /* its name, "" if none */
};

static int passing(struct ftr_dw *x, const struct ftr_dw_unit *u, const struct ftr_dw_die *s,
                   int depth);

/* The first parameter of a constructor, when it is not artificial: is it a reference to the
 * class (a copy or move constructor)? */
struct first {
    int seen, copy;
    const struct pass *p;
};

static int first_child(struct ftr_dw *x, const struct ftr_dw_unit *u, struct ftr_dw_die *d,
                       void *arg)
{
    struct first *f = arg;
    const struct ftr_dw_unit *tu;
    if (d->tag != TAG_param || ftr_dw_flag(d, A_ARTIFICIAL) || f->seen++) return 0;
    struct ftr_dw_die t = *d;
    (void)u;
    if (ftr_dw_type(x, &t, A_TYPE, &tu) != 1 ||
        (t.tag != TAG_reference && t.tag != TAG_rvalue_ref) || ftr_dw_type(x, &t, A_TYPE, &tu) != 1)
        return 0;
    const char *n = ftr_dw_string(x, tu, &t, A_NAME);
    f->copy = t.off == f->p->self || (n && *f->p->name && !strcmp(n, f->p->name));
    return 0;
}

/* A member function: a destructor, copy or move constructor that is user-provided makes the
 * class go by reference; a deleted one: not known */
static int special_member(struct ftr_dw *x, const struct ftr_dw_unit *u, struct ftr_dw_die *d,
                          const struct pass *p)
{
    const char *n = ftr_dw_string(x, u, d, A_NAME);
    if (!n) return PASS_VALUE;
    size_t len = strcspn(p->name, "<");
    if (n[0] != '~') {
        struct first f = {0, 0, p};
        if (!len || strncmp(n, p->name, len) || (n[len] && n[len] != '<')) return PASS_VALUE;
        if (ftr_dw_children(x, u, d, 0, first_child, &f)) return PASS_UNSURE;
        if (!f.copy) return PASS_VALUE;
    }
    if (ftr_dw_flag(d, A_DELETED)) return PASS_UNSURE;
    uint64_t dflt = 0;
    if (ftr_dw_flag(d, A_ARTIFICIAL) ||
        (ftr_dw_constant(u, d, A_DEFAULTED, &dflt) && dflt == DEFAULTED_in_class))
        return PASS_VALUE; /* as its bases and members make it */
    return PASS_REF;
}

static int pass_child(struct ftr_dw *x, const struct ftr_dw_unit *u, struct ftr_dw_die *d,
                      void *arg)
{
    struct pass *p = arg;
    int v = PASS_VALUE;
    uint64_t off;
    if (d->tag == TAG_subprogram) v = special_member(x, u, d, p);
    if (d->tag == TAG_member && ftr_dw_flag(d, A_ARTIFICIAL)) v = PASS_REF; /* _vptr */
    if (d->tag == TAG_inheritance && ftr_dw_member_offset(u, d, &off) < 0)
        v = PASS_REF; /* a virtual base */
    if (v == PASS_VALUE &&
        (d->tag == TAG_inheritance || (d->tag == TAG_member && !ftr_dw_flag(d, A_DECL)))) {
        struct ftr_dw_die t = *d;
        const struct ftr_dw_unit *tu;
        int r = ftr_dw_type(x, &t, A_TYPE, &tu);
        for (int k = 0; r == 1 && t.tag == TAG_array && k < MAX_HOPS; k++)
            r = ftr_dw_type(x, &t, A_TYPE, &tu);
        if (r != 1)
            v = PASS_UNSURE;
        else if (t.tag == TAG_struct || t.tag == TAG_class || t.tag == TAG_union)
            v = passing(x, tu, &t, p->depth + 1);
    }
    if (v > p->verdict) p->verdict = v;
    return p->verdict == PASS_REF; /* stops the walk */
}

/* How the C++ class *s (stripped) is passed */
static int passing(struct ftr_dw *x, const struct ftr_dw_unit *u, const struct ftr_dw_die *s,
                   int depth)
{
    uint64_t cc;
    if (ftr_dw_constant(u, s, A_CC, &cc) && (cc == CC_by_reference || cc == CC_by_value))
        return cc == CC_by_value ? PASS_VALUE : PASS_REF;
    if (!is_cxx(u)) return PASS_VALUE;
    if (depth > MAX_AGG_DEPTH || ftr_dw_flag(s, A_DECL)) return PASS_UNSURE;
    const char *n = ftr_dw_string(x, u, s, A_NAME);
    struct pass p = {PASS_VALUE, depth, s->off, n ? n : ""};
    if (ftr_dw_children(x, u, s, 0, pass_child, &p) && p.verdict != PASS_REF) return PASS_UNSURE;
    return p.verdict;
}

/* ---- a type as a whole ---- */

void ftr_dw_describe(struct ftr_dw *x, struct ftr_dw_die d, struct ftr_dw_ty *t)
{
    const struct ftr_dw_unit *u;
    int r = ftr_dw_type(x, &d, A_TYPE, &u);
    *t = (struct ftr_dw_ty){r == 0 ? K_VOID : K_BAD};
    if (r != 1) return;
    r = scalar(x, u, &d, t);
    if (r != 0) {
        if (r < 0) t->kind = K_BAD;
        return;
    }
    *t = (struct ftr_dw_ty){K_BAD, FTR_PC_STRUCT};
    if (d.tag == TAG_array || !ftr_dw_constant(u, &d, A_BYTE_SIZE, &t->size) || !t->size ||
        ftr_dw_flag(&d, A_DECL))
        return;
    int pass = passing(x, u, &d, 0);
    if (pass != PASS_VALUE) {
        t->kind = pass == PASS_REF ? K_REF : K_BAD;
        return;
    }
    struct agg g = {.classify = t->size <= 16, .align = 1};
    uint64_t size;
    add_agg(x, &g, u, &d, 0, &size);
    t->align = g.bad || (g.mem && g.align > 8) ? 0 : g.align; /* packed: of 1, or above 8 */
    if (t->size > 16 || g.mem || g.eb[0] == EB_MEM || g.eb[1] == EB_MEM) {
        t->kind = g.bad && t->size <= 16 ? K_BAD : K_MEM;
        return;
    }
    if (g.bad || g.eb[0] == EB_NONE) return;
    t->neb = t->size > 8 && g.eb[1] != EB_NONE ? 2 : 1;
    t->eb[0] = g.eb[0];
    t->eb[1] = g.eb[1];
    t->kind = K_REG;
    if (g.eb[0] == EB_X87 || g.eb[1] == EB_X87)
        t->kind = g.eb[0] == EB_X87 && g.eb[1] == EB_X87 ? K_X87 : K_MEM;
}
