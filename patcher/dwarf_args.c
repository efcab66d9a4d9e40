/*
 * dwarf_args.c - the functions of a module that take all their arguments in registers, read from
 * its DWARF (.debug_info) with libelf alone.
 *
 * A "call-through" exit calls a function's body from the trampoline: the function then sees a
 * stack 16 bytes lower than its caller built, which is only right when it reads nothing from its
 * caller's stack, i.e. takes no argument on the stack (x86-64 System V). The debug information
 * says what the parameters were in the source; the rules below turn that into a conservative
 * verdict (a function wrongly listed breaks the program, one wrongly left out only costs speed).
 *
 * The calling convention is not always said: gcc marks nothing of __attribute__((ms_abi)) (its
 * callee owns 32 bytes above its return address, and finds its fifth argument above those). So
 * where the parameters are at the entry (dwarf_loc.c) must be where System V puts them, and
 * none may live on the caller's side of the CFA (see param_where()).
 *
 * Every compile unit of C or C++ is walked DIE by DIE (dwarf_read.c), and each concrete
 * subprogram's parameters are classified when its children end; types, abstract origins and
 * specifications are read where they are, by offset (in this unit or another), so nothing but
 * the abbreviation tables is kept in memory. Whatever is not understood leaves the function (or
 * the unit) out.
 *
 * Runs in the preload constructor and on dlopen: plain C, malloc/free only, no global state.
 */
#include "ftr_patcher.h"
#include "dwarf_read.h"
#include "dwarf_loc.h"

#include <gelf.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_HOPS 16     /* abstract origins of a parameter followed */
#define MAX_ORIGINS 8   /* abstract origins and specifications followed */
#define MAX_AGG_DEPTH 8 /* nesting of aggregates looked into */
#define BUDGET 200000   /* DIEs read to decide one function */

/* Parameter counts of one list of formal parameters; for a concrete subprogram's own (at set),
 * what their locations at its entry pc say */
struct cnt {
    int ni, ns, n;
    uint8_t bad, variadic, noloc;
    uint8_t at, fb;  /* pc is the entry; the frame base (FB_*) */
    uint8_t lost;    /* the registers of the parameters from here on are not known */
    uint8_t wrong;   /* a location System V does not give, or one that cannot be read */
    uint8_t ireg[6]; /* the DWARF register + 1 of the parameter in the k-th integer register */
    uint64_t pc;
};
enum { FB_OTHER, FB_CFA, FB_RBP, FB_RSP, FB_NONE, FB_LIST };
enum { DW_RBP = 6, DW_RSP = 7, DW_XMM0 = 17 };

/* A DIE with children being walked; a concrete subprogram's is decided when they end */
struct frame {
    uint8_t sub, pack;
    struct ftr_dw_die d;
    struct cnt c;
};

struct rec {
    uint64_t addr;
    int ok;
};

struct scan {
    struct ftr_dw dw;
    struct rec *recs;
    size_t nrecs, caprecs;
    struct frame *fr; /* FTR_DW_MAX_DEPTH, by depth */
};

/* ---- classification ---- */

static int int_encoding(uint64_t e)
{
    return e == ATE_address || e == ATE_boolean || e == ATE_signed || e == ATE_signed_char ||
           e == ATE_unsigned || e == ATE_unsigned_char || e == ATE_UTF || e == ATE_UCS ||
           e == ATE_ASCII;
}

/* Registers taken by a base type: @return 0 (counts added to c) or -1 (not a register type) */
static int base_regs(const struct ftr_dw_unit *u, const struct ftr_dw_die *t, struct cnt *c)
{
    uint64_t enc, size;
    if (!ftr_dw_constant(u, t, A_ENCODING, &enc) || !ftr_dw_constant(u, t, A_BYTE_SIZE, &size) ||
        !size)
        return -1;
    if (int_encoding(enc) && size <= 16) {
        c->ni += size <= 8 ? 1 : 2;
        return 0;
    }
    if ((enc == ATE_float && size <= 8) || (enc == ATE_complex && size <= 16)) {
        c->ns += size <= 8 ? 1 : 2; /* long double, _Float128: not taken */
        return 0;
    }
    return -1;
}

static int agg_align(struct ftr_dw *x, const struct ftr_dw_unit *u, const struct ftr_dw_die *s,
                     int depth);

