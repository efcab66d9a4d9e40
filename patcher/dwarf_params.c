/*
 * dwarf_params.c - per function of a module, what its parameters and return value are and
 * where they are at its first instruction (for --auto-args), from its DWARF (.debug_info),
 * read with libelf alone (dwarf_read.c). See ftr_dwarf_params() in ftr_patcher.h.
 *
 * The DWARF gives the types; the places are computed from them as a System V caller puts
 * them (a parameter's DW_AT_location says where the callee keeps it, often not where it
 * arrives). Each type is first described on its own (dwarf_abi.c: a scalar, an aggregate
 * classified eightbyte by eightbyte, in memory, by invisible reference, or not understood),
 * then the parameters are given registers and stack slots in order. Whatever is not
 * understood makes its parameter, and every later one, FTR_PL_NONE. The locations are only
 * read as evidence where LLVM may have changed a signature (see describe_func()).
 *
 * Every compile unit of C or C++ is walked DIE by DIE; each concrete subprogram's parameter
 * list is read from its children, types and origins by offset (dwarf_read.c: bounds-checked,
 * within a budget of DIEs per function). Enumerations are read once each, at the end, for
 * the functions kept.
 *
 * Runs in the preload constructor and on dlopen: plain C, malloc/free only, no global state.
 */
#include "ftr_patcher.h"
#include "dwarf_abi.h"
#include "dwarf_loc.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_ORIGINS 8        /* abstract origins and specifications followed */
#define MAX_HOPS 16          /* abstract origins of a parameter followed */
#define BUDGET 200000        /* DIEs read to describe one function or enumeration */
#define MAX_ENUMERATORS 4096 /* kept of one enumeration */
#define MAX_NAME 255         /* bytes kept of an enumeration's or enumerator's name */
#define MAX_SIZE (1u << 20)  /* an argument in memory larger than this: not understood */

enum {
    FORM_data2 = 0x05,
    FORM_data4 = 0x06,
    FORM_data8 = 0x07,
    FORM_data1 = 0x0b,
};

/* ---- places ---- */

struct alloc {
    int ni, ns;
    uint64_t sp;        /* bytes of stack arguments so far */
    uint8_t lost;       /* the places of what follows are not known */
    uint8_t stack_lost; /* those on the stack are not */
};

static uint8_t clamp(uint64_t size)
{
    return size > 255 ? 0 : (uint8_t)size;
}

static void parts_in_regs(const struct ftr_dw_ty *t, struct ftr_dw_param *p, int *ni, int *ns)
{
    for (int i = 0; i < t->neb; i++) {
        struct ftr_dw_part *q = &p->parts[i];
        q->loc = t->eb[i] == EB_SSE ? FTR_PL_SSE : FTR_PL_INT;
        q->n = (uint8_t)(t->eb[i] == EB_SSE ? (*ns)++ : (*ni)++);
        q->size = t->whole ? 16 : clamp(t->size - 8u * i < 8 ? t->size - 8u * i : 8);
    }
    p->loc = p->parts[0].loc;
    p->n = p->parts[0].n;
    p->nparts = t->neb == 2 || t->cls == FTR_PC_STRUCT ? t->neb : 0;
}

