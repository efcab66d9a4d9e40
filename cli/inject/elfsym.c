/*
 * elfsym.c - the target as /proc and its files show it (all unit-tested; the parsers are pure):
 * its /proc/PID/maps, its threads' /proc/PID/task/TID/syscall and status texts, and where the
 * functions the injector calls are: libc.so.6 found in the maps, that very file's ELF dynamic
 * symbols read (plain <elf.h>, the file mapped read-only, every offset checked: the file is the
 * target's), the load base added.
 *
 * The file read is the one the process has mapped: /proc/PID/map_files/START-END opens the
 * mapping's own file (right even when libc.so.6 was upgraded on disk since, or the process lives
 * in another mount namespace); failing that, the path through /proc/PID/root. Either way the
 * file's GNU build ID must equal the bytes in the process's memory where the build ID note is.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include "inject_int.h"

#define LIBC_NAME "libc.so.6"
#define MAX_TEXT 8 /* executable mappings of libc.so.6 remembered */

/* ---- /proc/PID/maps ---- */

/* Hex digits at p into *v. @return the end, or NULL if there were none */
static const char *hex(const char *p, uint64_t *v)
{
    uint64_t x = 0;
    const char *s = p;
    for (;; p++) {
        int d;
        if (*p >= '0' && *p <= '9')
            d = *p - '0';
        else if (*p >= 'a' && *p <= 'f')
            d = *p - 'a' + 10;
        else if (*p >= 'A' && *p <= 'F')
            d = *p - 'A' + 10;
        else
            break;
        if (p - s >= 16) return NULL; /* more than 64 bits */
        x = x << 4 | (uint64_t)d;
    }
    *v = x;
    return p > s ? p : NULL;
}

/* "start-end perms offset major:minor inode   path" */
int ftr_inj_parse_maps_line(const char *line, struct ftr_inj_map *m)
{
    uint64_t maj, min;
    const char *p = hex(line, &m->start);
    if (!p || *p++ != '-' || !(p = hex(p, &m->end)) || *p++ != ' ') return -1;
    for (int i = 0; i < 4; i++, p++) {
        if (!*p || *p == ' ' || *p == '\n') return -1;
        m->perms[i] = *p;
    }
    m->perms[4] = 0;
    if (*p++ != ' ' || !(p = hex(p, &m->offset)) || *p++ != ' ') return -1;
    if (!(p = hex(p, &maj)) || *p++ != ':' || !(p = hex(p, &min)) || *p++ != ' ') return -1;
    m->dev_major = (unsigned)maj;
    m->dev_minor = (unsigned)min;
    if (*p < '0' || *p > '9') return -1;
    for (m->inode = 0; *p >= '0' && *p <= '9'; p++)
        m->inode = m->inode * 10 + (uint64_t)(*p - '0');
    if (m->end <= m->start || (*p != ' ' && *p != '\n' && *p)) return -1;
    while (*p == ' ')
        p++;
    const char *end = strchr(p, '\n');
    size_t len = end ? (size_t)(end - p) : strlen(p);
    static const char del[] = " (deleted)";
    if (len >= sizeof del - 1 && !memcmp(p + len - (sizeof del - 1), del, sizeof del - 1))
        len -= sizeof del - 1;
    m->path = p;
    m->path_len = len;
    return 0;
}

int ftr_inj_maps_find(const char *maps, uint64_t addr, struct ftr_inj_map *m,
                      struct ftr_inj_map *below)
{
    struct ftr_inj_map prev = {0}, cur;
    for (const char *l = maps; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (ftr_inj_parse_maps_line(l, &cur) < 0) continue;
        if (addr >= cur.start && addr < cur.end) {
            *m = cur;
            if (below) *below = prev;
            return 0;
        }
        prev = cur;
    }
    return -1;
}

/* Is the mapping's file libc.so.6 (by its base name)? */
static int is_libc(const struct ftr_inj_map *m)
{
    size_t n = sizeof LIBC_NAME - 1;
    return m->path_len >= n + 1 && m->path[m->path_len - n - 1] == '/' &&
           !memcmp(m->path + m->path_len - n, LIBC_NAME, n);
}

/* ---- /proc/PID/task/TID/syscall and status ---- */

static const char *hex_arg(const char *p, uint64_t *v)
{
    char *end;
    while (*p == ' ')
        p++;
    if (p[0] != '0' || p[1] != 'x') return NULL;
    errno = 0;
    *v = strtoull(p + 2, &end, 16);
    return errno || end == p + 2 ? NULL : end;
}

