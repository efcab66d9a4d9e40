/*
 * libcalls.h - library calls (uftrace's default): a traced module's calls of other modules'
 * functions through its GOT, hooked by giving each slot the address of a stub of ours.
 * Private to preload/; modules.c keeps one struct ftr_libcalls per traced module and calls
 * these under its lock, never from a hook.
 */
#ifndef FTR_LIBCALLS_H
#define FTR_LIBCALLS_H

#include <stddef.h>
#include <stdint.h>

struct ftr_site;
struct ftr_module;

struct ftr_libcalls {
    struct ftr_site *v; /* one per hooked slot: addr = the slot, func = the function, name, index,
                           libcall = 1, patched = FTR_SITE_CALL while the slot holds the stub */
    char **lib;         /* by call: the path of the module that defines the function (filters) */
    uint64_t *found;    /* by call: what its slot held when it was found */
    size_t n;
    uint8_t *stubs; /* the stubs (FTR_STUB_SIZE each, after a head that points them at
                       ftr_tramp_libcall) */
    size_t stubs_len;
    uint64_t ro_lo, ro_hi; /* the module's pages ld.so made read-only (PT_GNU_RELRO) */
    char *names;
    const char *module; /* the calling module's path (its struct ftr_module's) */
};

/* FTRACE_LIBCALL (default on): are library calls hooked at all? */
int ftr_libcalls_init(void);
int ftr_libcalls_enabled(void);
/* ftrace-ctl PID libcall on|off: every module's slots re-applied by the caller */
void ftr_libcalls_enable(int on);

/* The library calls of module m, which is traced, found and given stubs and site indices from
 * *next_site on; traced_at(addr) says whether a traced module holds addr (its functions have
 * sites of their own: not hooked twice). @return how many (0: none, or not possible: said). */
size_t ftr_libcalls_scan(const struct ftr_module *m, int is_main, uint32_t *next_site,
                         int (*traced_at)(uint64_t), struct ftr_libcalls *out);
/* Each slot given the stub or its function, as wanted (ftr_site_wanted(), the library as the
 * call's module); a slot that no longer holds what the tracer left there (the program hooked
 * it: plthook & co) is the program's and left alone, and a page's protection is put back as it
 * was. */
void ftr_libcalls_apply(struct ftr_libcalls *lc);
/* The module is gone (its GOT with it): forget its calls; the stubs are unmapped when nothing
 * can reach them any more (text_gone). */
void ftr_libcalls_free(struct ftr_libcalls *lc, int text_gone);
/* calls traced now, in lc */
size_t ftr_libcalls_traced(const struct ftr_libcalls *lc);

#endif