static void place(struct alloc *a, struct ftr_dw_ty t, struct ftr_dw_param *p)
{
    if (t.kind == K_REF) /* the address of a copy */
        t = (struct ftr_dw_ty){K_REG, FTR_PC_PTR, 1, {EB_INT, EB_NONE}, 0, 8, 8, 0};
    p->cls = t.cls;
    p->size = clamp(t.size);
    p->loc = FTR_PL_NONE;
    p->n = p->nparts = 0;
    if (t.kind == K_BAD || t.kind == K_VOID) a->lost = 1;
    if (a->lost) return;
    int ni = 0, ns = 0;
    for (int i = 0; t.kind == K_REG && i < t.neb; i++) {
        ns += t.eb[i] == EB_SSE;
        ni += t.eb[i] != EB_SSE;
    }
    if (t.kind == K_REG && a->ni + ni <= 6 && a->ns + ns <= 8) {
        parts_in_regs(&t, p, &a->ni, &a->ns);
        return;
    }
    uint64_t align = t.align < 8 ? 8 : t.align;
    if (!t.align || align > 16 || t.size > MAX_SIZE) a->stack_lost = 1;
    if (a->stack_lost) return;
    a->sp = (a->sp + align - 1) & ~(align - 1);
    uint64_t off = 8 + a->sp;
    a->sp += (t.size + 7) & ~(uint64_t)7;
    if (off + (t.neb == 2 ? 8 : 0) > 255) return;
    p->loc = FTR_PL_STACK;
    p->n = (uint8_t)off;
    if (t.kind == K_REG && (t.neb == 2 || t.cls == FTR_PC_STRUCT)) {
        p->nparts = t.neb;
        for (int i = 0; i < t.neb; i++)
            p->parts[i] = (struct ftr_dw_part){FTR_PL_STACK, (uint8_t)(off + 8u * i),
                                               clamp(t.size - 8u * i < 8 ? t.size - 8u * i : 8)};
    }
}

/* The return value: @return 1 when it takes a hidden pointer in rdi, 0 when not, -1 when
 * not known */
static int place_ret(struct ftr_dw_ty t, struct ftr_dw_param *r)
{
    memset(r, 0, sizeof *r);
    r->cls = t.kind == K_REF ? FTR_PC_STRUCT : t.cls;
    r->size = clamp(t.size);
    switch (t.kind) {
    case K_REG: {
        int ni = 0, ns = 0;
        parts_in_regs(&t, r, &ni, &ns);
        return 0;
    }
    case K_MEM:
    case K_REF:
        return 1;
    case K_X87:
    case K_VOID:
        return 0;
    default:
        return -1;
    }
}

/* ---- functions ---- */

/* A parameter list as read: each parameter described, not placed */
struct plist {
    int n, user, variadic, bad; /* user: parameters not artificial */
    int noloc;                  /* the first without a location (+1), or 0 */
    uint64_t pc;                /* the entry, when the locations are read (else 0) */
    struct {
        struct ftr_dw_ty t;
        char name[24];
        uint8_t artificial;
        uint8_t reg; /* the DWARF register (+1) its location names at the entry, or 0 */
    } p[FTR_DW_MAX_PARAMS];
};

struct entry {
    uint64_t pc;
    int found;
    struct ftr_dw_loc at;
};

static int entry_loc(const struct ftr_dw_locent *e, void *arg)
{
    struct entry *w = arg;
    if (!w->found && !e->dflt && e->lo <= w->pc && w->pc < e->hi) {
        w->found = 1;
        w->at = e->l;
    }
    return 0;
}

/* The DWARF register (+1) d's location names at pc (the first piece's), or 0 */
static uint8_t reg_at(const struct ftr_dw *x, const struct ftr_dw_unit *u,
                      const struct ftr_dw_die *d, uint64_t pc)
{
    const struct ftr_dw_val *v = ftr_dw_attr(d, A_LOCATION);
    struct entry w = {pc, 0, {0}};
    if (!v || ftr_dw_locations(x, u, v, entry_loc, &w) || !w.found || w.at.kind != LOC_REG ||
        w.at.reg > 32)
        return 0;
    return (uint8_t)(w.at.reg + 1);
}

/* 1 when p is where the DWARF register reg (+1) is */
static int in_reg(const struct ftr_dw_param *p, uint8_t reg)
{
    static const uint8_t sysv[6] = {5, 4, 1, 2, 8, 9}; /* rdi rsi rdx rcx r8 r9 */
    if (p->loc == FTR_PL_INT) return p->n < 6 && sysv[p->n] + 1 == reg;
    return p->loc == FTR_PL_SSE && 17 + p->n + 1 == reg; /* xmm0: 17 */
}

