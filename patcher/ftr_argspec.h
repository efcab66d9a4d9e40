/*
 * ftr_argspec.h - which values to record, and how to show them: the argument specs of
 * ftrace-run -A/--argument and -R/--retval (FTRACE_ARGS, FTRACE_RETVAL), shared by the preload
 * and the tools so that one spec means the same everywhere. Pure: unit-tested on strings.
 *
 * Grammar (several specs in one environment variable are separated by ';'):
 *   SPEC := PATTERN [ '@' ITEM { ',' ITEM } ]
 *   PATTERN := a filter expression (ftr_filter.h): the functions the spec applies to
 *   ITEM := 'arg' N [ '/' FMT ]        the Nth integer-class argument: N <= 6 in rdi rsi rdx rcx
 *                                      r8 r9, then the stack (arg7 is the first stack word)
 *         | 'fparg' N [ '/' SIZE ]     the Nth floating-point argument (xmm0..xmm7), N <= 8
 *         | 'retval' [ '/' FMT ]       the return value (rax; retval/f: xmm0)
 *   FMT := LETTER [ SIZE ]             d or i signed decimal, u unsigned, x hex, c char,
 *                                      p pointer, b bool, e enum, s string, f floating point
 *   SIZE := 8 | 16 | 32 | 64           bits (default 64; c and b: 8; f: 64 = double, 32 = float)
 * The item list starts at the last '@' that follows a non-empty pattern and is followed by
 * "arg", "fparg" or "retval" (so '@' regex patterns need no escape). Without a list, -A means
 * the function's parameters as its DWARF describes them (or, with no DWARF, the six integer
 * argument registers in hex) and -R means retval (typed from DWARF, else retval/d).
 * Errors name the spec and what is wrong ("bad argument spec 'f@arg0': argument numbers start
 * at 1").
 */
#ifndef FTR_ARGSPEC_H
#define FTR_ARGSPEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FTR_ARGSPEC_MAX 12 /* items in one spec */

enum ftr_arg_src { FTR_AS_ARG, FTR_AS_FPARG, FTR_AS_RETVAL };

/* One value to record: where it is and how it is shown (enum ftr_val_fmt, ftr_values.h) */
struct ftr_argitem {
    uint8_t src;   /* enum ftr_arg_src */
    uint8_t n;     /* argument number (1-based); the return value: 0 (rax), 1 (xmm0) */
    uint8_t fmt;   /* enum ftr_val_fmt */
    uint8_t size;  /* bytes: 1, 2, 4, 8 */
    uint8_t label; /* the index the list records (ftr_values.h): 0 = n; typed from DWARF:
                      FTR_VAL_DWARF | the parameter's number (0 for the return value) */
};

struct ftr_filter;
struct ftr_argspec {
    char *text; /* the spec as written */
    struct ftr_filter *filter;
    int from_dwarf; /* no item list: the function's own parameters / return type */
    uint8_t nitems;
    struct ftr_argitem items[FTR_ARGSPEC_MAX];
};

struct ftr_argspecs {
    size_t n;
    struct ftr_argspec *v;
};

/*! ftr_argspecs_parse() : appends the ';'-separated specs of text (NULL or "": none) to out;
 *  retval: the specs of -R (a list-less spec means the return value) rather than -A.
 *  @return 0, or -1 with a one-line message in err (out then keeps what it had). */
int ftr_argspecs_parse(const char *text, int retval, struct ftr_argspecs *out, char *err,
                       size_t errlen);
void ftr_argspecs_free(struct ftr_argspecs *s);

/*! ftr_argspecs_match() : the last spec of s whose pattern selects the function (module path
 *  or name, is_main as for ftr_filter_match_ex()), or NULL. */
const struct ftr_argspec *ftr_argspecs_match(const struct ftr_argspecs *s, const char *module,
                                             int is_main, const char *name, const char *demangled);

/*! ftr_argitems_bytes() : the most bytes the list of these n items can take (whole words) */
size_t ftr_argitems_bytes(const struct ftr_argitem *it, size_t n);

/*! ftr_argitem_text() : an item written back in the spec grammar ("arg2/x32") into buf. */
void ftr_argitem_text(const struct ftr_argitem *it, char *buf, size_t len);

#ifdef __cplusplus
}
#endif
#endif /* FTR_ARGSPEC_H */
