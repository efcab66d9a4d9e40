/*
 * dwarf_read.h - a small reader of .debug_info on libelf. Shall only be used within patcher/
 * (dwarf_args.c, dwarf_params.c, dwarf_abi.c, dwarf_loc.c).
 *
 * libdw cannot link into libftrace.so (its static archive has local-exec TLS; the shared one
 * would allocate with the traced program's malloc), and the preload needs little of DWARF: the
 * DIEs of subprograms, their parameters and types (and their locations: dwarf_loc.c, on top of
 * this). So: the unit headers and each unit's root DIE are read up front, with every
 * abbreviation table; any other DIE is read where it is, by its .debug_info offset, keeping
 * only the attributes listed below. DWARF 2 to 5, 32 and 64-bit units, every standard form and
 * the GNU ones (dwz, split DWARF) are walked; a reference that cannot be followed (to a type
 * unit by signature, to a supplementary file) is read as such.
 * Every read is bounds-checked: a malformed DIE is an error, never a fault or a loop.
 * Plain C, malloc/free only.
 */
#ifndef FTR_DWARF_READ_H
#define FTR_DWARF_READ_H

#include <stddef.h>
#include <stdint.h>

/* ---- DWARF numbers used here ---- */
// clang-format off
enum {
    TAG_array = 0x01, TAG_class = 0x02, TAG_enum = 0x04, TAG_param = 0x05, TAG_member = 0x0d,
    TAG_pointer = 0x0f, TAG_reference = 0x10, TAG_compile_unit = 0x11, TAG_struct = 0x13,
    TAG_subroutine_type = 0x15, TAG_typedef = 0x16, TAG_union = 0x17, TAG_unspec_params = 0x18,
    TAG_inheritance = 0x1c, TAG_inlined = 0x1d, TAG_ptr_to_member = 0x1f, TAG_subrange = 0x21,
    TAG_base = 0x24, TAG_const = 0x26, TAG_enumerator = 0x28, TAG_subprogram = 0x2e,
    TAG_volatile = 0x35, TAG_restrict = 0x37, TAG_unspec_type = 0x3b, TAG_partial_unit = 0x3c,
    TAG_rvalue_ref = 0x42, TAG_atomic = 0x47,
    TAG_param_pack = 0x4108, /* DW_TAG_GNU_formal_parameter_pack */
};
enum { UT_compile = 1, UT_type = 2, UT_partial = 3, UT_skeleton = 4, UT_split_compile = 5,
       UT_split_type = 6 };
enum { ATE_address = 1, ATE_boolean, ATE_complex, ATE_float, ATE_signed, ATE_signed_char,
       ATE_unsigned, ATE_unsigned_char, ATE_UTF = 0x10, ATE_UCS, ATE_ASCII };
#define CC_normal 1
#define OP_plus_uconst 0x23

/* The attributes kept from a DIE, each in a slot */
enum { A_SIBLING, A_BYTE_SIZE, A_LOW_PC, A_LANG, A_PRODUCER, A_PROTOTYPED, A_ORIGIN, A_CC,
       A_MEMBER_LOC, A_DECL, A_ENCODING, A_EXTERNAL, A_SPEC, A_TYPE, A_LOCATION, A_CONST_VALUE,
       A_ADDR_BASE, A_STR_OFF_BASE, A_ALIGNMENT, A_VECTOR, A_BIT_SIZE, A_DWO_NAME, A_ARTIFICIAL,
       A_FRAME_BASE, A_LOCLISTS_BASE, A_NAME, A_LINKAGE_NAME, A_UPPER_BOUND, A_COUNT, A_DEFAULTED,
       A_DELETED, A_DATA_BIT_OFFSET, A_NSLOTS };

/* What an attribute's value is */
enum { V_CONST = 1, /* data, flag, sdata (two's complement), udata, implicit_const */
       V_REF,       /* u: the .debug_info offset of a DIE (any reference within the file) */
       V_BADREF,    /* a reference not followed: ref_sig8, ref_sup, GNU_ref_alt */
       V_ADDR, V_ADDRX /* u: the index in .debug_addr */, V_BLOCK /* blk, u bytes */,
       V_STRP, V_LSTRP, V_STRX, V_STRING /* blk */, V_SECOFF, V_OTHER,
       V_REL /* internal: a unit-relative reference */ };
// clang-format on

struct ftr_dw_val {
    uint8_t kind;
    uint16_t form; /* DW_FORM_* it was read from */
    uint64_t u;
    const uint8_t *blk;
};

struct ftr_dw_die {
    uint64_t off, next; /* this DIE, what follows its attributes */
    uint32_t tag;       /* 0: the null entry that ends a list of children */
    uint8_t children;
    uint64_t have; /* bit per slot */
    struct ftr_dw_val v[A_NSLOTS];
};