static int param_child(struct ftr_dw *x, const struct ftr_dw_unit *u, struct ftr_dw_die *d,
                       void *arg)
{
    struct plist *l = arg;
    if (d->tag == TAG_unspec_params) l->variadic = 1;
    if (d->tag != TAG_param) return 0;
    int k = l->n++, bad = 0;
    if (!ftr_dw_attr(d, A_LOCATION) && !ftr_dw_attr(d, A_CONST_VALUE) && !l->noloc)
        l->noloc = k + 1;
    /* name, type and artificial, maybe through the parameter's abstract origin(s) */
    struct ftr_dw_die t = *d;
    const struct ftr_dw_unit *tu = u;
    const char *name = ftr_dw_string(x, u, d, A_NAME);
    int artificial = ftr_dw_flag(d, A_ARTIFICIAL);
    for (int hop = 0; !ftr_dw_attr(&t, A_TYPE); hop++) {
        struct ftr_dw_die o;
        const struct ftr_dw_unit *ou;
        if (hop == MAX_HOPS || !(ou = ftr_dw_deref(x, ftr_dw_attr(&t, A_ORIGIN), &o)) ||
            o.tag != TAG_param) {
            bad = 1;
            break;
        }
        t = o;
        tu = ou;
        if (!name) name = ftr_dw_string(x, tu, &t, A_NAME);
        artificial |= ftr_dw_flag(&t, A_ARTIFICIAL);
    }
    l->bad |= bad;
    l->user += !artificial;
    if (k >= FTR_DW_MAX_PARAMS) return 0;
    snprintf(l->p[k].name, sizeof l->p[k].name, "%s", name ? name : "");
    l->p[k].artificial = (uint8_t)artificial;
    l->p[k].reg = l->pc ? reg_at(x, u, d, l->pc) : 0;
    if (bad)
        l->p[k].t = (struct ftr_dw_ty){K_BAD};
    else
        ftr_dw_describe(x, t, &l->p[k].t);
    return 0;
}

/* What a function and its origins say beyond its own parameter list */
struct about {
    const char *name;
    struct ftr_dw_die ret; /* the DIE whose A_TYPE is the return type */
    int proto, ext, bad, have_ret;
    struct plist ol; /* the longest list of its origins */
};

struct rec {
    struct ftr_dw_func f;
    size_t name;  /* in the string pool */
    size_t first; /* its parameters in the pool of parameters */
    size_t seq;
};

struct scan {
    struct ftr_dw dw;
    struct rec *recs;
    size_t nrecs, caprecs;
    struct ftr_dw_param *ps; /* every record's parameters */
    size_t nps, capps;
    char *pool; /* strings */
    size_t npool, cappool;
    uint64_t *eoffs; /* the DIEs of the enumerations parameters refer to, by enum_id */
    size_t neoffs, capeoffs;
    int64_t *vals; /* every enumeration's enumerators: values, names in the pool */
    size_t *vnames;
    size_t nvals, capvals, capvnames;
    struct about *a; /* of the function being described */
    struct plist *own;
};

/* @return the offset of a copy of s (its first max bytes) in the pool */
static size_t add_string(struct scan *sc, const char *s, size_t max)
{
    size_t n = s ? strnlen(s, max) : 0, at = sc->npool;
    if (ftr_dw_grow((void **)&sc->pool, &sc->cappool, sc->npool + n + 1, 1, &sc->dw.oom)) return 0;
    memcpy(sc->pool + at, s ? s : "", n);
    sc->pool[at + n] = 0;
    sc->npool += n + 1;
    return at;
}

