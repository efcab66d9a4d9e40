/*
 * names.c - what a function is called in the report, and where its source is (names.h).
 * Below report.c: it reads the tables (tables.h) and uses util.c, and calls nothing of
 * report.c; its strings live in an arena of its own, freed by frp_names_free().
 *
 * Names come from the trace (the SITES chunks, recorded raw at record time), so the report
 * works when the binaries changed or are gone. They are demangled here (libsupc++'s
 * demangler, through patcher/filter.c's ftr_demangle(), which the filters use too) and may
 * carry the module they belong to ("name@libfoo.so").
 *
 * Module files are opened (libdwfl) only when they are needed: for source lines (--srcline)
 * and for the sites the trace has no symbol for. A file is used only when its build-id is the
 * one recorded (or when neither has one), so lines never come from another build.
 */
#include "names.h"

#include "util.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "ftr_filter.h"

enum { MOD_UNOPENED, MOD_OK, MOD_MISSING, MOD_OTHER_BUILD, MOD_NO_LINES };

struct nmod {
    const struct frp_module *m; /* the first module record with this file and build-id */
    Dwfl *dwfl;
    Dwfl_Module *mod;
    int state;
    int lines_found;
};

struct frp_names {
    enum frp_demangle mode;
    int show_module;
    struct nmod *mods;
    size_t n, cap;
    const char ***src; /* by process idx, by site: "file:line", NOSRC, or NULL (not looked up) */
    uint32_t *srcn;
    struct frp_params ***par; /* by process idx, by site: its parameters (NOPAR: unknown) */
    uint32_t *parn;
    uint32_t nprocs;
    struct frp_arena strs; /* the names and lines made here */
};

static const char NOSRC[] = "";
static struct frp_params NOPAR;

const char *frp_module_file(const char *path)
{
    const char *s = strrchr(path, '/');
    return s ? s + 1 : path;
}

/* ---- what the trace recorded of a site ---- */

const struct frp_site_meta *frp_site_meta(const struct frp_process *p, uint32_t site,
                                          const struct frp_process **owner)
{
    const struct frp_process *q = p;
    for (int first = 1; q; first = 0) {
        if (site < q->nsites && q->meta && q->meta[site].raw) {
            if (owner) *owner = q;
            return &q->meta[site];
        }
        if (first && (q->has_sites || q->after_exec)) break;
        if (!first && q->after_exec) break;
        q = q->parent;
    }
    return NULL;
}

/* ---- demangling ---- */

/* patcher/filter.c's ftr_demangle(), the one the filters use */
char *frp_demangle(const char *sym, enum frp_demangle mode)
{
    if (mode == FRP_DEMANGLE_NONE || !sym || sym[0] != '_' || sym[1] != 'Z') return NULL;
    return ftr_demangle(sym, mode == FRP_DEMANGLE_SIMPLE ? FTR_DEMANGLE_NAME : FTR_DEMANGLE_FULL);
}

/* ---- module files ---- */

static const Dwfl_Callbacks callbacks = {
    .find_elf = dwfl_build_id_find_elf,
    .find_debuginfo = dwfl_standard_find_debuginfo,
    .section_address = dwfl_offline_section_address,
};

static struct frp_names *names_of(struct frp_report *r)
{
    if (!r->names) r->names = calloc(1, sizeof *r->names);
    return r->names;
}

static int same_file(const struct frp_module *a, const struct frp_module *b)
{
    return strcmp(a->path, b->path) == 0 && a->build_id_len == b->build_id_len &&
           (!a->build_id_len || memcmp(a->build_id, b->build_id, a->build_id_len) == 0);
}