/* Natural alignment of a member's type, the type in *d through A_TYPE: @return 1, 2, 4, 8 or
 * 16, or 0 when it is not a plain scalar or aggregate (x87 long double, vectors, unknown). */
static unsigned type_align(struct ftr_dw *x, struct ftr_dw_die *d, int depth)
{
    const struct ftr_dw_unit *u;
    uint64_t size = 0, enc = 0;
    if (depth > MAX_AGG_DEPTH || ftr_dw_type(x, d, A_TYPE, &u) != 1) return 0;
    switch (d->tag) {
    case TAG_pointer:
    case TAG_reference:
    case TAG_rvalue_ref:
    case TAG_ptr_to_member:
        return 8;
    case TAG_enum:
        if (!ftr_dw_constant(u, d, A_BYTE_SIZE, &size)) return 0;
        return size == 1 || size == 2 || size == 4 || size == 8 ? (unsigned)size : 0;
    case TAG_base:
        if (!ftr_dw_constant(u, d, A_ENCODING, &enc) || !ftr_dw_constant(u, d, A_BYTE_SIZE, &size))
            return 0;
        if (enc == ATE_complex) size /= 2;
        if (enc == ATE_float || enc == ATE_complex) {
            if (size != 2 && size != 4 && size != 8) return 0;
        } else if (!int_encoding(enc) || (size & (size - 1)) || size > 16 || !size) {
            return 0;
        }
        return (unsigned)size;
    case TAG_struct:
    case TAG_class:
    case TAG_union: {
        struct ftr_dw_die s = *d;
        int a = agg_align(x, u, &s, depth + 1);
        return a > 0 ? (unsigned)a : 0;
    }
    case TAG_array:
        return ftr_dw_flag(d, A_VECTOR) ? 0 : type_align(x, d, depth + 1);
    default:
        return 0;
    }
}

struct agg {
    int in_union, depth;
    unsigned align;
};

static int agg_member(struct ftr_dw *x, const struct ftr_dw_unit *u, struct ftr_dw_die *m,
                      void *arg)
{
    struct agg *g = arg;
    if (m->tag != TAG_member && m->tag != TAG_inheritance) return 0;
    if (m->tag == TAG_member && ftr_dw_flag(m, A_DECL)) return 0; /* a static data member */
    if (ftr_dw_attr(m, A_ALIGNMENT)) return -1;
    uint64_t off = 0;
    int bitfield = ftr_dw_attr(m, A_BIT_SIZE) || ftr_dw_attr(m, A_DATA_BIT_OFFSET);
    int r = bitfield ? 1 : ftr_dw_member_offset(u, m, &off);
    if (r < 0 || (r == 0 && !g->in_union)) return -1; /* no offset: 0 in a union only */
    unsigned a = type_align(x, m, g->depth);
    if (!a || (!bitfield && off % a)) return -1; /* unaligned: passed in memory */
    if (a > g->align) g->align = a;
    return 0;
}

/* An aggregate passed by value: the ABI puts it in memory (on the stack) when a member is
 * unaligned (packed) or of x87 class (long double), whatever its size. @return its natural
 * alignment, or 0 when one of those may be so (or not understood). */
static int agg_align(struct ftr_dw *x, const struct ftr_dw_unit *u, const struct ftr_dw_die *s,
                     int depth)
{
    if (depth > MAX_AGG_DEPTH || ftr_dw_attr(s, A_ALIGNMENT) || ftr_dw_flag(s, A_DECL)) return 0;
    struct agg g = {s->tag == TAG_union, depth, 1};
    return ftr_dw_children(x, u, s, 0, agg_member, &g) ? 0 : (int)g.align;
}