/* The enumeration of p (if any) gets a provisional enum_id: its index in sc->eoffs */
static void note_enum(struct scan *sc, struct ftr_dw_param *p, const struct ftr_dw_ty *t)
{
    if (p->cls != FTR_PC_ENUM) return;
    if (ftr_dw_grow((void **)&sc->eoffs, &sc->capeoffs, sc->neoffs + 1, sizeof *sc->eoffs,
                    &sc->dw.oom))
        return;
    p->enum_id = (uint32_t)sc->neoffs;
    sc->eoffs[sc->neoffs++] = t->enum_off;
}

static int bad_cc(const struct ftr_dw_die *s)
{
    const struct ftr_dw_val *cc = ftr_dw_attr(s, A_CC);
    return cc && (cc->kind != V_CONST || cc->u != CC_normal);
}

/* Reads the abstract origins and specifications of s */
static void origins(struct ftr_dw *x, const struct ftr_dw_die *s, struct about *a)
{
    struct ftr_dw_val todo[MAX_ORIGINS];
    int ntodo = 0;
    const struct ftr_dw_val *o1 = ftr_dw_attr(s, A_ORIGIN), *o2 = ftr_dw_attr(s, A_SPEC);
    if (o1) todo[ntodo++] = *o1;
    if (o2) todo[ntodo++] = *o2;
    for (int i = 0; i < ntodo && !a->bad; i++) {
        struct ftr_dw_die o;
        const struct ftr_dw_unit *ou = ftr_dw_deref(x, &todo[i], &o);
        if (!ou || o.tag != TAG_subprogram || ftr_dw_flag(&o, A_ARTIFICIAL) || ou->thin ||
            !ftr_dw_c_unit(ou) || bad_cc(&o)) {
            a->bad = 1; /* in a unit not of C or C++: its conventions are unknown */
            break;
        }
        if (!a->name) a->name = ftr_dw_string(x, ou, &o, A_LINKAGE_NAME);
        if (!a->name) a->name = ftr_dw_string(x, ou, &o, A_NAME);
        a->proto |= ftr_dw_flag(&o, A_PROTOTYPED);
        a->ext |= ftr_dw_flag(&o, A_EXTERNAL);
        if (!a->have_ret && ftr_dw_attr(&o, A_TYPE)) {
            a->ret = o;
            a->have_ret = 1;
        }
        struct plist l = {0};
        if (ftr_dw_children(x, ou, &o, 1, param_child, &l)) l.bad = 1;
        a->bad |= l.bad;
        if (l.n > a->ol.n || (l.variadic && l.n == a->ol.n)) a->ol = l;
        const struct ftr_dw_val *more[2] = {ftr_dw_attr(&o, A_ORIGIN), ftr_dw_attr(&o, A_SPEC)};
        for (int k = 0; k < 2; k++) {
            if (more[k] && ntodo == MAX_ORIGINS) a->bad = 1;
            if (more[k] && ntodo < MAX_ORIGINS) todo[ntodo++] = *more[k];
        }
    }
}

