/*
 * dlsearch.c - the library search of dlopen()'s caller, redone on its behalf.
 *
 * dlopen() searches the calling object's DT_RUNPATH and expands its $ORIGIN: with our wrapper
 * in between, the caller would be libftrace.so. So a bare name is first resolved here along
 * the caller's own search path (dlinfo RTLD_DI_SERINFO on the caller's link map), and the real
 * dlopen() gets the full path; names it cannot resolve go to dlopen() unchanged.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tracer.h"

const char *ftr_dl_caller_search(const void *caller, const char *file, char *out, size_t len)
{
    Dl_info di;
    struct link_map *lm = NULL;
    if (!file || strchr(file, '/') || !dladdr1(caller, &di, (void **)&lm, RTLD_DL_LINKMAP) || !lm)
        return file;
    Dl_serinfo size;
    if (dlinfo(lm, RTLD_DI_SERINFOSIZE, &size) != 0 || size.dls_size == 0) return file;
    /* our own memory, never the program's allocator */
    Dl_serinfo *si =
        mmap(NULL, size.dls_size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (si == MAP_FAILED) return file;
    *si = size;
    const char *found = file;
    if (dlinfo(lm, RTLD_DI_SERINFO, si) == 0) {
        for (unsigned i = 0; i < si->dls_cnt; i++) {
            snprintf(out, len, "%s/%s", si->dls_serpath[i].dls_name, file);
            if (access(out, R_OK) == 0) {
                found = out;
                break;
            }
        }
    }
    munmap(si, size.dls_size);
    return found;
}
