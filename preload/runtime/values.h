/*
 * values.h - argument and return values (-A / -R): which sites record which values, and the
 * capture the hooks do. Private to preload/.
 *
 *   values.c   the specs (FTRACE_ARGS, FTRACE_RETVAL, patcher/ftr_argspec.h) and, per site, the
 *              program of values it records: set while the modules are patched, read by hooks
 *   capture.c  the hot part: a program run on the registers a trampoline saved, into the bytes
 *              of a value list (formats/ftr_values.h). General registers only, no libc.
 *
 * A site that records values has FTR_SF_ARGS and/or FTR_SF_RETVAL in ftr_site_flags and the
 * index of its program in ftr_site_prog. Programs are never changed or freed once published, so
 * a hook may read one while a new filter is put in force.
 */
#ifndef FTR_VALUES_PRELOAD_H
#define FTR_VALUES_PRELOAD_H

#include <stddef.h>
#include <stdint.h>

#include "ftr_argspec.h"

#define FTR_SF_ARGS 4u   /* ftr_site_flags: record the arguments at the entry */
#define FTR_SF_RETVAL 8u /* ... the return value at the exit */
#define FTR_VALPROG_MAX 1024

struct ftr_valprog {
    uint8_t nargs, has_ret;
    struct ftr_argitem args[FTR_ARGSPEC_MAX];
    struct ftr_argitem ret;
};
extern const struct ftr_valprog *ftr_valprogs __attribute__((visibility("hidden")));
extern uint16_t *ftr_site_prog __attribute__((visibility("hidden"))); /* by site index */

/* values.c, at start: parse FTRACE_ARGS and FTRACE_RETVAL. @return 0, 1 (some spec: the hooks
 * read the site flags), or -1 with a one-line message in err */
int ftr_values_init(char *err, size_t errlen) __attribute__((visibility("hidden")));
struct ftr_site;
struct ftr_module;
/* A module scanned: its DWARF descriptions are read when some spec needs them */
void ftr_values_module(const struct ftr_module *m) __attribute__((visibility("hidden")));
/* The FTR_SF_ARGS / FTR_SF_RETVAL flags site s of module gets (its program set up) */
unsigned ftr_values_site(const char *module, int is_main, const struct ftr_site *s,
                         const char *demangled) __attribute__((visibility("hidden")));

/* After the first patching: one line per spec that selects no function */
void ftr_values_say_unmatched(void) __attribute__((visibility("hidden")));
/* ftrace-ctl PID args|retval SPECS: the -A (or -R) specs replaced (""/NULL: none), the sites
 * re-patched. A spec that selects no function is refused and the specs in force stay.
 * @return 0, or -1 with a one-line message in err */
int ftr_values_set(int retval, const char *text, char *err, size_t errlen)
    __attribute__((visibility("hidden")));

/* capture.c: the registers an entry trampoline saved (SAVE_ARGS order, lowest address first) */
enum {
    FTR_REG_R11,
    FTR_REG_R10,
    FTR_REG_R9,
    FTR_REG_R8,
    FTR_REG_RDI,
    FTR_REG_RSI,
    FTR_REG_RDX,
    FTR_REG_RCX,
    FTR_REG_RAX
};
/* The list of p's arguments into buf (FTR_VALUES_MAX_BYTES, 4-byte aligned), from the saved
 * registers regs, the stack above the return address slot, and the vector registers as they
 * are now (untouched since the function's entry). @return its length in bytes */
size_t ftr_capture_args(const struct ftr_valprog *p, const uintptr_t *regs, const uintptr_t *slot,
                        uint8_t *buf) __attribute__((visibility("hidden")));
/* The return value: rax at ret[0], rdx at ret[-1] (saved by the exit trampoline), xmm0 now */
size_t ftr_capture_ret(const struct ftr_valprog *p, const uintptr_t *ret, uint8_t *buf)
    __attribute__((visibility("hidden")));

#endif
