/*
 * dynsym.c - a symbol of one loaded object, found in its dynamic symbol table by reading memory
 * only: no lock, no allocation, callable from a signal handler (dlsym() takes the loader's lock).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#include <string.h>

#include "tracer.h"

/* glibc relocates most of a writable .dynamic section in place; an object whose section was
 * read-only (or another loader) leaves the addresses relative to the load base. */
static const void *dyn_ptr(const struct link_map *m, ElfW(Addr) p)
{
    return (const void *)(p < m->l_addr ? p + m->l_addr : p);
}

static uint32_t gnu_hash(const char *s)
{
    uint32_t h = 5381;
    for (; *s; s++)
        h = h * 33 + (unsigned char)*s;
    return h;
}

static uint32_t sysv_hash(const char *s)
{
    uint32_t h = 0;
    for (; *s; s++) {
        h = (h << 4) + (unsigned char)*s;
        h ^= (h >> 24) & 0xf0;
    }
    return h & 0x0fffffff;
}

static int defined(const ElfW(Sym) * s)
{
    int type = ELF64_ST_TYPE(s->st_info);
    return s->st_shndx != SHN_UNDEF && s->st_value &&
           (type == STT_FUNC || type == STT_OBJECT || type == STT_GNU_IFUNC || type == STT_NOTYPE);
}

/* The definition of name in m's dynamic symbol table, and its version index (-1: none) */
static const ElfW(Sym) * find(const struct link_map *m, const char *name, int *versym)
{
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const uint32_t *gnu = NULL, *sysv = NULL;
    const uint16_t *vs = NULL;
    if (!m || !m->l_ld) return NULL;
    for (const ElfW(Dyn) *d = m->l_ld; d->d_tag != DT_NULL; d++) {
        if (d->d_tag == DT_SYMTAB) symtab = dyn_ptr(m, d->d_un.d_ptr);
        if (d->d_tag == DT_STRTAB) strtab = dyn_ptr(m, d->d_un.d_ptr);
        if (d->d_tag == DT_GNU_HASH) gnu = dyn_ptr(m, d->d_un.d_ptr);
        if (d->d_tag == DT_HASH) sysv = dyn_ptr(m, d->d_un.d_ptr);
        if (d->d_tag == DT_VERSYM) vs = dyn_ptr(m, d->d_un.d_ptr);
    }
    if (!symtab || !strtab) return NULL;
    const ElfW(Sym) *hit = NULL;
    if (gnu) {
        /* nbuckets, symoffset, bloom words, bloom shift, bloom[], buckets[], chains[] */
        uint32_t nbuckets = gnu[0], symoffset = gnu[1], nbloom = gnu[2], h = gnu_hash(name);
        const uint32_t *buckets = (const uint32_t *)((const ElfW(Addr) *)(gnu + 4) + nbloom);
        const uint32_t *chain = buckets + nbuckets;
        uint32_t i = nbuckets ? buckets[h % nbuckets] : 0;
        for (; i >= symoffset && i; i++) {
            uint32_t ch = chain[i - symoffset];
            if ((ch | 1) == (h | 1) && !strcmp(strtab + symtab[i].st_name, name) &&
                defined(&symtab[i])) {
                hit = &symtab[i];
                break;
            }
            if (ch & 1) break;
        }
    } else if (sysv) {
        uint32_t nbucket = sysv[0];
        const uint32_t *bucket = sysv + 2, *chain = bucket + nbucket;
        for (uint32_t i = nbucket ? bucket[sysv_hash(name) % nbucket] : 0; i; i = chain[i])
            if (!strcmp(strtab + symtab[i].st_name, name) && defined(&symtab[i])) {
                hit = &symtab[i];
                break;
            }
    }
    if (hit && versym) *versym = vs ? vs[hit - symtab] : -1;
    return hit;
}

void *ftr_dynsym(const struct link_map *m, const char *name)
{
    const ElfW(Sym) *hit = find(m, name, NULL);
    if (!hit || ELF64_ST_TYPE(hit->st_info) == STT_GNU_IFUNC) return NULL; /* not resolved here */
    return (void *)(m->l_addr + hit->st_value);
}

int ftr_dynsym_version(const struct link_map *m, const char *name)
{
    int v = -1;
    return find(m, name, &v) ? v : -2;
}

struct anywhere {
    const char *name;
    void *found;
};

static int look_in(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    struct anywhere *a = arg;
    const uintptr_t self = (uintptr_t)ftr_dynsym_anywhere;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++) {
        const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
        uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
        if (ph->p_type == PT_DYNAMIC) dyn = (const ElfW(Dyn) *)lo;
        if (ph->p_type == PT_LOAD && self - lo < ph->p_memsz) return 0; /* ours */
    }
    if (!dyn) return 0;
    struct link_map m;
    memset(&m, 0, sizeof m);
    m.l_addr = info->dlpi_addr;
    m.l_ld = (ElfW(Dyn) *)dyn;
    a->found = ftr_dynsym(&m, a->name);
    return a->found != NULL;
}

void *ftr_dynsym_anywhere(const char *name)
{
    struct anywhere a = {name, NULL};
    dl_iterate_phdr(look_in, &a);
    return a.found;
}

void *ftr_next_sym(const char *name)
{
    return ftr_dynsym_anywhere(name) ? dlsym(RTLD_NEXT, name) : NULL;
}
