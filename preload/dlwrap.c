/*
 * dlwrap.c - dlopen() and dlclose(), interposed: a library loaded later is patched before
 * dlopen() returns, and one unloaded is forgotten before dlclose() returns.
 *
 * Both hold the module registry's lock (recursive, like the loader's own lock, which the real
 * calls hold around the same work: constructors and destructors may dlopen again) across the
 * real call and the rescan. A re-patch (ftrace-ctl) takes the same lock, so it never compares
 * or writes text of a library that is being unmapped, nor mistakes a newly mapped library's
 * bytes at the same address for the old one's.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <string.h>

#include "tracer.h"

typedef void *(*dlopen_fn)(const char *, int);
typedef int (*dlclose_fn)(void *);
static dlopen_fn real_dlopen;
static dlclose_fn real_dlclose;

__attribute__((visibility("default"))) void *dlopen(const char *file, int mode)
{
    if (!real_dlopen) real_dlopen = (dlopen_fn)dlsym(RTLD_NEXT, "dlopen");
    if (!real_dlclose) real_dlclose = (dlclose_fn)dlsym(RTLD_NEXT, "dlclose");
    if (!real_dlopen) return NULL;
    const void *caller = __builtin_return_address(0);
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