/* Adds the registers a parameter of the type *d refers to takes; sets c->bad if not known. */
static void param_regs(struct ftr_dw *x, struct ftr_dw_die *d, struct cnt *c)
{
    const struct ftr_dw_unit *u;
    uint64_t size;
    if (ftr_dw_type(x, d, A_TYPE, &u) != 1) {
        c->bad = 1;
        return;
    }
    switch (d->tag) {
    case TAG_pointer:
    case TAG_reference:
    case TAG_rvalue_ref:
        c->ni += 1;
        return;
    case TAG_ptr_to_member: /* to a member function: 16 bytes, two INTEGER eightbytes */
        c->ni += 2;
        return;
    case TAG_enum:
        if (ftr_dw_constant(u, d, A_BYTE_SIZE, &size)) {
            c->ni += size <= 8 ? 1 : 2;
            c->bad |= !size || size > 16;
        } else if (ftr_dw_type(x, d, A_TYPE, &u) != 1 || d->tag != TAG_base || base_regs(u, d, c)) {
            c->bad = 1; /* no size, nor an underlying type that says it */
        }
        return;
    case TAG_base:
        if (base_regs(u, d, c)) c->bad = 1;
        return;
    case TAG_struct:
    case TAG_class:
    case TAG_union:
        /* Not classified eightbyte by eightbyte: both classes counted twice (safe). */
        if (!ftr_dw_flag(d, A_DECL) && ftr_dw_constant(u, d, A_BYTE_SIZE, &size) && size <= 16 &&
            agg_align(x, u, d, 0) > 0) {
            c->ni += 2;
            c->ns += 2;
        } else {
            c->bad = 1;
        }
        return;
    default: /* arrays, vectors, unspecified types, ... */
        c->bad = 1;
    }
}

/* 1 when a function returning the type *d refers to may take a hidden pointer (in rdi). */
static int hidden_return(struct ftr_dw *x, struct ftr_dw_die *d)
{
    const struct ftr_dw_unit *u;
    int r = ftr_dw_type(x, d, A_TYPE, &u);
    if (r <= 0) return r < 0;
    switch (d->tag) {
    case TAG_pointer:
    case TAG_reference:
    case TAG_rvalue_ref:
    case TAG_ptr_to_member:
    case TAG_enum:
        return 0;
    case TAG_base: {
        struct cnt c = {0};
        return base_regs(u, d, &c) != 0;
    }
    default:
        return 1;
    }
}

/* ---- locations ---- */

/* The frame base DW_OP_fbreg counts from: the CFA (DW_OP_call_frame_cfa: gcc; or, from gcc
 * with DWARF 2, a location list of rsp or rbp + 8 or more: the CFA, described where it is),
 * rbp (clang), rsp (clang without a frame pointer: an offset in its frame, of a size DWARF does
 * not say), or not known. */
static int fb_entry(const struct ftr_dw_locent *e, void *arg)
{
    int *fb = arg, k = FB_OTHER;
    const struct ftr_dw_loc *l = &e->l;
    if (l->single && l->kind == LOC_CFA) k = FB_CFA;
    if (l->single && l->kind == LOC_REG && (l->reg == DW_RBP || l->reg == DW_RSP))
        k = l->reg == DW_RBP ? FB_RBP : FB_RSP;
    if (l->single && l->kind == LOC_BREG && (l->reg == DW_RBP || l->reg == DW_RSP) && l->off >= 8)
        k = FB_LIST;
    *fb = *fb == FB_NONE || *fb == k ? k : FB_OTHER;
    return 0;
}

static int frame_base(const struct ftr_dw *x, const struct ftr_dw_unit *u,
                      const struct ftr_dw_die *s)
{
    const struct ftr_dw_val *v = ftr_dw_attr(s, A_FRAME_BASE);
    int fb = FB_NONE;
    if (!v || ftr_dw_locations(x, u, v, fb_entry, &fb)) return FB_OTHER;
    if (fb == FB_LIST) return u->gnu && v->kind != V_BLOCK ? FB_CFA : FB_OTHER;
    return fb == FB_NONE ? FB_OTHER : fb;
}

struct where {
    const struct cnt *c;
    uint8_t found, dflt, caller;
    struct ftr_dw_loc at, at_dflt;
};

static int where_entry(const struct ftr_dw_locent *e, void *arg)
{
    struct where *w = arg;
    const struct ftr_dw_loc *l = &e->l;
    /* in memory on the caller's side of the CFA, anywhere in the function: the frame base is
     * the CFA, or rbp (CFA - 16 past the prologue: its saved rbp and return address above);
     * from rsp nothing is known (clang: it marks its other conventions) */
    int fb = w->c->fb;
    if (l->kind == LOC_FBREG && (fb == FB_OTHER || (fb != FB_RSP && l->off >= 0))) w->caller = 1;
    if (e->dflt) {
        w->dflt = 1;
        w->at_dflt = *l;
    } else if (!w->found && e->lo <= w->c->pc && w->c->pc < e->hi) {
        w->found = 1;
        w->at = *l;
        /* at the entry rsp is at the return address: above it is the caller's */
        if (l->kind == LOC_BREG && l->reg == DW_RSP && l->off >= 8) w->caller = 1;
    }
    return 0;
}