/* Describes the concrete subprogram s and records it */
static void describe_func(struct scan *sc, const struct ftr_dw_unit *u, const struct ftr_dw_die *s)
{
    struct ftr_dw *x = &sc->dw;
    uint64_t pc;
    if (!ftr_dw_low_pc(x, u, s, &pc) || ftr_dw_flag(s, A_DECL) || ftr_dw_flag(s, A_ARTIFICIAL) ||
        bad_cc(s))
        return;
    x->budget = BUDGET;
    struct about *a = sc->a;
    struct plist *own = sc->own;
    memset(a, 0, sizeof *a);
    memset(own, 0, sizeof *own);
    a->name = ftr_dw_string(x, u, s, A_LINKAGE_NAME);
    if (!a->name) a->name = ftr_dw_string(x, u, s, A_NAME);
    a->proto = ftr_dw_flag(s, A_PROTOTYPED);
    a->ext = ftr_dw_flag(s, A_EXTERNAL);
    a->ret = *s;
    a->have_ret = ftr_dw_attr(s, A_TYPE) != NULL;
    origins(x, s, a);
    own->pc = u->gnu ? 0 : pc; /* locations: see below */
    if (ftr_dw_children(x, u, s, 1, param_child, own)) own->bad = 1;
    if (a->bad || x->budget < 0) return;
    /* its own list, or its origins' when it has none; when both say, they agree (gcc's
     * constructors and destructors leave out artificial parameters of their declaration) */
    struct plist *l = own->n || !a->ol.n ? own : &a->ol;
    int lost = l->bad || (own->n && a->ol.n && a->ol.user != own->user);
    /* From LLVM, an internal function may have lost parameters (dead argument elimination) or
     * had one promoted (a pointer replaced by what it points to: -O3, LTO), which leaves that
     * parameter without a location: from there on, only the parameters whose locations at the
     * entry are the registers computed are known, and only when none is elsewhere. */
    int from = !u->gnu && own->noloc ? own->noloc - 1 : FTR_DW_MAX_PARAMS;
    if (!u->gnu && !a->ext) lost = 1;
    struct rec r = {.f = {.addr = pc}, .seq = sc->nrecs};
    struct ftr_dw_ty rt;
    ftr_dw_describe(x, a->ret, &rt);
    if (!a->have_ret) rt = (struct ftr_dw_ty){K_VOID};
    int hidden = place_ret(rt, &r.f.ret);
    note_enum(sc, &r.f.ret, &rt);
    struct alloc al = {.ni = hidden > 0, .lost = (uint8_t)(lost || hidden < 0)};
    int n = l->n < FTR_DW_MAX_PARAMS ? l->n : FTR_DW_MAX_PARAMS;
    int promote = !a->proto && ftr_dw_c_family(u->lang) == 1;
    r.first = sc->nps;
    if (ftr_dw_grow((void **)&sc->ps, &sc->capps, sc->nps + (size_t)n, sizeof *sc->ps, &x->oom))
        return;
    struct ftr_dw_param *ps = sc->ps + sc->nps;
    for (int k = 0; k < n; k++) {
        struct ftr_dw_param *p = &sc->ps[sc->nps++];
        struct ftr_dw_ty t = l->p[k].t;
        memset(p, 0, sizeof *p);
        if (promote && t.cls == FTR_PC_FLOAT && t.size == 4) t.size = t.align = 8;
        memcpy(p->name, l->p[k].name, sizeof p->name);
        place(&al, t, p);
        note_enum(sc, p, &t);
    }
    int agree = 1;
    for (int k = from; k < n; k++)
        agree &= !l->p[k].reg || in_reg(&ps[k], l->p[k].reg);
    for (int k = from; k < n; k++)
        if (!agree || !l->p[k].reg) ps[k].loc = ps[k].n = ps[k].nparts = 0;
    r.f.nparams = (uint8_t)n;
    r.f.variadic = (uint8_t)(own->variadic || a->ol.variadic);
    r.f.has_this = n && l->p[0].artificial && ftr_dw_c_family(u->lang) == 2;
    r.name = add_string(sc, a->name, SIZE_MAX);
    if (!ftr_dw_grow((void **)&sc->recs, &sc->caprecs, sc->nrecs + 1, sizeof *sc->recs, &x->oom))
        sc->recs[sc->nrecs++] = r;
}

/* One DIE of a compile unit: a concrete subprogram is described */
static int scan_die(struct ftr_dw *x, const struct ftr_dw_unit *u, struct ftr_dw_die *d, int depth,
                    void *arg)
{
    (void)x;
    (void)depth;
    if (d->tag == TAG_subprogram && ftr_dw_attr(d, A_LOW_PC)) describe_func(arg, u, d);
    return ftr_dw_no_subprogram(d->tag);
}

/* ---- enumerations ---- */

struct enum_rec {
    size_t name, first;
    uint32_t n;
    uint8_t size, sign;
};

