/*
 * dwarf_loc.h - where a DIE's DW_AT_location (or DW_AT_frame_base) puts it: its location
 * expression, or every entry of its location list (DWARF 2-4 .debug_loc, DWARF 5
 * .debug_loclists), each described by its first operation. Shall only be used within patcher/
 * (dwarf_args.c, dwarf_params.c), on top of dwarf_read.h. Every read is bounds-checked; plain
 * C, no allocation.
 */
#ifndef FTR_DWARF_LOC_H
#define FTR_DWARF_LOC_H

#include "dwarf_read.h"

/* What a location expression says, from its first operation */
enum {
    LOC_EMPTY, /* no operation: optimized out */
    LOC_REG,   /* in DWARF register reg: DW_OP_reg*, or its value at the entry alone
                  (DW_OP_entry_value(DW_OP_reg*) DW_OP_stack_value) */
    LOC_BREG,  /* in memory at register reg + off (DW_OP_breg*) */
    LOC_FBREG, /* in memory at the frame base + off (DW_OP_fbreg) */
    LOC_CFA,   /* the CFA (DW_OP_call_frame_cfa: a frame base) */
    LOC_OTHER  /* anything else: a constant, an address, a computed value, ... */
};

struct ftr_dw_loc {
    uint8_t kind;
    uint8_t single; /* that operation is the whole expression */
    uint32_t reg;
    int64_t off;
};

/* One entry of a location list: where the object is for pc in [lo, hi) */
struct ftr_dw_locent {
    uint64_t lo, hi;
    uint8_t dflt; /* DW_LLE_default_location: wherever no other entry applies */
    struct ftr_dw_loc l;
};

/*! ftr_dw_loc_expr() : the location expression p[0, n). @return 0, or -1 when its first
 *  operation cannot be read. */
int ftr_dw_loc_expr(const uint8_t *p, uint64_t n, struct ftr_dw_loc *l);

/*! ftr_dw_locations() : calls fn on each entry of the location attribute v of a DIE of unit u:
 *  an expression is one entry for every address ([0, UINT64_MAX)); a location list gives each
 *  of its entries with its addresses. Stops when fn returns non-zero. @return 0, or -1 when v
 *  is no location or the list cannot be read (the entries read before were given to fn). */
typedef int (*ftr_dw_loc_fn)(const struct ftr_dw_locent *e, void *arg);
int ftr_dw_locations(const struct ftr_dw *x, const struct ftr_dw_unit *u,
                     const struct ftr_dw_val *v, ftr_dw_loc_fn fn, void *arg);

#endif /* FTR_DWARF_LOC_H */