/* Where a parameter of the subprogram c counts is, at its entry, against System V: one that
 * took one integer register (di) or one vector register (ds) after parameters that each took
 * one is in the next register of its class: a vector one is checked here (xmm0-7 in order), an
 * integer one is kept for decide() (a hidden return pointer may come first). Any of its
 * locations in memory on the caller's side of the CFA (gcc puts an ms_abi function's register
 * arguments in its home space there) or a location that cannot be read: wrong. No location: no
 * evidence. */
static void param_where(struct ftr_dw *x, const struct ftr_dw_unit *u, const struct ftr_dw_die *p,
                        struct cnt *c, int di, int ds)
{
    const struct ftr_dw_val *v = ftr_dw_attr(p, A_LOCATION);
    struct where w = {.c = c};
    int lost = c->lost;
    c->lost |= di + ds != 1;
    if (!v) return;
    if (ftr_dw_locations(x, u, v, where_entry, &w) || w.caller) {
        c->wrong = 1;
        return;
    }
    if (!w.found && w.dflt) w.at = w.at_dflt;
    if (lost || (!w.found && !w.dflt) || w.at.kind != LOC_REG) return;
    if (di == 1 && ds == 0 && c->ni <= 6) c->ireg[c->ni - 1] = (uint8_t)(w.at.reg + 1);
    if (ds == 1 && di == 0 && c->ns <= 8 && w.at.reg != DW_XMM0 + (uint32_t)c->ns - 1) c->wrong = 1;
}

/* The integer registers System V gives the parameters kept in c (shifted by one when hidden:
 * a hidden return pointer may take rdi). @return 0 when each is where it should be. */
static int int_regs_wrong(const struct cnt *c, int hidden)
{
    static const uint8_t sysv[6] = {5, 4, 1, 2, 8, 9}; /* rdi rsi rdx rcx r8 r9 */
    for (int k = 0; k < 6; k++) {
        int r = c->ireg[k] - 1;
        if (c->ireg[k] && r != sysv[k] && !(hidden && k < 5 && r == sysv[k + 1])) return 1;
    }
    return 0;
}

/* One child of a subprogram: a parameter, or the mark of a variadic one. */
static int param_child(struct ftr_dw *x, const struct ftr_dw_unit *u, struct ftr_dw_die *p,
                       void *arg)
{
    struct cnt *c = arg;
    if (p->tag == TAG_unspec_params) c->variadic = 1;
    if (p->tag != TAG_param) return 0;
    c->n++;
    if (!ftr_dw_attr(p, A_LOCATION) && !ftr_dw_attr(p, A_CONST_VALUE)) c->noloc = 1;
    /* the type, maybe through the parameter's abstract origin(s) */
    struct ftr_dw_die t = *p;
    for (int hop = 0; !ftr_dw_attr(&t, A_TYPE); hop++) {
        struct ftr_dw_die o;
        if (hop == MAX_HOPS || !ftr_dw_deref(x, ftr_dw_attr(&t, A_ORIGIN), &o) ||
            o.tag != TAG_param) {
            c->bad = 1;
            return 0;
        }
        t = o;
    }
    int ni = c->ni, ns = c->ns;
    param_regs(x, &t, c);
    if (c->at) param_where(x, u, p, c, c->ni - ni, c->ns - ns);
    return 0;
}

static void record(struct scan *sc, uint64_t addr, int ok)
{
    if (!ftr_dw_grow((void **)&sc->recs, &sc->caprecs, sc->nrecs + 1, sizeof *sc->recs,
                     &sc->dw.oom))
        sc->recs[sc->nrecs++] = (struct rec){addr, ok};
}

