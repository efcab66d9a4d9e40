/*
 * ftr_values.h - argument and return values in the event stream: the bytes of a value list,
 * written by the hooks (preload/hot/hooks.c, through the inline helpers below: no libc) and read by
 * the report (ftr_values_next()). docs/format.md, "Values", describes the same bytes.
 *
 * A thread's stream carries a function's values as one SPECIAL VALUES event (arg = site |
 * nslots << 24) whose list is 12 * nslots bytes (in memory, the payload slots after it; in the
 * file, raw bytes in the heads stream after its arg: ftr_ev_iter.vals). Argument values follow
 * the call's ENTRY; a return value comes just before its EXIT.
 *
 * The list is a sequence of items, padded with zero bytes to whole slots (12 bytes):
 *   byte 0   type: 0x80 | size_code << 4 | fmt     (0x00: padding, the list ends)
 *   byte 1   index: 0 = the return value, else the argument's number (argN / fpargN); with
 *            FTR_VAL_DWARF (0x80) set, the value was typed from the function's DWARF and the
 *            low bits are the parameter's number in its declaration (1-based, `this` first;
 *            0: the return value): a report may name it. A struct by value is one item per
 *            register part, all with the parameter's index.
 *   then     integer formats: 1 << size_code bytes, little-endian (the register's low bytes);
 *            FTR_VF_FLOAT: 4 (float) or 8 (double) bytes;
 *            FTR_VF_STR: state (enum ftr_str_state), len, then len bytes of the string.
 */
#ifndef FTR_VALUES_H
#define FTR_VALUES_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* How a value is shown (and, for strings and floats, what it is) */
enum ftr_val_fmt {
    FTR_VF_SIGNED = 0, /* d: signed decimal */
    FTR_VF_UNSIGNED,   /* u: unsigned decimal */
    FTR_VF_HEX,        /* x: 0x... */
    FTR_VF_CHAR,       /* c: 'a' */
    FTR_VF_PTR,        /* p: a pointer, 0x... (0 as NULL) */
    FTR_VF_BOOL,       /* b: true / false */
    FTR_VF_ENUM,       /* e: an enumerator's name where the report knows it, else decimal */
    FTR_VF_FLOAT,      /* f: float (4 bytes) or double (8) */
    FTR_VF_STR,        /* s: a C string, captured at the call */
    FTR_VF__COUNT
};

enum ftr_str_state {
    FTR_STR_OK = 0,    /* the whole string (len bytes, no NUL) */
    FTR_STR_TRUNCATED, /* its first len bytes: it goes on */
    FTR_STR_NULL,      /* a NULL pointer */
    FTR_STR_BAD,       /* a pointer that could not be read */
};

#define FTR_VALUES_MAX_BYTES 264 /* a list's bytes, at most (22 slots of 12) */
#define FTR_VALUES_STR_MAX 48    /* bytes of a string kept */
#define FTR_VALUES_SITE_MASK 0xffffffu
#define FTR_VAL_DWARF 0x80u

static inline uint32_t ftr_values_arg(uint32_t site, uint32_t nslots)
{
    return (site & FTR_VALUES_SITE_MASK) | nslots << 24;
}
/* The type byte of an item; size in bytes: 1, 2, 4 or 8 */
static inline uint8_t ftr_val_type(unsigned fmt, unsigned size)
{
    unsigned code = size >= 8 ? 3 : size >= 4 ? 2 : size >= 2 ? 1 : 0;
    return (uint8_t)(0x80 | code << 4 | (fmt & 15));
}

/* One decoded item. str points into the list (not NUL-terminated). */
struct ftr_value {
    uint8_t fmt, size, index;
    uint8_t str_state;
    uint64_t bits; /* integers and floats: the bytes, zero-extended */
    const char *str;
    uint32_t str_len;
};

/*! ftr_values_next() : the next item of the list [*p, end). @return 1 with *v filled and *p
 *  moved past it, 0 at the end of the list (padding or its end), -1 when the bytes are no
 *  valid item (an unknown type, a size a format cannot have, an item cut short). */
int ftr_values_next(const uint8_t **p, const uint8_t *end, struct ftr_value *v);

/*! ftr_value_signed() : an integer item's value, sign-extended from its size. */
int64_t ftr_value_signed(const struct ftr_value *v);

#ifdef __cplusplus
}
#endif
#endif /* FTR_VALUES_H */
