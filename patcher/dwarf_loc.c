/*
 * dwarf_loc.c - location expressions and location lists (see dwarf_loc.h).
 */
#include "dwarf_loc.h"

enum {
    OP_reg0 = 0x50,
    OP_breg0 = 0x70,
    OP_regx = 0x90,
    OP_fbreg = 0x91,
    OP_bregx = 0x92,
    OP_stack_value = 0x9f,
    OP_call_frame_cfa = 0x9c,
    OP_entry_value = 0xa3,
    OP_GNU_entry_value = 0xf3
};
enum {
    LLE_end = 0,
    LLE_base_addressx,
    LLE_startx_endx,
    LLE_startx_length,
    LLE_offset_pair,
    LLE_default,
    LLE_base_address,
    LLE_start_end,
    LLE_start_length,
    LLE_GNU_view_pair
};
enum { FORM_data4 = 0x06, FORM_data8 = 0x07, FORM_loclistx = 0x22 };
#define MAX_ENTRIES 4096 /* entries read from one list: more is refused as malformed */

/* A register alone: DW_OP_reg0..31 or DW_OP_regx. @return 1 with *reg. */
static int reg_op(struct ftr_dw_cur *c, uint32_t *reg)
{
    if (c->p >= c->end) return 0;
    uint8_t op = *c->p;
    if (op >= OP_reg0 && op < OP_reg0 + 32) {
        c->p++;
        *reg = op - OP_reg0;
        return 1;
    }
    if (op != OP_regx) return 0;
    c->p++;
    uint64_t r = ftr_dw_leb(c, 0);
    *reg = (uint32_t)r;
    return !c->bad && r <= UINT32_MAX;
}

int ftr_dw_loc_expr(const uint8_t *p, uint64_t n, struct ftr_dw_loc *l)
{
    struct ftr_dw_cur c = {p, p + n, 0};
    *l = (struct ftr_dw_loc){LOC_OTHER, 0, 0, 0};
    if (!n) {
        l->kind = LOC_EMPTY;
        return 0;
    }
    uint8_t op = *c.p;
    if (reg_op(&c, &l->reg)) {
        l->kind = LOC_REG;
    } else if (c.bad) {
        return -1;
    } else if ((op >= OP_breg0 && op < OP_breg0 + 32) || op == OP_bregx) {
        c.p++;
        l->kind = LOC_BREG;
        l->reg = op == OP_bregx ? (uint32_t)ftr_dw_leb(&c, 0) : (uint32_t)(op - OP_breg0);
        l->off = (int64_t)ftr_dw_leb(&c, 1);
    } else if (op == OP_fbreg) {
        c.p++;
        l->kind = LOC_FBREG;
        l->off = (int64_t)ftr_dw_leb(&c, 1);
    } else if (op == OP_call_frame_cfa) {
        c.p++;
        l->kind = LOC_CFA;
    } else if (op == OP_entry_value || op == OP_GNU_entry_value) {
        /* the register's value at the entry, and nothing more */
        c.p++;
        uint64_t len = ftr_dw_leb(&c, 0);
        const uint8_t *sub = ftr_dw_take(&c, len);
        if (!sub) return -1;
        struct ftr_dw_cur s = {sub, sub + len, 0};
        uint32_t reg;
        if (reg_op(&s, &reg) && s.p == s.end && c.p < c.end && *c.p == OP_stack_value) {
            c.p++;
            l->kind = LOC_REG;
            l->reg = reg;
        }
    } else {
        c.p = c.end; /* not looked into */
    }
    if (c.bad) return -1;
    l->single = c.p == c.end;
    return 0;
}

/* One entry's counted expression (a ULEB128 length in DWARF 5, 2 bytes before) to fn */
static int entry(struct ftr_dw_cur *c, int ver, struct ftr_dw_locent *e, ftr_dw_loc_fn fn,
                 void *arg, int *stop)
{
    uint64_t n = ver >= 5 ? ftr_dw_leb(c, 0) : ftr_dw_rd(c, 2);
    const uint8_t *p = ftr_dw_take(c, n);
    if (!p || ftr_dw_loc_expr(p, n, &e->l)) return -1;
    *stop = fn(e, arg) != 0;
    return 0;
}

/* A DWARF 2-4 list in .debug_loc: address pairs relative to the base (the unit's low_pc, or a
 * base address selection entry: all ones, then the base) */