struct ftr_dw_unit {
    uint64_t off, die, end; /* header, root DIE, end: offsets in .debug_info */
    uint64_t abbrev_off, addr_base, lang;
    uint64_t base;          /* the root's DW_AT_low_pc (0 without): base of its location lists */
    uint64_t loclists_base; /* DW_AT_loclists_base: where its DW_FORM_loclistx offsets are */
    uint64_t str_off_base;  /* DW_AT_str_offsets_base (UINT64_MAX without: no strx string) */
    size_t tab;             /* index of its abbreviation table; SIZE_MAX: none */
    uint8_t ver, offsz, addrsz, type;
    uint8_t root; /* the root DIE is a compile or partial unit's */
    uint8_t dwo;  /* a split-DWARF skeleton (DW_AT_dwo_name) */
    uint8_t gnu;  /* DW_AT_producer starts with "GNU " (GCC) */
    uint8_t thin; /* its producer says -g1, -gmlt or -gline-tables-only (no parameters described)
                     or -mabi=ms (another calling convention): nothing in it is listed */
    uint8_t has_addr_base, has_loclists_base;
};

struct ftr_dw_sec {
    const uint8_t *p;
    size_t n;
};

struct ftr_dw {
    struct ftr_dw_sec info, abbrev, str, line_str, str_off, addr, loc, loclists;
    struct ftr_dw_unit *units; /* the usable ones, by offset */
    size_t nunits;
    struct ftr_dw_abbrev *ab; /* every table's, one after the other */
    size_t nab, capab;
    struct ftr_dw_spec *sp; /* their attribute specifications */
    size_t nsp, capsp;
    struct ftr_dw_table *tabs;
    size_t ntabs;
    long budget; /* DIEs ftr_dw_deref() / ftr_dw_children() may still read (set by the user) */
    int oom;
};

/*! ftr_dw_open() : reads elf's DWARF sections (decompressing SHF_COMPRESSED and .zdebug ones in
 *  place), unit headers, abbreviation tables and root DIEs. @return 0 (no DWARF: no units), or
 *  -1 when out of memory. ftr_dw_close() in both cases. */
struct Elf;
int ftr_dw_open(struct ftr_dw *x, struct Elf *elf);
void ftr_dw_close(struct ftr_dw *x);

/*! ftr_dw_read_die() : the DIE at .debug_info offset off, in unit u. @return 0, or -1. */
int ftr_dw_read_die(const struct ftr_dw *x, const struct ftr_dw_unit *u, uint64_t off,
                    struct ftr_dw_die *d);

/*! ftr_dw_deref() : the DIE a V_REF value points to (never a null entry), counted against
 *  x->budget. @return its unit, or NULL (not a V_REF, malformed, budget spent). */
const struct ftr_dw_unit *ftr_dw_deref(struct ftr_dw *x, const struct ftr_dw_val *v,
                                       struct ftr_dw_die *d);

/*! ftr_dw_children() : calls fn on each child of parent (unit u), and on the children of a
 *  child DW_TAG_GNU_formal_parameter_pack when packs is set; grandchildren are skipped (through
 *  DW_AT_sibling when there is one). Counted against x->budget. @return 0, or -1 when the
 *  children could not all be read or fn returned non-zero. */
typedef int (*ftr_dw_child_fn)(struct ftr_dw *x, const struct ftr_dw_unit *u,
                               struct ftr_dw_die *child, void *arg);
int ftr_dw_children(struct ftr_dw *x, const struct ftr_dw_unit *u, const struct ftr_dw_die *parent,
                    int packs, ftr_dw_child_fn fn, void *arg);

/*! ftr_dw_walk() : reads the DIEs of unit u in order from its root (depth 0), calling fn on
 *  each with its depth, and on the null entry that ends each list of children (tag 0, the
 *  depth of that list) before leaving it. When fn returns non-zero for a DIE with children,
 *  its subtree is skipped (through a usable DW_AT_sibling; else it is walked). Stops after the
 *  root's children, at a DIE that cannot be read (the rest of the unit is lost), before a
 *  depth of FTR_DW_MAX_DEPTH (fn never sees one), or when x->oom is set. */
#define FTR_DW_MAX_DEPTH 256
typedef int (*ftr_dw_walk_fn)(struct ftr_dw *x, const struct ftr_dw_unit *u, struct ftr_dw_die *d,
                              int depth, void *arg);
void ftr_dw_walk(struct ftr_dw *x, const struct ftr_dw_unit *u, ftr_dw_walk_fn fn, void *arg);

/*! ftr_dw_no_subprogram() : @return 1 for the tags of DIEs in which no concrete subprogram is
 *  looked for (types, inlined code: one missed there is left out). */
int ftr_dw_no_subprogram(uint32_t tag);

/*! ftr_dw_sibling() : @return 1 with *pos = d's DW_AT_sibling when it is usable (after d, in
 *  its unit). */
int ftr_dw_sibling(const struct ftr_dw_unit *u, const struct ftr_dw_die *d, uint64_t *pos);

/*! ftr_dw_constant() : attribute slot of d as a constant. @return 1, or 0 when absent or not a
 *  constant (DWARF 2-3's data4 / data8 may be section offsets: not constants). */
int ftr_dw_constant(const struct ftr_dw_unit *u, const struct ftr_dw_die *d, int slot,
                    uint64_t *out);

