/*
 * dwarf_abi.h - what a type read from DWARF is as an argument or a return value under the
 * x86-64 System V ABI: its class (enum ftr_pclass, ftr_patcher.h), and whether it travels in
 * registers (the classes of its eightbytes), in memory or by invisible reference (C++). Shall
 * only be used within patcher/ (dwarf_params.c), on top of dwarf_read.h.
 * Plain C, no allocation; every read through dwarf_read.c (bounds-checked, within x->budget).
 */
#ifndef FTR_DWARF_ABI_H
#define FTR_DWARF_ABI_H

#include "dwarf_read.h"

/* The class of an eightbyte (the ABI's, X87 and X87UP together) */
enum { EB_NONE, EB_INT, EB_SSE, EB_X87, EB_MEM };

enum {
    K_BAD,  /* not understood */
    K_VOID, /* no type */
    K_REG,  /* eightbytes of classes eb[0, neb): in registers when they are left */
    K_MEM,  /* in memory: on the stack; returned through a hidden pointer */
    K_X87,  /* long double, _Complex long double: on the stack; returned in st0 (st1) */
    K_REF,  /* a C++ class passed by invisible reference; returned through a hidden pointer */
};

struct ftr_dw_ty {
    uint8_t kind, cls, neb, eb[2];
    uint8_t whole;        /* one SSE register holds all 16 bytes (_Float128) */
    uint64_t size, align; /* bytes; align 0: not known */
    uint64_t enum_off;    /* FTR_PC_ENUM: the .debug_info offset of its DIE */
};

/*! ftr_dw_describe() : the type the DIE d refers to (DW_AT_type; none: K_VOID), typedefs and
 *  qualifiers looked through:
 *    - scalars: one or two eightbytes (INTEGER or SSE); long double, _Complex long double:
 *      K_X87; _Float128: whole; _Complex _Float128: K_MEM;
 *    - aggregates (struct, class, union) of up to 16 bytes: their eightbytes' classes (the
 *      ABI's merge of every member's, bases and array elements included), K_MEM with an
 *      unaligned member, K_X87 for a long double alone; larger: K_MEM, with their alignment;
 *    - C++ classes: K_REF when passed by invisible reference (DW_AT_calling_convention,
 *      or: a virtual table or base, a user-provided copy / move constructor or destructor, in
 *      the class, a base or a member), K_BAD when that cannot be told (a deleted one);
 *    - anything else, or what cannot be read: K_BAD. */
void ftr_dw_describe(struct ftr_dw *x, struct ftr_dw_die d, struct ftr_dw_ty *t);

#endif /* FTR_DWARF_ABI_H */
