/*
 * values.c - which sites record argument and return values (values.h), from FTRACE_ARGS and
 * FTRACE_RETVAL.
 *
 * A site's program is the merge of the last -A spec and the last -R spec that select its
 * function. Equal programs are shared; the table of programs only grows (a hook may be reading
 * any of them) and is bounded: a site past FTR_VALPROG_MAX different programs records none,
 * said once on stderr. Runs under the modules' lock (patching), never in a hook.
 *
 * A spec without an item list takes the function's parameters and return type from its
 * module's DWARF (patcher/dwarf_params.c): read once per module, when some such spec exists,
 * and kept while the module is (a module loaded later over its range replaces it). A function
 * without DWARF gets the six integer argument registers in hex, and retval/d.
 */
#include <fcntl.h>
#include <libelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>
#include <sys/mman.h>

#include "ftr_env.h"
#include "ftr_patcher.h"
#include "ftr_values.h"
#include "libc_protos.h"
#include "tracer.h"
#include "values.h"

const struct ftr_valprog *ftr_valprogs;
uint16_t *ftr_site_prog;

static struct ftr_valprog *progs; /* [0] unused: index 0 is "none" */
static unsigned nprogs = 1;
static int said_full;
static struct ftr_argspecs arg_specs, ret_specs;
static uint8_t *arg_hit, *ret_hit; /* by spec: it selected some function */
static int want_dwarf;             /* some spec has no item list, or --auto-args */
static int auto_args; /* FTRACE_AUTO_ARGS: every function with DWARF, as if -A and -R named it */

/* the DWARF descriptions of the modules read so far */
struct dwmod {
    uint64_t lo, hi, base;
    struct ftr_dw_params p;
};
static struct dwmod *dwmods;
static size_t ndwmods;