struct enum_ctx {
    struct scan *sc;
    struct enum_rec *e;
    int neg; /* an sdata value below 0 */
};

static int enumerator_child(struct ftr_dw *x, const struct ftr_dw_unit *u, struct ftr_dw_die *d,
                            void *arg)
{
    struct enum_ctx *c = arg;
    struct scan *sc = c->sc;
    const struct ftr_dw_val *v = ftr_dw_attr(d, A_CONST_VALUE);
    if (d->tag != TAG_enumerator || !v || v->kind != V_CONST || c->e->n >= MAX_ENUMERATORS)
        return 0;
    /* data1..data8 are zero-extended: GCC writes a negative value as sdata, and as dataN of the
     * enumeration's own size only a value of its signed type */
    unsigned w = v->form == FORM_data1   ? 1
                 : v->form == FORM_data2 ? 2
                 : v->form == FORM_data4 ? 4
                                         : 0;
    uint64_t val = v->u;
    if (w && c->e->sign && w >= c->e->size && (val >> (8 * w - 1)) & 1)
        val |= ~(uint64_t)0 << (8 * w);
    c->neg |= v->form != FORM_data8 && !w && (int64_t)val < 0;
    size_t at = sc->nvals;
    if (ftr_dw_grow((void **)&sc->vals, &sc->capvals, at + 1, sizeof *sc->vals, &x->oom) ||
        ftr_dw_grow((void **)&sc->vnames, &sc->capvnames, at + 1, sizeof *sc->vnames, &x->oom))
        return -1;
    sc->vals[at] = (int64_t)val;
    sc->vnames[at] = add_string(sc, ftr_dw_string(x, u, d, A_NAME), MAX_NAME);
    sc->nvals++;
    c->e->n++;
    return 0;
}

/* Reads the enumeration at .debug_info offset off (nothing when it cannot be read) */
static void read_enum(struct scan *sc, uint64_t off, struct enum_rec *e)
{
    struct ftr_dw *x = &sc->dw;
    struct ftr_dw_val ref = {.kind = V_REF, .u = off};
    struct ftr_dw_die d, t;
    const struct ftr_dw_unit *u, *tu;
    uint64_t enc = 0, size = 0;
    *e = (struct enum_rec){0, sc->nvals, 0, 0, 0};
    x->budget = BUDGET;
    if (!(u = ftr_dw_deref(x, &ref, &d)) || d.tag != TAG_enum) return;
    e->name = add_string(sc, ftr_dw_string(x, u, &d, A_NAME), MAX_NAME);
    t = d;
    int known = ftr_dw_constant(u, &d, A_ENCODING, &enc);
    if (!known && ftr_dw_type(x, &t, A_TYPE, &tu) == 1 && t.tag == TAG_base)
        known = ftr_dw_constant(tu, &t, A_ENCODING, &enc);
    if (!ftr_dw_constant(u, &d, A_BYTE_SIZE, &size) && t.tag == TAG_base)
        ftr_dw_constant(tu, &t, A_BYTE_SIZE, &size);
    e->size = clamp(size);
    e->sign = enc == ATE_signed || enc == ATE_signed_char;
    struct enum_ctx c = {sc, e, 0};
    ftr_dw_children(x, u, &d, 0, enumerator_child, &c); /* those read are kept */
    if (!known) e->sign = (uint8_t)c.neg;
}

/* ---- the result ---- */

