/*
 * dlsearch.c - the library search of dlopen()'s caller, redone on its behalf.
 *
 * dlopen() searches the calling object's DT_RUNPATH (or DT_RPATH) and expands $ORIGIN to the
 * calling object's directory: with our wrapper in between, the caller would be libftrace.so.
 * So a bare name is first resolved here along the caller's own search path (dlinfo
 * RTLD_DI_SERINFO on the caller's link map), a name with a '/' gets its $ORIGIN / ${ORIGIN}
 * tokens replaced by the caller's directory, and the real dlopen() gets the result; names
 * this cannot resolve go to dlopen() unchanged. $LIB and $PLATFORM are left to the real
 * dlopen(): they are the same whoever calls. No allocation: this runs in the program.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdio.h>
#include <string.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tracer.h"

/* The length of the token "ORIGIN" or "{ORIGIN}" at s (just after a '$'), else 0: as glibc's
 * is_dst(), "$ORIGINX" or "$ORIGIN_1" is no token */
static size_t origin_token(const char *s)
{
    int curly = *s == '{';
    if (strncmp(s + curly, "ORIGIN", 6) != 0) return 0;
    char c = s[curly + 6];
    if (curly) return c == '}' ? 8 : 0;
    int ident =
        (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_';
    return ident ? 0 : 6;
}

/* The directory $ORIGIN stands for in what lm opens (glibc's l_origin), into buf: the
 * executable's (/proc/self/exe) for the program (empty l_name) or an unknown caller; else
 * the directory of the library's name as loaded (a relative one taken from the working
 * directory, as glibc does when it loads it). Its length; 0: unknown. */
static size_t origin_of(const struct link_map *lm, char *buf, size_t len)
{
    size_t n = 0;
    if (!lm || !lm->l_name || !lm->l_name[0]) {
        ssize_t r = readlink("/proc/self/exe", buf, len);
        if (r <= 0 || (size_t)r >= len || buf[0] != '/') return 0;
        n = (size_t)r;
    } else {
        size_t l = strlen(lm->l_name);
        if (lm->l_name[0] != '/') {
            if (!getcwd(buf, len)) return 0;
            n = strlen(buf);
            if (n > 0 && buf[n - 1] != '/' && n + 1 < len) buf[n++] = '/';
        }
        if (n + l >= len) return 0;
        memcpy(buf + n, lm->l_name, l);
        n += l;
    }
    while (n > 0 && buf[n - 1] != '/') /* the last component goes, then its slash (not "/") */
        n--;
    if (n > 1) n--;
    buf[n] = '\0';
    return n;
}

/* file with each $ORIGIN / ${ORIGIN} replaced by lm's directory (into out), or file itself:
 * no token, out too small, or a secure (setuid) program, whose $ORIGIN glibc restricts */
static const char *expand_origin(const struct link_map *lm, const char *file, char *out, size_t len)
{
    const char *t = strchr(file, '$');
    while (t && !origin_token(t + 1))
        t = strchr(t + 1, '$');
    if (!t || getauxval(AT_SECURE)) return file;
    char dir[4096];
    size_t dn = origin_of(lm, dir, sizeof dir), w = 0;
    if (dn == 0) return file;
    for (const char *p = file; *p;) {
        size_t k = *p == '$' ? origin_token(p + 1) : 0;
        size_t add = k ? dn : 1;
        if (w + add >= len) return file;
        memcpy(out + w, k ? dir : p, add);
        w += add;
        p += k ? k + 1 : 1;
    }
    out[w] = '\0';
    return out;
}

const char *ftr_dl_caller_search(const void *caller, const char *file, char *out, size_t len)
{
    Dl_info di;
    struct link_map *lm = NULL;
    if (!file) return file;
    if (!dladdr1(caller, &di, (void **)&lm, RTLD_DL_LINKMAP)) lm = NULL;
    /* glibc takes an unknown caller for the program */
    if (strchr(file, '/')) return expand_origin(lm, file, out, len);
    if (!lm) return file;
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