/* "running", "-1 SP PC", or "NR ARG1..ARG6 SP PC" (the arguments and both pointers in hex) */
int ftr_inj_parse_syscall(const char *text, struct ftr_inj_sysc *s)
{
    memset(s, 0, sizeof *s);
    if (!strncmp(text, "running", 7)) {
        s->nr = FTR_INJ_RUNNING;
        return 0;
    }
    char *end;
    errno = 0;
    long nr = strtol(text, &end, 10);
    if (errno || end == text || nr < -1) return -1;
    const char *p = end;
    if (nr >= 0)
        for (int i = 0; i < 6; i++)
            if (!(p = hex_arg(p, &s->args[i]))) return -1;
    if (!(p = hex_arg(p, &s->sp)) || !(p = hex_arg(p, &s->pc))) return -1;
    while (*p == ' ' || *p == '\n')
        p++;
    if (*p) return -1;
    s->nr = nr;
    return 0;
}

const char *ftr_inj_status_field(const char *status, const char *key)
{
    size_t kl = strlen(key);
    for (const char *l = status; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        if (!strncmp(l, key, kl) && l[kl] == ':') {
            const char *v = l + kl + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            return v;
        }
    return NULL;
}

int ftr_inj_sigset_has(const char *hex, int sig)
{
    if (!hex || sig < 1) return -1;
    size_t n = strspn(hex, "0123456789abcdefABCDEF");
    size_t digit = (size_t)(sig - 1) / 4; /* from the right */
    if (n == 0 || n > 64) return -1;
    if (digit >= n) return 0;
    char c = hex[n - 1 - digit];
    int v = c <= '9' ? c - '0' : (c | 0x20) - 'a' + 10;
    return (v >> ((sig - 1) % 4)) & 1;
}

/* ---- ELF ---- */

/* Is [off, off + len) inside the file? */
static int in_file(const struct ftr_inj_elf *e, uint64_t off, uint64_t len)
{
    return off <= e->size && len <= e->size - off;
}

static const Elf64_Phdr *phdr(const struct ftr_inj_elf *e, unsigned i)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)e->img;
    return (const Elf64_Phdr *)(e->img + eh->e_phoff) + i;
}

int ftr_inj_elf_open(const char *path, struct ftr_inj_elf *e, char *err, size_t errlen)
{
    memset(e, 0, sizeof *e);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (fd < 0 || fstat(fd, &st) < 0) {
        ftr_inj_errf(err, errlen, "cannot open %s: %s", path, strerror(errno));
        if (fd >= 0) close(fd);
        return -1;
    }
    if (!S_ISREG(st.st_mode) || st.st_size < (off_t)sizeof(Elf64_Ehdr)) {
        close(fd);
        ftr_inj_errf(err, errlen, "%s is not an ELF file", path);
        return -1;
    }
    void *img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (img == MAP_FAILED) {
        ftr_inj_errf(err, errlen, "cannot map %s: %s", path, strerror(errno));
        return -1;
    }
    e->img = img;
    e->size = (size_t)st.st_size;
    const Elf64_Ehdr *eh = img;
    const char *bad = NULL;
    if (memcmp(eh->e_ident, ELFMAG, SELFMAG))
        bad = "is not an ELF file";
    else if (eh->e_ident[EI_CLASS] != ELFCLASS64 || eh->e_ident[EI_DATA] != ELFDATA2LSB ||
             eh->e_machine != ftr_inj_arch_machine)
        bad = "is not a 64-bit ELF file of this machine (a 32-bit process?)";
    else if (eh->e_phentsize != sizeof(Elf64_Phdr) ||
             !in_file(e, eh->e_phoff, (uint64_t)eh->e_phnum * sizeof(Elf64_Phdr)) ||
             eh->e_shentsize != sizeof(Elf64_Shdr) ||
             !in_file(e, eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr)))
        bad = "has malformed ELF headers";
    if (!bad) {
        int have_load = 0;
        for (unsigned i = 0; i < eh->e_phnum && !have_load; i++)
            if (phdr(e, i)->p_type == PT_LOAD) {
                e->load_vaddr = phdr(e, i)->p_vaddr & ~(uint64_t)0xfff;
                have_load = 1;
            }
        const Elf64_Shdr *sh = (const Elf64_Shdr *)(e->img + eh->e_shoff);
        for (unsigned i = 0; i < eh->e_shnum; i++) {
            if (sh[i].sh_type == SHT_DYNSYM && sh[i].sh_link < eh->e_shnum &&
                sh[i].sh_entsize == sizeof(Elf64_Sym) &&
                in_file(e, sh[i].sh_offset, sh[i].sh_size) &&
                in_file(e, sh[sh[i].sh_link].sh_offset, sh[sh[i].sh_link].sh_size)) {
                e->syms = e->img + sh[i].sh_offset;
                e->nsyms = sh[i].sh_size / sizeof(Elf64_Sym);
                e->strs = (const char *)e->img + sh[sh[i].sh_link].sh_offset;
                e->strs_size = sh[sh[i].sh_link].sh_size;
            }
        }
        for (unsigned i = 0; i < eh->e_shnum; i++)
            if (sh[i].sh_type == SHT_GNU_versym && in_file(e, sh[i].sh_offset, sh[i].sh_size) &&
                sh[i].sh_size / sizeof(Elf64_Half) == e->nsyms)
                e->versym = e->img + sh[i].sh_offset;
        if (!have_load)
            bad = "has no loadable segment";
        else if (!e->syms || !e->strs_size)
            bad = "has no dynamic symbol table";
    }
    if (bad) {
        ftr_inj_errf(err, errlen, "%s %s", path, bad);
        ftr_inj_elf_close(e);
        return -1;
    }
    return 0;
}