static int cmp_rec(const void *a, const void *b)
{
    const struct rec *x = a, *y = b;
    if (x->f.addr != y->f.addr) return x->f.addr < y->f.addr ? -1 : 1;
    return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

static int same_param(const struct ftr_dw_param *p, const struct ftr_dw_param *q)
{
    if (p->cls != q->cls || p->size != q->size || p->loc != q->loc || p->n != q->n ||
        p->nparts != q->nparts)
        return 0;
    for (int i = 0; i < p->nparts; i++)
        if (memcmp(&p->parts[i], &q->parts[i], sizeof p->parts[i])) return 0;
    return 1;
}

/* Two descriptions of one address say the same of where everything is */
static int same(const struct scan *sc, const struct rec *a, const struct rec *b)
{
    if (a->f.nparams != b->f.nparams || a->f.variadic != b->f.variadic ||
        a->f.has_this != b->f.has_this || !same_param(&a->f.ret, &b->f.ret))
        return 0;
    for (size_t k = 0; k < a->f.nparams; k++)
        if (!same_param(&sc->ps[a->first + k], &sc->ps[b->first + k])) return 0;
    return 1;
}

/* Gives the enumerations of the functions kept their final ids */
static int enums_of(struct scan *sc, struct ftr_dw_params *out)
{
    size_t nu = 0, nparams = 0;
    for (size_t i = 0; i < out->nfuncs; i++)
        nparams += out->funcs[i].nparams + 1u;
    uint64_t *uo = malloc((nparams ? nparams : 1) * sizeof *uo);
    if (!uo) return -1;
    for (size_t i = 0; i < out->nfuncs; i++) {
        struct ftr_dw_func *f = &out->funcs[i];
        if (f->ret.cls == FTR_PC_ENUM) uo[nu++] = sc->eoffs[f->ret.enum_id];
        for (size_t k = 0; k < f->nparams; k++)
            if (f->params[k].cls == FTR_PC_ENUM) uo[nu++] = sc->eoffs[f->params[k].enum_id];
    }
    if (nu) qsort(uo, nu, sizeof *uo, cmp_u64);
    size_t m = 0;
    for (size_t i = 0; i < nu; i++)
        if (!m || uo[i] != uo[m - 1]) uo[m++] = uo[i];
    struct enum_rec *er = malloc((m ? m : 1) * sizeof *er);
    out->enums = calloc(m ? m : 1, sizeof *out->enums);
    if (!er || !out->enums) {
        free(uo);
        free(er);
        return -1;
    }
    for (size_t i = 0; i < m && !sc->dw.oom; i++)
        read_enum(sc, uo[i], &er[i]);
    for (size_t i = 0; i < out->nfuncs; i++) {
        struct ftr_dw_func *f = &out->funcs[i];
        struct ftr_dw_param *ps = (struct ftr_dw_param *)f->params;
        for (size_t k = 0; k <= f->nparams; k++) {
            struct ftr_dw_param *p = k < f->nparams ? &ps[k] : &f->ret;
            if (p->cls != FTR_PC_ENUM) continue;
            uint64_t *at = bsearch(&sc->eoffs[p->enum_id], uo, m, sizeof *uo, cmp_u64);
            p->enum_id = (uint32_t)(at - uo);
        }
    }
    out->nenums = m;
    for (size_t i = 0; i < m; i++) /* pointers into the pool: below, once it is final */
        out->enums[i] =
            (struct ftr_dw_enum){(const char *)er[i].name,     er[i].size, er[i].sign, er[i].n,
                                 (const int64_t *)er[i].first, NULL};
    free(uo);
    free(er);
    return sc->dw.oom ? -1 : 0;
}

/* The records: sorted, one per address (when they agree), in code, named acceptably */
static int finish(struct scan *sc, const struct ftr_dw_file *file, struct ftr_dw_params *out)
{
    if (sc->nrecs) qsort(sc->recs, sc->nrecs, sizeof *sc->recs, cmp_rec);
    size_t n = 0, np = 0;
    for (size_t i = 0, j; i < sc->nrecs; i = j) {
        int ok = ftr_dw_file_keeps(file, sc->recs[i].f.addr);
        for (j = i + 1; j < sc->nrecs && sc->recs[j].f.addr == sc->recs[i].f.addr; j++)
            ok &= same(sc, &sc->recs[i], &sc->recs[j]);
        if (!ok) continue;
        sc->recs[n++] = sc->recs[i];
        np += sc->recs[i].f.nparams;
    }
    out->funcs = malloc((n ? n : 1) * sizeof *out->funcs);
    out->params_ = malloc((np ? np : 1) * sizeof *out->params_);
    if (!out->funcs || !out->params_) return -1;
    out->nfuncs = n;
    for (size_t i = 0, at = 0; i < n; i++) {
        struct rec *r = &sc->recs[i];
        if (r->f.nparams)
            memcpy(out->params_ + at, sc->ps + r->first, r->f.nparams * sizeof *out->params_);
        out->funcs[i] = r->f;
        out->funcs[i].params = out->params_ + at;
        at += r->f.nparams;
    }
    if (enums_of(sc, out)) return -1;
    out->names_ = malloc((sc->nvals ? sc->nvals : 1) * sizeof *out->names_);
    if (!out->names_) return -1;
    /* the pool is final: strings from offsets */
    out->strings_ = sc->pool;
    out->values_ = sc->vals;
    sc->pool = NULL;
    sc->vals = NULL;
    for (size_t i = 0; i < n; i++)
        out->funcs[i].name = out->strings_ + sc->recs[i].name;
    for (size_t i = 0; i < sc->nvals; i++)
        out->names_[i] = out->strings_ + sc->vnames[i];
    for (size_t i = 0; i < out->nenums; i++) {
        struct ftr_dw_enum *e = &out->enums[i];
        size_t first = (size_t)e->values;
        e->name = out->strings_ + (size_t)e->name;
        e->values = out->values_ ? out->values_ + first : NULL;
        e->names = out->names_ + first;
    }
    return 0;
}

int ftr_dwarf_params(struct Elf *elf, struct ftr_dw_params *out, char *err, size_t errlen)
{
    struct scan sc = {0};
    struct ftr_dw_file f;
    memset(out, 0, sizeof *out);
    int r = ftr_dw_file_open(&f, elf, ftr_dwarf_name_ok), oom = r < 0;
    add_string(&sc, "", 0); /* offset 0: "" */
    sc.a = malloc(sizeof *sc.a);
    sc.own = malloc(sizeof *sc.own);
    oom |= !sc.a || !sc.own;
    if (r > 0 && !oom && !sc.dw.oom) {
        oom = ftr_dw_open(&sc.dw, elf) != 0;
        for (size_t i = 0; i < sc.dw.nunits && !sc.dw.oom; i++)
            if (ftr_dw_c_unit(&sc.dw.units[i]) && !sc.dw.units[i].thin)
                ftr_dw_walk(&sc.dw, &sc.dw.units[i], scan_die, &sc);
        if (!oom && !sc.dw.oom) oom = finish(&sc, &f, out) != 0;
    }
    oom |= sc.dw.oom;
    ftr_dw_close(&sc.dw);
    ftr_dw_file_close(&f);
    free(sc.recs);
    free(sc.ps);
    free(sc.pool);
    free(sc.eoffs);
    free(sc.vals);
    free(sc.vnames);
    free(sc.a);
    free(sc.own);
    if (!oom) return 0;
    ftr_dwarf_params_free(out);
    if (err && errlen) snprintf(err, errlen, "DWARF parameters: out of memory");
    return -1;
}

void ftr_dwarf_params_free(struct ftr_dw_params *p)
{
    if (!p) return;
    free(p->funcs);
    free(p->enums);
    free(p->params_);
    free(p->strings_);
    free(p->values_);
    free(p->names_);
    memset(p, 0, sizeof *p);
}

const struct ftr_dw_func *ftr_dwarf_params_find(const struct ftr_dw_params *p, uint64_t addr)
{
    size_t lo = 0, hi = p ? p->nfuncs : 0;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (p->funcs[mid].addr == addr) return &p->funcs[mid];
        if (p->funcs[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return NULL;
}