/* The opened file of a module record, or NULL when it cannot be used. */
static struct nmod *open_module(struct frp_report *r, const struct frp_module *m)
{
    struct frp_names *ns = names_of(r);
    if (!ns) return NULL;
    struct nmod *nm = NULL;
    for (size_t i = 0; i < ns->n && !nm; i++)
        if (same_file(ns->mods[i].m, m)) nm = &ns->mods[i];
    if (!nm) {
        if (frp_grow((void **)&ns->mods, &ns->cap, ns->n + 1, sizeof *ns->mods)) return NULL;
        nm = &ns->mods[ns->n++];
        memset(nm, 0, sizeof *nm);
        nm->m = m;
    }
    if (nm->state == MOD_UNOPENED) {
        nm->state = MOD_MISSING;
        struct stat sb; /* never a device or a pipe named by a damaged trace */
        if ((m->path[0] == '/' || m->path[0] == '.') && stat(m->path, &sb) == 0 &&
            S_ISREG(sb.st_mode)) {
            nm->dwfl = dwfl_begin(&callbacks);
            if (nm->dwfl) {
                nm->mod = dwfl_report_elf(nm->dwfl, frp_module_file(m->path), m->path, -1, 0, true);
                dwfl_report_end(nm->dwfl, NULL, NULL);
            }
            if (nm->mod) {
                const unsigned char *bits;
                GElf_Addr vaddr;
                int len = dwfl_module_build_id(nm->mod, &bits, &vaddr);
                if (len < 0) len = 0;
                if ((uint32_t)len != m->build_id_len ||
                    (len && memcmp(bits, m->build_id, (size_t)len) != 0))
                    nm->state = MOD_OTHER_BUILD;
                else
                    nm->state = MOD_OK;
            }
        }
    }
    return nm->state == MOD_OK || nm->state == MOD_NO_LINES ? nm : NULL;
}

/* The symbol of a site the trace has no name for (it recorded "0x..."). */
static char *lookup_symbol(struct frp_report *r, const struct frp_process *p,
                           const struct frp_site_meta *meta)
{
    if (!meta->module || meta->module > p->nmodules) return NULL;
    const struct frp_module *m = &p->modules[meta->module - 1];
    struct nmod *nm = open_module(r, m);
    if (!nm) return NULL;
    const char *s = dwfl_module_addrname(nm->mod, meta->func - m->base);
    return s ? strdup(s) : NULL;
}

int frp_report_names(struct frp_report *r, enum frp_demangle mode, int show_module)
{
    struct frp_names *ns = names_of(r);
    if (!ns) return FTR_E_NOMEM;
    ns->mode = mode;
    ns->show_module = show_module;
    for (uint32_t i = 0; i < r->nprocs; i++) { /* made again on first use */
        struct frp_process *p = r->procs[i];
        if (p->nsites) memset(p->sites, 0, (size_t)p->nsites * sizeof *p->sites);
    }
    return FTR_OK;
}

struct frp_name frp_display_name(struct frp_report *r, const struct frp_process *p, uint32_t site)
{
    const struct frp_site_meta *meta = &p->meta[site];
    struct frp_names *ns = r->names;
    enum frp_demangle mode = ns ? ns->mode : FRP_DEMANGLE_NONE;
    int show_module = ns && ns->show_module;
    char *sym = NULL;
    if (meta->raw[0] == '0' && meta->raw[1] == 'x') sym = lookup_symbol(r, p, meta);
    const char *raw = sym ? sym : meta->raw;
    char *dem = frp_demangle(raw, mode);
    const char *name = dem ? dem : raw;
    const char *mod = NULL;
    if (show_module && meta->module && meta->module <= p->nmodules)
        mod = frp_module_file(p->modules[meta->module - 1].path);
    if (name == meta->raw && !mod) return (struct frp_name){meta->raw, (uint32_t)strlen(meta->raw)};
    size_t nlen = strlen(name), mlen = mod ? strlen(mod) + 1 : 0;
    char *tmp = malloc(nlen + mlen + 1);
    const char *d = NULL;
    if (tmp) {
        memcpy(tmp, name, nlen);
        if (mod) {
            tmp[nlen] = '@';
            memcpy(tmp + nlen + 1, mod, mlen - 1);
        }
        struct frp_names *store = names_of(r);
        d = store ? frp_arena_str(&store->strs, tmp, nlen + mlen) : NULL;
    }
    free(tmp);
    free(dem);
    free(sym);
    return d ? (struct frp_name){d, (uint32_t)(nlen + mlen)} : (struct frp_name){0};
}

/* ---- source lines ---- */

/* The compile unit of addr: libdw finds it through .debug_aranges, which clang does not write
 * by default (-gdwarf-aranges); without it, each unit's ranges are asked in turn. */
static Dwarf_Die *unit_of(struct nmod *nm, Dwarf_Addr addr, Dwarf_Addr *bias)
{
    Dwarf_Die *cu = dwfl_module_addrdie(nm->mod, addr, bias);
    if (cu) return cu;
    for (cu = NULL; (cu = dwfl_module_nextcu(nm->mod, cu, bias)) != NULL;)
        if (dwarf_haspc(cu, addr - *bias) > 0) return cu;
    return NULL;
}