void ftr_inj_elf_close(struct ftr_inj_elf *e)
{
    if (e->img) munmap((void *)e->img, e->size);
    memset(e, 0, sizeof *e);
}

int ftr_inj_elf_symbol(const struct ftr_inj_elf *e, const char *name, uint64_t *value)
{
    const Elf64_Sym *syms = e->syms;
    const Elf64_Half *ver = e->versym;
    size_t nl = strlen(name);
    int found = 0;
    for (size_t i = 1; i < e->nsyms; i++) {
        const Elf64_Sym *s = &syms[i];
        if (s->st_shndx == SHN_UNDEF || s->st_name >= e->strs_size ||
            e->strs_size - s->st_name <= nl || memcmp(e->strs + s->st_name, name, nl + 1))
            continue;
        int hidden = ver && (ver[i] & 0x8000); /* a non-default version: name@VERSION */
        if (!found || !hidden) *value = s->st_value;
        found = 1;
        if (!hidden) break;
    }
    return found ? 0 : -1;
}

int ftr_inj_elf_find_code(const struct ftr_inj_elf *e, const void *pat, size_t len, uint64_t *vaddr)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)e->img;
    int n = 0;
    for (unsigned i = 0; i < eh->e_phnum && n < 2; i++) {
        const Elf64_Phdr *ph = phdr(e, i);
        if (ph->p_type != PT_LOAD || !(ph->p_flags & PF_X) ||
            !in_file(e, ph->p_offset, ph->p_filesz))
            continue;
        const unsigned char *seg = e->img + ph->p_offset, *p = seg;
        size_t left = ph->p_filesz;
        const unsigned char *hit;
        while (n < 2 && (hit = memmem(p, left, pat, len))) {
            if (!n) *vaddr = ph->p_vaddr + (uint64_t)(hit - seg);
            n++;
            left -= (size_t)(hit + 1 - p);
            p = hit + 1;
        }
    }
    return n;
}

int ftr_inj_elf_build_id(const struct ftr_inj_elf *e, const unsigned char **id, size_t *len,
                         uint64_t *vaddr)
{
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)e->img;
    for (unsigned i = 0; i < eh->e_phnum; i++) {
        const Elf64_Phdr *ph = phdr(e, i);
        if (ph->p_type != PT_NOTE || !in_file(e, ph->p_offset, ph->p_filesz)) continue;
        uint64_t off = 0;
        while (off + sizeof(Elf64_Nhdr) <= ph->p_filesz) {
            const Elf64_Nhdr *nh = (const Elf64_Nhdr *)(e->img + ph->p_offset + off);
            uint64_t name = off + sizeof *nh, desc = name + ((nh->n_namesz + 3u) & ~3u);
            if (desc + nh->n_descsz > ph->p_filesz) break;
            if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 &&
                !memcmp(e->img + ph->p_offset + name, "GNU", 4) && nh->n_descsz) {
                *id = e->img + ph->p_offset + desc;
                *len = nh->n_descsz;
                *vaddr = ph->p_vaddr + desc;
                return 0;
            }
            off = desc + ((nh->n_descsz + 3u) & ~3u);
        }
    }
    return -1;
}

/* ---- libc.so.6 in the process ---- */

/* Opens the file of mapping m: its map_files entry, else its path through the process's root. */
static int open_mapped(pid_t pid, const char *root_dir, const struct ftr_inj_map *m,
                       struct ftr_inj_elf *e, char *err, size_t errlen)
{
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "/proc/%d/map_files/%llx-%llx", (int)pid,
             (unsigned long long)m->start, (unsigned long long)m->end);
    if (access(path, R_OK) == 0 && ftr_inj_elf_open(path, e, err, errlen) == 0) return 0;
    snprintf(path, sizeof path, "%s/root%.*s", root_dir, (int)m->path_len, m->path);
    return ftr_inj_elf_open(path, e, err, errlen);
}