/*! ftr_dw_member_offset() : a data member's (or base class's) DW_AT_data_member_location
 *  in bytes, a constant or DW_OP_plus_uconst n. @return 1, 0 when absent (*off = 0), -1 when it
 *  is something else (an expression: a virtual base). */
int ftr_dw_member_offset(const struct ftr_dw_unit *u, const struct ftr_dw_die *m, uint64_t *off);

/*! ftr_dw_addrx() : entry i of u's part of .debug_addr (from its DW_AT_addr_base).
 *  @return 1, or 0 when it is not there. */
int ftr_dw_addrx(const struct ftr_dw *x, const struct ftr_dw_unit *u, uint64_t i, uint64_t *addr);

/*! ftr_dw_low_pc() : d's DW_AT_low_pc (DW_FORM_addr, or addrx through .debug_addr and the
 *  unit's DW_AT_addr_base). @return 1, or 0 when absent or unreadable. */
int ftr_dw_low_pc(const struct ftr_dw *x, const struct ftr_dw_unit *u, const struct ftr_dw_die *d,
                  uint64_t *pc);

/*! ftr_dw_string() : attribute slot of d as a string (DW_FORM_string, strp, line_strp, strx
 *  through the unit's DW_AT_str_offsets_base), NUL-terminated within its section.
 *  @return it, or NULL (absent, another form, out of bounds). */
const char *ftr_dw_string(const struct ftr_dw *x, const struct ftr_dw_unit *u,
                          const struct ftr_dw_die *d, int slot);

/*! ftr_dw_type() : the type the DIE *d refers to through slot, typedefs and qualifiers (const,
 *  volatile, restrict, _Atomic) stripped. @return 1 with that type in *d and its unit in *u, 0
 *  for void (no type), -1 when it cannot be read (or a chain too long). */
int ftr_dw_type(struct ftr_dw *x, struct ftr_dw_die *d, int slot, const struct ftr_dw_unit **u);

/*! ftr_dw_c_family() : @return 1 for a DW_LANG_* of C, 2 of C++, 0 for other languages (other
 *  conventions, or none we know). */
int ftr_dw_c_family(uint64_t lang);

/*! ftr_dw_c_unit() : @return 1 when u's subprograms are looked at: a compile (or partial) unit
 *  of C or C++ whose root and abbreviations were read, not a split-DWARF skeleton. */
int ftr_dw_c_unit(const struct ftr_dw_unit *u);

/* ---- the module around its DWARF ---- */

/* Its executable sections, and the entry addresses of symbols whose names a filter refuses */
struct ftr_dw_range {
    uint64_t lo, hi;
};
struct ftr_dw_file {
    struct ftr_dw_range *exec;
    size_t nexec, capexec;
    uint64_t *drop; /* sorted */
    size_t ndrop, capdrop;
};

/*! ftr_dw_file_open() : reads elf's section headers and symbol tables (.symtab, .dynsym: the
 *  FUNC, IFUNC and NOTYPE symbols whose name name_ok() refuses). @return 1 when elf is an x86-64
 *  ELF64 executable or shared object (a .o's DWARF is not relocated), 0 when it is not (nothing
 *  read), -1 when out of memory. ftr_dw_file_close() in every case. */
int ftr_dw_file_open(struct ftr_dw_file *f, struct Elf *elf, int (*name_ok)(const char *));
void ftr_dw_file_close(struct ftr_dw_file *f);

/*! ftr_dw_file_keeps() : @return 1 when addr is in an executable section and no refused symbol
 *  is there. */
int ftr_dw_file_keeps(const struct ftr_dw_file *f, uint64_t addr);

/* Bounded reads: past end, a read sets bad and returns 0 (NULL), and so does every later one. */
struct ftr_dw_cur {
    const uint8_t *p, *end;
    int bad;
};
const uint8_t *ftr_dw_take(struct ftr_dw_cur *c, uint64_t n); /* n bytes */
uint64_t ftr_dw_rd(struct ftr_dw_cur *c, unsigned n);         /* little-endian, n <= 8 */
uint64_t ftr_dw_leb(struct ftr_dw_cur *c, int sign);          /* (S)LEB128 */

/*! ftr_dw_grow() : makes room for need elements of size bytes in *p (capacity *cap).
 *  @return 0, or -1 with *oom set. */
int ftr_dw_grow(void **p, size_t *cap, size_t need, size_t size, int *oom);

_Static_assert(A_NSLOTS <= 64, "one bit of ftr_dw_die.have per slot");

static inline const struct ftr_dw_val *ftr_dw_attr(const struct ftr_dw_die *d, int slot)
{
    return (d->have >> slot) & 1 ? &d->v[slot] : NULL;
}

/* a flag (or any constant) that is set */
static inline int ftr_dw_flag(const struct ftr_dw_die *d, int slot)
{
    const struct ftr_dw_val *v = ftr_dw_attr(d, slot);
    return v && v->kind == V_CONST && v->u;
}

#endif /* FTR_DWARF_READ_H */