/* The verdict on a concrete subprogram whose own parameters are counted in own. */
static void decide(struct scan *sc, const struct ftr_dw_unit *u, const struct ftr_dw_die *s,
                   struct cnt own)
{
    struct ftr_dw *x = &sc->dw;
    uint64_t pc;
    if (!ftr_dw_low_pc(x, u, s, &pc)) return;
    x->budget = BUDGET;
    int proto = ftr_dw_flag(s, A_PROTOTYPED), all_cxx = ftr_dw_c_family(u->lang) == 2, gnu = u->gnu,
        ext = ftr_dw_flag(s, A_EXTERNAL);
    /* an artificial subprogram (clang's this-adjusting thunks: no parameters described, then a
     * jump to a function that may take some on the stack) and a unit without parameter DIEs */
    int bad = own.bad || own.variadic || ftr_dw_flag(s, A_DECL) || ftr_dw_flag(s, A_ARTIFICIAL) ||
              u->thin,
        ni = own.ni, ns = own.ns;
    const struct ftr_dw_val *cc = ftr_dw_attr(s, A_CC);
    bad |= cc && (cc->kind != V_CONST || cc->u != CC_normal);
    struct ftr_dw_die t = *s;
    int hidden = hidden_return(x, &t);
    /* abstract origins and specifications: their parameter lists count too (the largest) */
    struct ftr_dw_val todo[MAX_ORIGINS];
    int ntodo = 0;
    const struct ftr_dw_val *o1 = ftr_dw_attr(s, A_ORIGIN), *o2 = ftr_dw_attr(s, A_SPEC);
    if (o1) todo[ntodo++] = *o1;
    if (o2) todo[ntodo++] = *o2;
    for (int i = 0; i < ntodo && !bad; i++) {
        struct ftr_dw_die o;
        const struct ftr_dw_unit *ou = ftr_dw_deref(x, &todo[i], &o);
        if (!ou || o.tag != TAG_subprogram) {
            bad = 1;
            break;
        }
        proto |= ftr_dw_flag(&o, A_PROTOTYPED);
        bad |= ftr_dw_flag(&o, A_ARTIFICIAL) || ou->thin;
        all_cxx &= ftr_dw_c_family(ou->lang) == 2;
        gnu &= ou->gnu;
        ext |= ftr_dw_flag(&o, A_EXTERNAL);
        cc = ftr_dw_attr(&o, A_CC);
        /* in a unit not of C or C++: its conventions are unknown */
        bad |= !ftr_dw_c_unit(ou) || (cc && (cc->kind != V_CONST || cc->u != CC_normal));
        t = o;
        hidden |= hidden_return(x, &t);
        struct cnt oc = {0};
        if (ftr_dw_children(x, ou, &o, 1, param_child, &oc)) oc.bad = 1;
        bad |= oc.bad || oc.variadic;
        if (oc.ni > ni) ni = oc.ni;
        if (oc.ns > ns) ns = oc.ns;
        const struct ftr_dw_val *more[2] = {ftr_dw_attr(&o, A_ORIGIN), ftr_dw_attr(&o, A_SPEC)};
        for (int k = 0; k < 2; k++) {
            if (more[k] && ntodo == MAX_ORIGINS) bad = 1;
            if (more[k] && ntodo < MAX_ORIGINS) todo[ntodo++] = *more[k];
        }
    }
    /* Not GCC: LLVM's argument promotion (-O3, LTO) turns pointer parameters of functions it
     * sees all calls of into the values they point to, keeping name and debug information. It
     * leaves those parameters without a location; internal functions are left out anyway. */
    if (!gnu && (!ext || own.noloc)) bad = 1;
    bad |= own.wrong || int_regs_wrong(&own, hidden);
    int ok = !bad && x->budget >= 0 && (proto || all_cxx) && ni + hidden <= 6 && ns <= 8;
    record(sc, pc, ok);
}

/* One DIE of a compile unit: a subprogram's frame (fr[depth]) when it has children, a parameter
 * counted in the frame of its subprogram, a subprogram decided when its children end. */