/* The tables the hooks read, once: @return 0, or -1 (no memory) */
static int tables(void)
{
    if (ftr_site_prog) return 0;
    progs = ftr_mmap_zero(FTR_VALPROG_MAX * sizeof *progs);
    void *sp = mmap(NULL, FTR_SITE_FLAGS_MAX * sizeof *ftr_site_prog, PROT_READ | PROT_WRITE,
                    MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (!progs || sp == MAP_FAILED) return -1;
    ftr_valprogs = progs;
    __atomic_store_n(&ftr_site_prog, (uint16_t *)sp, __ATOMIC_RELEASE);
    return 0;
}

static int specs_want_dwarf(void)
{
    int w = auto_args;
    for (size_t i = 0; i < arg_specs.n; i++)
        w |= arg_specs.v[i].from_dwarf;
    for (size_t i = 0; i < ret_specs.n; i++)
        w |= ret_specs.v[i].from_dwarf;
    return w;
}

static void reset_hits(void)
{
    free(arg_hit);
    free(ret_hit);
    arg_hit = calloc(arg_specs.n + 1, 1);
    ret_hit = calloc(ret_specs.n + 1, 1);
}

int ftr_values_init(char *err, size_t errlen)
{
    char e[300];
    const char *a = getenv(ftr_env_name(FTR_ENV_ARGS)), *r = getenv(ftr_env_name(FTR_ENV_RETVAL));
    if (ftr_argspecs_parse(a, 0, &arg_specs, e, sizeof e) < 0) {
        snprintf(err, errlen, "%s: %s", ftr_env_name(FTR_ENV_ARGS), e);
        return -1;
    }
    if (ftr_argspecs_parse(r, 1, &ret_specs, e, sizeof e) < 0) {
        snprintf(err, errlen, "%s: %s", ftr_env_name(FTR_ENV_RETVAL), e);
        return -1;
    }
    const char *au = getenv(ftr_env_name(FTR_ENV_AUTO_ARGS));
    auto_args = au && *au && strcmp(au, "0") != 0;
    if (!arg_specs.n && !ret_specs.n && !auto_args) return 0;
    want_dwarf = specs_want_dwarf();
    reset_hits();
    if (tables() < 0) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    return 1;
}

/* The program for p: an equal one already published, or a new one. @return its index, 0 when
 * the table is full */
static unsigned intern(const struct ftr_valprog *p)
{
    for (unsigned i = 1; i < nprogs; i++)
        if (!memcmp(&progs[i], p, sizeof *p)) return i;
    if (nprogs == FTR_VALPROG_MAX) {
        if (!said_full++)
            ftr_msg("more than %d different argument specs: further functions record none",
                    FTR_VALPROG_MAX - 1);
        return 0;
    }
    progs[nprogs] = *p;
    __atomic_thread_fence(__ATOMIC_RELEASE); /* complete before a site's index names it */
    return nprogs++;
}

/* Without an item list and (for now) without DWARF types: the six integer argument registers,
 * in hex */
static void raw_args(struct ftr_valprog *p)
{
    p->nargs = 6;
    for (unsigned i = 0; i < 6; i++)
        p->args[i] = (struct ftr_argitem){FTR_AS_ARG, (uint8_t)(i + 1), FTR_VF_HEX, 8};
}

void ftr_values_module(const struct ftr_module *m)
{
    if (!want_dwarf || !m->path || !m->nsites) return;
    for (size_t i = 0; i < ndwmods;) { /* a module that was unloaded from this range */
        if (dwmods[i].lo < m->hi && m->lo < dwmods[i].hi) {
            ftr_dwarf_params_free(&dwmods[i].p);
            dwmods[i] = dwmods[--ndwmods];
        } else {
            i++;
        }
    }
    int fd = open(m->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    struct dwmod d = {m->lo, m->hi, m->base, {0}};
    char err[200];
    Elf *elf = elf_version(EV_CURRENT) != EV_NONE ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
    int ok =
        elf && ftr_module_same_build(elf, m) && ftr_dwarf_params(elf, &d.p, err, sizeof err) == 0;
    if (elf) elf_end(elf);
    close(fd);
    if (!ok) return;
    struct dwmod *n = realloc(dwmods, (ndwmods + 1) * sizeof *n);
    if (!n) {
        ftr_dwarf_params_free(&d.p);
        return;
    }
    dwmods = n;
    dwmods[ndwmods++] = d;
}

/* A library call's description: the libc table's spec that selects it, or NULL */
static const struct ftr_argspec *libc_proto(const struct ftr_site *s)
{
    static struct ftr_argspecs protos;
    static int parsed;
    if (!parsed) {
        char err[200];
        parsed = 1;
        if (ftr_argspecs_parse(ftr_libc_protos(), 0, &protos, err, sizeof err) < 0)
            ftr_msg("internal: the libc prototype table: %s", err);
    }
    return ftr_argspecs_match(&protos, NULL, 0, s->name, NULL);
}

/* The arguments (args) and/or the return value (ret) of a library call's description */
static void proto_items(const struct ftr_argspec *d, int args, int ret, struct ftr_valprog *p)
{
    if (args) p->nargs = 0;
    for (unsigned i = 0; d && i < d->nitems; i++) {
        if (d->items[i].src == FTR_AS_RETVAL) {
            if (ret) p->ret = d->items[i], p->has_ret = 1;
        } else if (args && p->nargs < FTR_ARGSPEC_MAX) {
            p->args[p->nargs++] = d->items[i];
        }
    }
}

static const struct ftr_dw_func *dwarf_func(const struct ftr_site *s)
{
    if (s->libcall) return NULL;
    for (size_t i = 0; i < ndwmods; i++)
        if (s->func >= dwmods[i].lo && s->func < dwmods[i].hi)
            return ftr_dwarf_params_find(&dwmods[i].p, s->func - dwmods[i].base);
    return NULL;
}

/* One DWARF parameter (number k, 0: the return value) as items: @return how many */
static unsigned dwarf_items(const struct ftr_dw_param *p, unsigned k, struct ftr_argitem *out,
                            unsigned room)
{
    static const uint8_t fmt[] = {[FTR_PC_SINT] = FTR_VF_SIGNED, [FTR_PC_UINT] = FTR_VF_UNSIGNED,
                                  [FTR_PC_BOOL] = FTR_VF_BOOL,   [FTR_PC_CHAR] = FTR_VF_CHAR,
                                  [FTR_PC_ENUM] = FTR_VF_ENUM,   [FTR_PC_PTR] = FTR_VF_PTR,
                                  [FTR_PC_STR] = FTR_VF_STR,     [FTR_PC_FLOAT] = FTR_VF_FLOAT,
                                  [FTR_PC_STRUCT] = FTR_VF_HEX};
    struct ftr_dw_part one = {p->loc, p->n, p->size}, parts[2];
    unsigned np = 1;
    if (p->cls == FTR_PC_STRUCT || p->nparts) {
        np = p->nparts < 2 ? p->nparts : 2;
        for (unsigned i = 0; i < np; i++)
            parts[i] = p->parts[i];
    } else {
        parts[0] = one;
    }
    if (p->cls == FTR_PC_NONE || p->cls >= sizeof fmt || np > room) return 0;
    unsigned n = 0;
    for (unsigned i = 0; i < np; i++) {
        const struct ftr_dw_part *q = &parts[i];
        struct ftr_argitem it = {0};
        it.fmt = p->cls == FTR_PC_STRUCT ? FTR_VF_HEX : fmt[p->cls];
        it.size = q->size >= 8 ? 8 : q->size >= 4 ? 4 : q->size >= 2 ? 2 : 1;
        if (it.fmt == FTR_VF_STR || it.fmt == FTR_VF_PTR) it.size = 8;
        it.label = (uint8_t)(FTR_VAL_DWARF | k);
        if (k == 0) {
            if (q->loc != FTR_PL_INT && q->loc != FTR_PL_SSE) return 0;
            if (q->n != 0) return n; /* rdx / xmm1: not recorded */
            it.src = FTR_AS_RETVAL;
            if (q->loc == FTR_PL_SSE) { /* xmm0: n = 1 says so whatever the format */
                it.n = 1;
                it.fmt = p->cls == FTR_PC_STRUCT ? FTR_VF_HEX : FTR_VF_FLOAT;
            }
        } else if (q->loc == FTR_PL_INT && q->n < 6) {
            it.src = FTR_AS_ARG;
            it.n = (uint8_t)(q->n + 1);
        } else if (q->loc == FTR_PL_SSE && q->n < 8) {
            it.src = FTR_AS_FPARG;
            it.n = (uint8_t)(q->n + 1);
            /* an SSE part of a struct holds a double or two floats: its bits */
            it.fmt = p->cls == FTR_PC_STRUCT ? FTR_VF_HEX : FTR_VF_FLOAT;
        } else if (q->loc == FTR_PL_STACK && q->n >= 8 && q->n % 8 == 0 && 6 + q->n / 8 <= 32) {
            it.src = FTR_AS_ARG;
            it.n = (uint8_t)(6 + q->n / 8);
        } else {
            return n;
        }
        if (it.fmt == FTR_VF_FLOAT && it.size != 4) it.size = 8;
        if (p->cls == FTR_PC_STRUCT) it.size = 8;
        out[n++] = it;
    }
    return n;
}

static void dwarf_args(const struct ftr_dw_func *f, struct ftr_valprog *p)
{
    p->nargs = 0;
    for (unsigned i = 0; i < f->nparams && p->nargs < FTR_ARGSPEC_MAX; i++) {
        unsigned k =
            dwarf_items(&f->params[i], i + 1, p->args + p->nargs, FTR_ARGSPEC_MAX - p->nargs);
        if (ftr_argitems_bytes(p->args, p->nargs + k) > FTR_VALUES_MAX_BYTES) break;
        p->nargs += (uint8_t)k;
    }
}

unsigned ftr_values_site(const char *module, int is_main, const struct ftr_site *s,
                         const char *demangled)
{
    if (!ftr_site_prog || s->index >= FTR_SITE_FLAGS_MAX) return 0;
    const struct ftr_argspec *a =
        ftr_argspecs_match(&arg_specs, module, is_main, s->name, demangled);
    const struct ftr_argspec *r =
        ftr_argspecs_match(&ret_specs, module, is_main, s->name, demangled);
    if (a && arg_hit) arg_hit[a - arg_specs.v] = 1;
    if (r && ret_hit) ret_hit[r - ret_specs.v] = 1;
    struct ftr_valprog p;
    memset(&p, 0, sizeof p); /* compared bytewise: no stray padding */
    const struct ftr_dw_func *f =
        (a && a->from_dwarf) || (r && r->from_dwarf) || (auto_args && !a && !r) ? dwarf_func(s)
                                                                                : NULL;
    const struct ftr_argspec *d =
        s->libcall && ((a && a->from_dwarf) || (r && r->from_dwarf) || (auto_args && !a && !r))
            ? libc_proto(s)
            : NULL;
    if (auto_args && !a && !r && s->libcall) {
        if (!d) return 0;
        proto_items(d, 1, 1, &p);
    } else if (auto_args && !a && !r) { /* a spec that names the function goes before it */
        if (!f) return 0;
        dwarf_args(f, &p);
        struct ftr_argitem it;
        p.has_ret = dwarf_items(&f->ret, 0, &it, 1) == 1;
        if (p.has_ret) p.ret = it;
    }
    if (a && a->from_dwarf) {
        if (f)
            dwarf_args(f, &p);
        else if (d)
            proto_items(d, 1, 0, &p);
        else
            raw_args(&p);
    }
    for (unsigned i = 0; a && i < a->nitems; i++) {
        if (a->items[i].src == FTR_AS_RETVAL)
            p.ret = a->items[i], p.has_ret = 1;
        else
            p.args[p.nargs++] = a->items[i];
    }
    if (r && r->from_dwarf && d) { /* a library call's, from the table */
        proto_items(d, 0, 1, &p);
        r = NULL;
    }
    if (r && r->from_dwarf && f) { /* the return type (void: none) */
        struct ftr_argitem it;
        p.has_ret = dwarf_items(&f->ret, 0, &it, 1) == 1;
        if (p.has_ret) p.ret = it;
        r = NULL;
    }
    for (unsigned i = 0; r && i < r->nitems; i++) {
        if (r->items[i].src == FTR_AS_RETVAL)
            p.ret = r->items[i], p.has_ret = 1;
        else if (p.nargs < FTR_ARGSPEC_MAX)
            p.args[p.nargs++] = r->items[i];
    }
    unsigned idx = p.nargs || p.has_ret ? intern(&p) : 0;
    __atomic_store_n(&ftr_site_prog[s->index], (uint16_t)idx, __ATOMIC_RELEASE);
    if (!idx) return 0;
    return (p.nargs ? FTR_SF_ARGS : 0) | (p.has_ret ? FTR_SF_RETVAL : 0);
}

/* The first spec of list that selected no function, or NULL */
static const char *unmatched(const struct ftr_argspecs *l, const uint8_t *hit)
{
    for (size_t i = 0; hit && i < l->n; i++)
        if (!hit[i]) return l->v[i].text;
    return NULL;
}

void ftr_values_say_unmatched(void)
{
    const char *a = unmatched(&arg_specs, arg_hit), *r = unmatched(&ret_specs, ret_hit);
    if (a) ftr_msg("argument spec '%s' (-A) matches none of the functions loaded", a);
    if (r) ftr_msg("return value spec '%s' (-R) matches none of the functions loaded", r);
}

int ftr_values_set(int retval, const char *text, char *err, size_t errlen)
{
    char e[300];
    struct ftr_argspecs n = {0};
    if (ftr_argspecs_parse(text, retval, &n, e, sizeof e) < 0) {
        ftr_argspecs_free(&n);
        snprintf(err, errlen, "%s", e);
        return -1;
    }
    if (tables() < 0) {
        ftr_argspecs_free(&n);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    ftr_modules_lock(1);
    struct ftr_argspecs *cur = retval ? &ret_specs : &arg_specs, old = *cur;
    *cur = n;
    reset_hits();
    int dw = specs_want_dwarf();
    if (dw && !want_dwarf) {
        want_dwarf = 1;
        ftr_modules_values_refresh(); /* the loaded modules' DWARF, now needed */
    }
    ftr_hot.site_flags_used = 1; /* the hooks read the site flags from now on */
    int rc = ftr_modules_patch(err, errlen);
    const char *none = rc == 0 ? unmatched(cur, retval ? ret_hit : arg_hit) : NULL;
    if (none) {
        snprintf(err, errlen, "no function matches the %s spec '%s'; the specs in force stay",
                 retval ? "return value" : "argument", none);
        *cur = old;
        old = n;
        reset_hits();
        ftr_modules_patch(e, sizeof e);
        rc = -1;
    } else if (rc == 0) {
        ftr_writer_mark(retval ? FTR_MARK_RETVAL : FTR_MARK_ARGS, ftr_rdtsc(), 0, text ? text : "");
    }
    ftr_argspecs_free(&old);
    ftr_modules_lock(0);
    return rc;
}
