/*
 * values.c - which sites record argument and return values (values.h), from FTRACE_ARGS and
 * FTRACE_RETVAL.
 *
 * A site's program is the merge of the last -A spec and the last -R spec that select its
 * function. Equal programs are shared; the table of programs only grows (a hook may be reading
 * any of them) and is bounded: a site past FTR_VALPROG_MAX different programs records none,
 * said once on stderr. Runs under the modules' lock (patching), never in a hook.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "ftr_env.h"
#include "ftr_patcher.h"
#include "ftr_values.h"
#include "tracer.h"
#include "values.h"

const struct ftr_valprog *ftr_valprogs;
uint16_t *ftr_site_prog;

static struct ftr_valprog *progs; /* [0] unused: index 0 is "none" */
static unsigned nprogs = 1;
static int said_full;
static struct ftr_argspecs arg_specs, ret_specs;

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
    if (!arg_specs.n && !ret_specs.n) return 0;
    progs = ftr_mmap_zero(FTR_VALPROG_MAX * sizeof *progs);
    ftr_site_prog = mmap(NULL, FTR_SITE_FLAGS_MAX * sizeof *ftr_site_prog, PROT_READ | PROT_WRITE,
                         MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (!progs || ftr_site_prog == MAP_FAILED) {
        ftr_site_prog = NULL;
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    ftr_valprogs = progs;
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

unsigned ftr_values_site(const char *module, int is_main, const struct ftr_site *s,
                         const char *demangled)
{
    if (!ftr_site_prog || s->index >= FTR_SITE_FLAGS_MAX) return 0;
    const struct ftr_argspec *a =
        ftr_argspecs_match(&arg_specs, module, is_main, s->name, demangled);
    const struct ftr_argspec *r =
        ftr_argspecs_match(&ret_specs, module, is_main, s->name, demangled);
    struct ftr_valprog p;
    memset(&p, 0, sizeof p); /* compared bytewise: no stray padding */
    if (a && a->from_dwarf) raw_args(&p);
    for (unsigned i = 0; a && i < a->nitems; i++) {
        if (a->items[i].src == FTR_AS_RETVAL)
            p.ret = a->items[i], p.has_ret = 1;
        else
            p.args[p.nargs++] = a->items[i];
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
