/*
 * names.h - what a site is called and where its source is (names.c): what the trace recorded
 * of a site, display names (demangling, module suffix), symbols and source lines from the
 * module files (libdw). Uses util.h; report.c uses it.
 */
#ifndef FTR_REPORT_NAMES_H
#define FTR_REPORT_NAMES_H

#include <elfutils/libdw.h>
#include <stdint.h>
#include <stdio.h>

#include "tables.h"

#ifdef __cplusplus
extern "C" {
#endif

enum frp_demangle { FRP_DEMANGLE_SIMPLE, FRP_DEMANGLE_FULL, FRP_DEMANGLE_NONE };
/*! frp_report_names() : how frp_site_name() names sites from now on: demangled (simple: without
 *  the parameter list and the return type; full: as the demangler writes it; none: raw),
 *  followed by "@module" (the module's file name) when show_module. Sites the trace recorded
 *  without a name are looked up in their module's symbols when the module file is present
 *  and has the recorded build-id. Names are made on first use (a big C++ trace may have
 *  hundreds of thousands of sites, most never called). Without a call, the raw names.
 *  @return FTR_OK or FTR_E_NOMEM */
int frp_report_names(struct frp_report *r, enum frp_demangle mode, int show_module);
/*! frp_display_name() : the display name of a site of p's own SITES records, as set by
 *  frp_report_names() (internal: frp_site_name() caches it). {NULL} when out of memory. */
struct frp_name frp_display_name(struct frp_report *r, const struct frp_process *p, uint32_t site);
/*! frp_demangle() : the demangled form of a C++ symbol (malloc'ed), NULL when sym is not a
 *  mangled name or mode is FRP_DEMANGLE_NONE. */
char *frp_demangle(const char *sym, enum frp_demangle mode);
/*! frp_srcline() : "file:line" of the function of a site, from the DWARF line table of its
 *  module file when present with the recorded build-id. Cached; @return NULL when unknown. */
const char *frp_srcline(struct frp_report *r, const struct frp_process *p, uint32_t site);
/* A function's parameters as its module file's DWARF declares them (1-based: `this` first) */
#define FRP_PARAMS_MAX 32
struct frp_params {
    uint32_t n;
    const char *name[FRP_PARAMS_MAX + 1]; /* [k]: parameter k's name (NULL: unnamed) */
    Dwarf_Die fn, die[FRP_PARAMS_MAX + 1];
};
/*! frp_params() : the parameters of a site's function (cached). @return NULL when unknown (no
 *  file of that build, no DWARF) */
const struct frp_params *frp_params(struct frp_report *r, const struct frp_process *p,
                                    uint32_t site);
/*! frp_enumerator() : the name of value v of parameter k's type (k = 0: the return type's),
 *  when that type is an enumeration that names it; else NULL */
const char *frp_enumerator(const struct frp_params *ps, unsigned k, int64_t v);
/*! frp_names_warnings() : writes, once per module, why source lines are missing (file gone,
 *  build-id differs) to f. */
void frp_names_warnings(struct frp_report *r, FILE *f);
void frp_names_free(struct frp_report *r);
/*! frp_module_file() : the file name of a module path (after the last '/'). */
const char *frp_module_file(const char *path);

/*! frp_site_meta() : what the trace recorded of a site of p, looking through the parents of a
 *  forked child that wrote no sites of its own; *owner receives the process whose tables hold
 *  it (its modules[] are what meta->module indexes). @return NULL when nothing is known. */
const struct frp_site_meta *frp_site_meta(const struct frp_process *p, uint32_t site,
                                          const struct frp_process **owner);

#ifdef __cplusplus
}
#endif
#endif /* FTR_REPORT_NAMES_H */