/* Does the file's build ID match the process's memory? @return 1, 0, or -1 (no build ID) */
static int same_build(pid_t pid, const struct ftr_inj_elf *e, uint64_t base)
{
    const unsigned char *id;
    size_t len;
    uint64_t vaddr;
    if (ftr_inj_elf_build_id(e, &id, &len, &vaddr) < 0 || len > 64) return -1;
    unsigned char mem[64];
    struct iovec local = {mem, len}, remote = {(void *)(uintptr_t)(base + vaddr), len};
    if (process_vm_readv(pid, &local, 1, &remote, 1, 0) != (ssize_t)len) return 0;
    return !memcmp(mem, id, len);
}

int ftr_inj_find_libc(pid_t pid, const char *root_dir, const char *maps, struct ftr_inj_libc *lc,
                      char *err, size_t errlen)
{
    struct ftr_inj_map m, first = {0};
    struct {
        uint64_t lo, hi;
    } text[MAX_TEXT];
    int ntext = 0, musl = 0, copies = 0;
    memset(lc, 0, sizeof *lc);
    for (const char *l = maps; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL) {
        if (ftr_inj_parse_maps_line(l, &m) < 0) continue;
        if (m.path_len && memmem(m.path, m.path_len, "ld-musl-", 8)) musl = 1;
        if (!is_libc(&m)) continue;
        if (m.offset == 0 && copies++ == 0) first = m;
        if (m.perms[2] == 'x' && ntext < MAX_TEXT && first.end && first.inode == m.inode) {
            text[ntext].lo = m.start;
            text[ntext++].hi = m.end;
        }
    }
    if (!first.end) {
        ftr_inj_errf(err, errlen, "%s",
                     musl ? "it runs on musl libc, not glibc"
                          : "it has no " LIBC_NAME " mapped: statically linked, or "
                            "not built on glibc");
        return -1;
    }
    if (copies > 1) {
        /* dlmopen() namespaces have their own copies of libc, malloc's state included; which
         * one is the main program's is not told by the maps */
        ftr_inj_errf(err, errlen, "it has %d copies of %s mapped (dlmopen namespaces)", copies,
                     LIBC_NAME);
        return -1;
    }
    struct ftr_inj_elf e;
    char why[PATH_MAX + 128];
    if (open_mapped(pid, root_dir, &first, &e, why, sizeof why) < 0) {
        ftr_inj_errf(err, errlen, "its %s: %s", LIBC_NAME, why);
        return -1;
    }
    int rc = -1;
    lc->base = first.start - e.load_vaddr;
    int build = same_build(pid, &e, lc->base);
    if (ftr_inj_elf_symbol(&e, "gnu_get_libc_version", &lc->version) < 0)
        ftr_inj_errf(err, errlen, "its %s is not glibc's (no gnu_get_libc_version)", LIBC_NAME);
    else if (ftr_inj_elf_symbol(&e, "dlopen", &lc->dlopen) < 0 ||
             ftr_inj_elf_symbol(&e, "dlerror", &lc->dlerror) < 0)
        ftr_inj_errf(err, errlen, "its glibc has no dlopen in %s (glibc 2.34 or newer is needed)",
                     LIBC_NAME);
    else if (build == 0)
        ftr_inj_errf(err, errlen,
                     "the %s file found is not the one it has mapped (build IDs differ)",
                     LIBC_NAME);
    else
        rc = 0;
    if (rc == 0) {
        lc->version += lc->base;
        lc->dlopen += lc->base;
        lc->dlerror += lc->base;
        uint64_t sr;
        if (ftr_inj_elf_find_code(&e, ftr_inj_arch_sigreturn, ftr_inj_arch_sigreturn_len, &sr) == 1)
            lc->sigreturn = lc->base + sr;
        if (ftr_inj_elf_find_code(&e, ftr_inj_arch_syscall_ret, ftr_inj_arch_syscall_ret_len,
                                  &sr) >= 1)
            lc->syscall_ret = lc->base + sr; /* any will do */
        int in_text = 0;
        for (int i = 0; i < ntext; i++)
            if (lc->dlopen >= text[i].lo && lc->dlopen < text[i].hi && lc->dlerror >= text[i].lo &&
                lc->dlerror < text[i].hi) {
                in_text = 1;
                lc->text_lo = text[i].lo;
                lc->text_hi = text[i].hi;
            }
        if (!in_text) {
            ftr_inj_errf(err, errlen, "dlopen is not in an executable mapping of its %s",
                         LIBC_NAME);
            rc = -1;
        }
    }
    ftr_inj_elf_close(&e);
    return rc;
}