static int scan_die(struct ftr_dw *x, const struct ftr_dw_unit *u, struct ftr_dw_die *d, int depth,
                    void *arg)
{
    struct scan *sc = arg;
    struct frame *fr = sc->fr;
    if (!d->tag) {
        struct frame *f = &fr[depth - 1];
        if (f->sub) decide(sc, u, &f->d, f->c);
        return 0;
    }
    struct frame *owner = NULL; /* the concrete subprogram whose parameter d may be */
    if (depth >= 1 && fr[depth - 1].sub) owner = &fr[depth - 1];
    if (depth >= 2 && fr[depth - 1].pack && fr[depth - 2].sub) owner = &fr[depth - 2];
    if (owner) {
        x->budget = BUDGET;
        param_child(x, u, d, &owner->c);
        if (x->budget < 0) owner->c.bad = 1;
    }
    int concrete = d->tag == TAG_subprogram && ftr_dw_attr(d, A_LOW_PC);
    if (!d->children) {
        if (concrete) decide(sc, u, d, (struct cnt){0});
        return 0;
    }
    struct frame *f = &fr[depth]; /* unused when the subtree is skipped */
    f->sub = (uint8_t)concrete;
    f->pack = d->tag == TAG_param_pack && owner && depth >= 1 && owner == &fr[depth - 1];
    f->c = (struct cnt){0};
    if (f->sub) {
        f->d = *d;
        f->c.at = (uint8_t)ftr_dw_low_pc(x, u, d, &f->c.pc);
        f->c.fb = (uint8_t)frame_base(x, u, d);
    }
    return ftr_dw_no_subprogram(d->tag);
}

static int cmp_rec(const void *a, const void *b)
{
    const struct rec *x = a, *y = b;
    if (x->addr != y->addr) return x->addr < y->addr ? -1 : 1;
    return x->ok - y->ok;
}

/* The addresses every record of which says eligible, in code, and named acceptably. */
static long results(struct scan *x, const struct ftr_dw_file *f, uint64_t **addrs)
{
    if (x->nrecs) qsort(x->recs, x->nrecs, sizeof *x->recs, cmp_rec);
    uint64_t *out = malloc((x->nrecs ? x->nrecs : 1) * sizeof *out);
    if (!out) return x->dw.oom = 1, -1;
    long n = 0;
    for (size_t i = 0; i < x->nrecs;) {
        size_t j = i;
        int ok = 1;
        for (; j < x->nrecs && x->recs[j].addr == x->recs[i].addr; j++)
            ok &= x->recs[j].ok;
        uint64_t a = x->recs[i].addr;
        i = j;
        if (!ok || !ftr_dw_file_keeps(f, a)) continue;
        out[n++] = a;
    }
    if (n)
        *addrs = out;
    else
        free(out);
    return n;
}

int ftr_dwarf_name_ok(const char *name)
{
    /* gcc's clones (.isra.0 .constprop.0 .part.0 .cold ...), LLVM's (.llvm.123, .specialized),
     * the vector variants of the vector function ABI (_ZGV...), and C++ thunks (_ZTh, _ZTv:
     * this-adjusting; _ZTc: covariant return), which jump to a function DWARF does not pair
     * them with */
    const char *dot = strchr(name, '.'), *at = strchr(name, '@'); /* not in @GLIBC_2.2.5 */
    return (!dot || (at && at < dot)) && strncmp(name, "_ZGV", 4) != 0 &&
           strncmp(name, "_ZTh", 4) != 0 && strncmp(name, "_ZTv", 4) != 0 &&
           strncmp(name, "_ZTc", 4) != 0;
}

long ftr_dwarf_regargs(Elf *elf, uint64_t **addrs, char *err, size_t errlen)
{
    *addrs = NULL;
    struct scan sc = {0};
    struct ftr_dw_file f;
    long n = 0;
    int r = ftr_dw_file_open(&f, elf, ftr_dwarf_name_ok);
    if (r > 0 && !ftr_dw_open(&sc.dw, elf) && sc.dw.nunits) {
        sc.fr = malloc(FTR_DW_MAX_DEPTH * sizeof *sc.fr);
        sc.dw.oom |= !sc.fr;
        for (size_t i = 0; i < sc.dw.nunits && !sc.dw.oom; i++)
            if (ftr_dw_c_unit(&sc.dw.units[i])) ftr_dw_walk(&sc.dw, &sc.dw.units[i], scan_die, &sc);
        if (!sc.dw.oom) n = results(&sc, &f, addrs);
    }
    if (r < 0 || sc.dw.oom) {
        n = -1;
        if (err && errlen) snprintf(err, errlen, "DWARF parameters: out of memory");
    }
    ftr_dw_close(&sc.dw);
    free(sc.recs);
    free(sc.fr);
    ftr_dw_file_close(&f);
    return n;
}