static const char *find_srcline(struct frp_report *r, const struct frp_process *owner,
                                const struct frp_site_meta *meta)
{
    if (!meta->module || meta->module > owner->nmodules) return NOSRC;
    const struct frp_module *m = &owner->modules[meta->module - 1];
    struct nmod *nm = open_module(r, m);
    if (!nm) return NOSRC;
    Dwarf_Addr addr = meta->func - m->base, bias = 0;
    const char *file = NULL;
    int lineno = 0;
    /* the declaration of the function whose code holds addr, else the line table's row */
    Dwarf_Die *cu = unit_of(nm, addr, &bias);
    Dwarf_Die *scopes = NULL;
    int nscopes = cu ? dwarf_getscopes(cu, addr - bias, &scopes) : 0;
    for (int i = 0; i < nscopes && !file; i++) {
        if (dwarf_tag(&scopes[i]) != DW_TAG_subprogram) continue;
        file = dwarf_decl_file(&scopes[i]);
        if (file && dwarf_decl_line(&scopes[i], &lineno) != 0) file = NULL;
        break;
    }
    free(scopes);
    if (!file) {
        Dwfl_Line *line = dwfl_module_getsrc(nm->mod, addr);
        file = line ? dwfl_lineinfo(line, NULL, &lineno, NULL, NULL, NULL) : NULL;
    }
    if (!file) {
        if (!nm->lines_found) nm->state = MOD_NO_LINES;
        return NOSRC;
    }
    if (nm->state == MOD_NO_LINES) nm->state = MOD_OK;
    nm->lines_found = 1;
    char tmp[4096];
    int n = snprintf(tmp, sizeof tmp, "%s:%d", file, lineno);
    if (n < 0) return NOSRC;
    const char *s =
        frp_arena_str(&names_of(r)->strs, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
    return s ? s : NOSRC;
}

const char *frp_srcline(struct frp_report *r, const struct frp_process *p, uint32_t site)
{
    const struct frp_process *owner = p;
    const struct frp_site_meta *meta = frp_site_meta(p, site, &owner);
    if (!meta) return NULL;
    struct frp_names *ns = names_of(r);
    if (!ns) return NULL;
    if (!ns->src) {
        ns->src = calloc(r->nprocs + 1, sizeof *ns->src);
        ns->srcn = calloc(r->nprocs + 1, sizeof *ns->srcn);
        if (!ns->src || !ns->srcn) return NULL;
        ns->nprocs = r->nprocs;
    }
    uint32_t pi = owner->idx;
    if (pi >= ns->nprocs) return NULL;
    if (site >= ns->srcn[pi]) {
        uint32_t n = owner->nsites;
        const char **a = realloc(ns->src[pi], (size_t)n * sizeof *a);
        if (!a) return NULL;
        memset(a + ns->srcn[pi], 0, (size_t)(n - ns->srcn[pi]) * sizeof *a);
        ns->src[pi] = a;
        ns->srcn[pi] = n;
    }
    const char **slot = &ns->src[pi][site];
    if (!*slot) *slot = find_srcline(r, owner, meta);
    return *slot == NOSRC ? NULL : *slot;
}

/* ---- parameters ---- */

/* The function's DIE for a site (its module file's DWARF), in *fn; @return 0, -1 if none */
static int function_die(struct frp_report *r, const struct frp_process *owner,
                        const struct frp_site_meta *meta, Dwarf_Die *fn)
{
    if (!meta->module || meta->module > owner->nmodules) return -1;
    const struct frp_module *m = &owner->modules[meta->module - 1];
    struct nmod *nm = open_module(r, m);
    if (!nm) return -1;
    Dwarf_Addr addr = meta->func - m->base, bias = 0;
    Dwarf_Die *cu = unit_of(nm, addr, &bias);
    Dwarf_Die *scopes = NULL;
    int nscopes = cu ? dwarf_getscopes(cu, addr - bias, &scopes) : 0, rc = -1;
    for (int i = 0; i < nscopes; i++) {
        if (dwarf_tag(&scopes[i]) != DW_TAG_subprogram) continue;
        *fn = scopes[i];
        rc = 0;
        break;
    }
    free(scopes);
    return rc;
}

static struct frp_params *find_params(struct frp_report *r, const struct frp_process *owner,
                                      const struct frp_site_meta *meta)
{
    Dwarf_Die fn, c;
    if (function_die(r, owner, meta, &fn)) return &NOPAR;
    struct frp_params *ps = calloc(1, sizeof *ps);
    if (!ps) return &NOPAR;
    ps->fn = fn;
    if (dwarf_child(&fn, &c) != 0) return ps;
    do {
        if (dwarf_tag(&c) != DW_TAG_formal_parameter) continue;
        if (ps->n == FRP_PARAMS_MAX) break;
        Dwarf_Attribute a;
        const char *s = dwarf_formstring(dwarf_attr_integrate(&c, DW_AT_name, &a));
        ps->die[++ps->n] = c;
        ps->name[ps->n] = s ? frp_arena_str(&names_of(r)->strs, s, strlen(s)) : NULL;
    } while (dwarf_siblingof(&c, &c) == 0);
    return ps;
}

const struct frp_params *frp_params(struct frp_report *r, const struct frp_process *p,
                                    uint32_t site)
{
    const struct frp_process *owner = p;
    const struct frp_site_meta *meta = frp_site_meta(p, site, &owner);
    struct frp_names *ns = names_of(r);
    if (!meta || !ns) return NULL;
    if (!ns->par) {
        ns->par = calloc(r->nprocs + 1, sizeof *ns->par);
        ns->parn = calloc(r->nprocs + 1, sizeof *ns->parn);
        if (!ns->par || !ns->parn) return NULL;
    }
    uint32_t pi = owner->idx;
    if (pi > r->nprocs) return NULL;
    if (site >= ns->parn[pi]) {
        uint32_t n = owner->nsites > site ? owner->nsites : site + 1;
        struct frp_params **a = realloc(ns->par[pi], (size_t)n * sizeof *a);
        if (!a) return NULL;
        memset(a + ns->parn[pi], 0, (size_t)(n - ns->parn[pi]) * sizeof *a);
        ns->par[pi] = a;
        ns->parn[pi] = n;
    }
    struct frp_params **slot = &ns->par[pi][site];
    if (!*slot) *slot = find_params(r, owner, meta);
    return *slot == &NOPAR ? NULL : *slot;
}

const char *frp_enumerator(const struct frp_params *ps, unsigned k, int64_t v)
{
    if (!ps || k > ps->n) return NULL;
    Dwarf_Attribute a;
    Dwarf_Die t, e;
    Dwarf_Die *of = k ? (Dwarf_Die *)&ps->die[k] : (Dwarf_Die *)&ps->fn;
    if (!dwarf_formref_die(dwarf_attr_integrate(of, DW_AT_type, &a), &t)) return NULL;
    if (dwarf_peel_type(&t, &t) != 0 || dwarf_tag(&t) != DW_TAG_enumeration_type) return NULL;
    if (dwarf_child(&t, &e) != 0) return NULL;
    do {
        Dwarf_Sword sv;
        if (dwarf_tag(&e) == DW_TAG_enumerator &&
            dwarf_formsdata(dwarf_attr(&e, DW_AT_const_value, &a), &sv) == 0 && sv == v)
            return dwarf_diename(&e);
    } while (dwarf_siblingof(&e, &e) == 0);
    return NULL;
}

void frp_names_warnings(struct frp_report *r, FILE *f)
{
    struct frp_names *ns = r->names;
    for (size_t i = 0; ns && i < ns->n; i++) {
        const struct nmod *nm = &ns->mods[i];
        const char *why = nm->state == MOD_MISSING       ? "file not found"
                          : nm->state == MOD_OTHER_BUILD ? "the file is another build (build-id "
                                                           "differs from the trace's)"
                          : nm->state == MOD_NO_LINES    ? "no DWARF line information (build "
                                                           "with -g)"
                                                         : NULL;
        if (why) fprintf(f, "ftrace-report: no source lines for %s: %s\n", nm->m->path, why);
    }
}

void frp_names_free(struct frp_report *r)
{
    struct frp_names *ns = r->names;
    if (!ns) return;
    for (size_t i = 0; i < ns->n; i++)
        if (ns->mods[i].dwfl) dwfl_end(ns->mods[i].dwfl);
    for (uint32_t i = 0; ns->src && i < ns->nprocs; i++)
        free(ns->src[i]);
    for (uint32_t i = 0; ns->par && i <= r->nprocs; i++) {
        for (uint32_t k = 0; k < ns->parn[i]; k++)
            if (ns->par[i][k] != &NOPAR) free(ns->par[i][k]);
        free(ns->par[i]);
    }
    free(ns->par);
    free(ns->parn);
    free(ns->src);
    free(ns->srcn);
    free(ns->mods);
    frp_arena_free(&ns->strs);
    free(ns);
    r->names = NULL;
}