static int loc_list(const struct ftr_dw *x, const struct ftr_dw_unit *u, uint64_t off,
                    ftr_dw_loc_fn fn, void *arg)
{
    if (!x->loc.p || off >= x->loc.n) return -1;
    struct ftr_dw_cur c = {x->loc.p + off, x->loc.p + x->loc.n, 0};
    uint64_t base = u->base, ones = u->addrsz == 8 ? UINT64_MAX : UINT32_MAX;
    int stop = 0;
    for (int i = 0; i < MAX_ENTRIES && !stop; i++) {
        uint64_t lo = ftr_dw_rd(&c, u->addrsz), hi = ftr_dw_rd(&c, u->addrsz);
        if (c.bad) return -1;
        if (!lo && !hi) return 0;
        if (lo == ones) {
            base = hi;
            continue;
        }
        struct ftr_dw_locent e = {base + lo, base + hi, 0, {0}};
        if (entry(&c, u->ver, &e, fn, arg, &stop)) return -1;
    }
    return stop ? 0 : -1;
}

/* A DWARF 5 list in .debug_loclists (DW_LLE_* entries; addresses through .debug_addr) */
static int loclists_list(const struct ftr_dw *x, const struct ftr_dw_unit *u, uint64_t off,
                         ftr_dw_loc_fn fn, void *arg)
{
    if (!x->loclists.p || off >= x->loclists.n) return -1;
    struct ftr_dw_cur c = {x->loclists.p + off, x->loclists.p + x->loclists.n, 0};
    uint64_t base = u->base;
    int stop = 0;
    for (int i = 0; i < MAX_ENTRIES && !stop; i++) {
        unsigned kind = (unsigned)ftr_dw_rd(&c, 1);
        struct ftr_dw_locent e = {0, 0, 0, {0}};
        uint64_t a, b;
        int ok = 1;
        switch (kind) {
        case LLE_end:
            return c.bad ? -1 : 0;
        case LLE_base_addressx:
            ok = ftr_dw_addrx(x, u, ftr_dw_leb(&c, 0), &base);
            break;
        case LLE_startx_endx:
            a = ftr_dw_leb(&c, 0);
            b = ftr_dw_leb(&c, 0);
            ok = ftr_dw_addrx(x, u, a, &e.lo) && ftr_dw_addrx(x, u, b, &e.hi);
            break;
        case LLE_startx_length:
            a = ftr_dw_leb(&c, 0);
            ok = ftr_dw_addrx(x, u, a, &e.lo);
            e.hi = e.lo + ftr_dw_leb(&c, 0);
            break;
        case LLE_offset_pair:
            e.lo = base + ftr_dw_leb(&c, 0);
            e.hi = base + ftr_dw_leb(&c, 0);
            break;
        case LLE_default:
            e.dflt = 1;
            break;
        case LLE_base_address:
            base = ftr_dw_rd(&c, u->addrsz);
            break;
        case LLE_start_end:
            e.lo = ftr_dw_rd(&c, u->addrsz);
            e.hi = ftr_dw_rd(&c, u->addrsz);
            break;
        case LLE_start_length:
            e.lo = ftr_dw_rd(&c, u->addrsz);
            e.hi = e.lo + ftr_dw_leb(&c, 0);
            break;
        case LLE_GNU_view_pair:
            ftr_dw_leb(&c, 0);
            ftr_dw_leb(&c, 0);
            break;
        default:
            return -1;
        }
        if (!ok || c.bad) return -1;
        if (kind == LLE_base_addressx || kind == LLE_base_address || kind == LLE_GNU_view_pair)
            continue;
        if (entry(&c, 5, &e, fn, arg, &stop)) return -1;
    }
    return stop ? 0 : -1;
}

int ftr_dw_locations(const struct ftr_dw *x, const struct ftr_dw_unit *u,
                     const struct ftr_dw_val *v, ftr_dw_loc_fn fn, void *arg)
{
    if (!v) return -1;
    if (v->kind == V_BLOCK) {
        struct ftr_dw_locent e = {0, UINT64_MAX, 0, {0}};
        if (!v->blk || ftr_dw_loc_expr(v->blk, v->u, &e.l)) return -1;
        fn(&e, arg);
        return 0;
    }
    /* DWARF 2-3: data4 / data8 are location list offsets; 4 and later: sec_offset */
    int ptr = v->kind == V_SECOFF || (u->ver < 4 && v->kind == V_CONST &&
                                      (v->form == FORM_data4 || v->form == FORM_data8));
    if (ptr)
        return u->ver >= 5 ? loclists_list(x, u, v->u, fn, arg) : loc_list(x, u, v->u, fn, arg);
    if (v->form != FORM_loclistx || u->ver < 5 || !u->has_loclists_base || !x->loclists.p)
        return -1;
    /* an index into the offsets after the unit's .debug_loclists header, relative to them */
    uint64_t b = u->loclists_base;
    if (b > x->loclists.n || v->u >= (x->loclists.n - b) / u->offsz) return -1;
    struct ftr_dw_cur c = {x->loclists.p + b + v->u * u->offsz, x->loclists.p + x->loclists.n, 0};
    uint64_t off = ftr_dw_rd(&c, u->offsz);
    if (c.bad || off > x->loclists.n - b) return -1;
    return loclists_list(x, u, b + off, fn, arg);
}
