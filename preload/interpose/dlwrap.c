/*
 * dlwrap.c - dlopen() and dlclose(), interposed: a library loaded later is patched before
 * dlopen() returns, and one unloaded is forgotten before dlclose() returns.
 *
 * Both hold the module registry's lock (recursive, like the loader's own lock, which the real
 * calls hold around the same work: constructors and destructors may dlopen again) across the
 * real call and the rescan. A re-patch (ftrace-ctl) takes the same lock, so it never compares
 * or writes text of a library that is being unmapped, nor mistakes a newly mapped library's
 * bytes at the same address for the old one's.
 *
 * dlmopen() into the base namespace is dlopen(). A library it loads into a namespace of its own
 * (LM_ID_NEWLM, or one made so before) is not traced: it has its own copy of the C library and
 * of everything else, where none of our wrappers are (longjmp, the unwinder, exit, pthread
 * keys...), and dl_iterate_phdr() never shows it to the caller's namespace, nor dlclose() its
 * end. Hooking its sites would leave its returns to unwinders and exits that know nothing of
 * the hooks; the program is told once per instrumented library instead.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>

#include "ftr_patcher.h"
#include "tracer.h"

typedef void *(*dlopen_fn)(const char *, int);
typedef int (*dlclose_fn)(void *);
static dlopen_fn real_dlopen;
static dlclose_fn real_dlclose;

static void *open_base(const char *file, int mode, const void *caller)
{
    if (!real_dlopen) real_dlopen = (dlopen_fn)dlsym(RTLD_NEXT, "dlopen");
    if (!real_dlclose) real_dlclose = (dlclose_fn)dlsym(RTLD_NEXT, "dlclose");
    if (!real_dlopen) return NULL;
    char path[4096];
    ftr_modules_lock(1);
    unsigned threads = ftr_threads_made();
    void *h = NULL;
    if (file && !strchr(file, '/'))
        h = real_dlopen(file, mode | RTLD_NOLOAD); /* already loaded: no search happens */
    if (h && !(mode & RTLD_NOLOAD)) {
        real_dlclose(h); /* undo the NOLOAD reference; the real open takes its own */
        h = real_dlopen(file, mode);
    } else if (!h) {
        h = real_dlopen(ftr_dl_caller_search(caller, file, path, sizeof path), mode);
        if (!h && file && !strchr(file, '/'))
            h = real_dlopen(file, mode); /* same error message as without us */
    }
    if (h && !(mode & RTLD_NOLOAD)) {
        ftr_modules_rescan(ftr_threads_made() == threads);
        ftr_libunwind_resolve(); /* a library linked with -lunwind, opened RTLD_GLOBAL */
        ftr_unwind_fde_resolve();
    }
    ftr_modules_lock(0);
    return h;
}

__attribute__((visibility("default"))) void *dlopen(const char *file, int mode)
{
    return open_base(file, mode, __builtin_return_address(0));
}

/* The instrumented modules of the namespace that h was loaded into, each named once (each
 * module looked at once: said[] holds those without sites too). */
static void say_untraced(void *h)
{
    static char *said[256];
    static unsigned nsaid;
    struct link_map *lm = NULL;
    if (!ftr_g.ready || dlinfo(h, RTLD_DI_LINKMAP, &lm) != 0 || !lm) return;
    while (lm->l_prev)
        lm = lm->l_prev;
    for (; lm; lm = lm->l_next) {
        const char *name = lm->l_name;
        unsigned k = 0;
        while (k < nsaid && strcmp(said[k], name ? name : "") != 0)
            k++;
        if (!name || !*name || k < nsaid) continue;
        struct ftr_module m;
        char err[256];
        if (ftr_module_scan(name, lm->l_addr, NULL, 0, &m, err, sizeof err) < 0) continue;
        size_t nsites = m.nsites;
        ftr_module_free(&m);
        if (nsaid < sizeof said / sizeof *said && (said[nsaid] = strdup(name))) nsaid++;
        if (nsites)
            ftr_msg("%s was loaded by dlmopen() into a namespace of its own: its functions are "
                    "not traced",
                    name);
    }
}

typedef void *(*dlmopen_fn)(Lmid_t, const char *, int);

__attribute__((visibility("default"))) void *dlmopen(Lmid_t lmid, const char *file, int mode)
{
    const void *caller = __builtin_return_address(0);
    if (lmid == LM_ID_BASE) return open_base(file, mode, caller);
    static dlmopen_fn real_dlmopen;
    if (!real_dlmopen) real_dlmopen = (dlmopen_fn)dlsym(RTLD_NEXT, "dlmopen");
    if (!real_dlmopen) return NULL;
    char path[4096];
    ftr_modules_lock(1);
    void *h = real_dlmopen(lmid, ftr_dl_caller_search(caller, file, path, sizeof path), mode);
    if (!h && file && !strchr(file, '/'))
        h = real_dlmopen(lmid, file, mode); /* same error message as without us */
    if (h) say_untraced(h);
    ftr_modules_lock(0);
    return h;
}

__attribute__((visibility("default"))) int dlclose(void *handle)
{
    if (!real_dlclose) real_dlclose = (dlclose_fn)dlsym(RTLD_NEXT, "dlclose");
    if (!real_dlclose) return -1;
    ftr_modules_lock(1);
    int rc = real_dlclose(handle);
    if (rc == 0) ftr_modules_rescan(0);
    ftr_modules_lock(0);
    return rc;
}
