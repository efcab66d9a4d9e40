/*
 * elf_got.c - the GOT slots through which a module calls functions of other modules
 * (ftr_patcher.h): R_X86_64_JUMP_SLOT relocations (calls through the PLT) and
 * R_X86_64_GLOB_DAT ones of functions (-fno-plt calls, `call *f@GOTPCREL(%rip)`, or an address
 * taken), each with its symbol's name and the version it requires.
 *
 * Read from the file (libelf): the section headers give .rela.plt / .rela.dyn, .dynsym, and
 * the GNU version sections. Only symbols undefined in the module count: a call of the module's
 * own exported function through its PLT is a call of a function it traces already.
 */
#include <gelf.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftr_patcher.h"

#ifndef R_X86_64_GLOB_DAT
#define R_X86_64_GLOB_DAT 6
#define R_X86_64_JUMP_SLOT 7
#endif

struct dyn {
    Elf_Data *sym, *str, *versym;
    size_t nsym;
    /* the required versions (.gnu.version_r): index -> name */
    const char **vname;
    size_t nvname;
};

static Elf_Scn *linked(Elf *elf, Elf_Scn *scn)
{
    GElf_Shdr sh;
    return gelf_getshdr(scn, &sh) ? elf_getscn(elf, sh.sh_link) : NULL;
}

/* .gnu.version_r: the name of each version index the module requires */
static void verneed(Elf *elf, Elf_Scn *scn, struct dyn *d)
{
    Elf_Data *data = elf_getdata(scn, NULL);
    Elf_Data *str = elf_getdata(linked(elf, scn), NULL);
    if (!data || !str) return;
    size_t off = 0, cap = 0;
    GElf_Verneed vn;
    while (off < data->d_size && gelf_getverneed(data, (int)off, &vn)) {
        size_t aoff = off + vn.vn_aux;
        GElf_Vernaux va;
        for (unsigned i = 0; i < vn.vn_cnt && gelf_getvernaux(data, (int)aoff, &va); i++) {
            size_t idx = va.vna_other & 0x7fff;
            if (idx >= cap) {
                size_t ncap = idx + 16;
                const char **n = realloc(d->vname, ncap * sizeof *n);
                if (!n) return;
                memset(n + cap, 0, (ncap - cap) * sizeof *n);
                d->vname = n, cap = ncap;
            }
            if (va.vna_name < str->d_size) d->vname[idx] = (const char *)str->d_buf + va.vna_name;
            if (idx + 1 > d->nvname) d->nvname = idx + 1;
            if (!va.vna_next) break;
            aoff += va.vna_next;
        }
        if (!vn.vn_next) break;
        off += vn.vn_next;
    }
}

static int push(struct ftr_gotcalls *g, size_t *cap, const struct ftr_gotcall *c)
{
    if (g->n == *cap) {
        size_t ncap = *cap ? 2 * *cap : 64;
        struct ftr_gotcall *v = realloc(g->v, ncap * sizeof *v);
        if (!v) return -1;
        g->v = v, *cap = ncap;
    }
    g->v[g->n++] = *c;
    return 0;
}

/* The strings the entries point to, copied into one block of ours (the file may go) */
static int own_strings(struct ftr_gotcalls *g)
{
    size_t bytes = 0;
    for (size_t i = 0; i < g->n; i++)
        bytes += strlen(g->v[i].name) + 1 + (g->v[i].version ? strlen(g->v[i].version) + 1 : 0);
    char *s = malloc(bytes ? bytes : 1), *p = s;
    if (!s) return -1;
    for (size_t i = 0; i < g->n; i++) {
        size_t l = strlen(g->v[i].name) + 1;
        memcpy(p, g->v[i].name, l);
        g->v[i].name = p, p += l;
        if (g->v[i].version) {
            l = strlen(g->v[i].version) + 1;
            memcpy(p, g->v[i].version, l);
            g->v[i].version = p, p += l;
        }
    }
    g->strs = s;
    return 0;
}

static int by_slot(const void *a, const void *b)
{
    const struct ftr_gotcall *x = a, *y = b;
    return x->slot < y->slot ? -1 : x->slot > y->slot;
}

int ftr_elf_gotcalls(Elf *elf, struct ftr_gotcalls *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    GElf_Ehdr eh;
    if (!gelf_getehdr(elf, &eh) || eh.e_machine != EM_X86_64) {
        snprintf(err, errlen, "not an x86-64 ELF file");
        return -1;
    }
    struct dyn d = {0};
    Elf_Scn *scn = NULL, *dynsym = NULL;
    while ((scn = elf_nextscn(elf, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh)) continue;
        if (sh.sh_type == SHT_DYNSYM) {
            dynsym = scn;
            d.sym = elf_getdata(scn, NULL);
            d.str = elf_getdata(linked(elf, scn), NULL);
            d.nsym = sh.sh_entsize ? sh.sh_size / sh.sh_entsize : 0;
        } else if (sh.sh_type == SHT_GNU_versym) {
            d.versym = elf_getdata(scn, NULL);
        } else if (sh.sh_type == SHT_GNU_verneed) {
            verneed(elf, scn, &d);
        }
    }
    if (!dynsym || !d.sym || !d.str) { /* static, or stripped of its dynamic symbols */
        free(d.vname);
        return 0;
    }
    size_t cap = 0;
    int rc = 0;
    scn = NULL;
    while (rc == 0 && (scn = elf_nextscn(elf, scn))) {
        GElf_Shdr sh;
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_RELA ||
            elf_getscn(elf, sh.sh_link) != dynsym)
            continue;
        Elf_Data *data = elf_getdata(scn, NULL);
        size_t n = data && sh.sh_entsize ? data->d_size / sh.sh_entsize : 0;
        for (size_t i = 0; i < n; i++) {
            GElf_Rela r;
            if (!gelf_getrela(data, (int)i, &r)) break;
            unsigned type = (unsigned)GELF_R_TYPE(r.r_info);
            size_t si = GELF_R_SYM(r.r_info);
            if ((type != R_X86_64_JUMP_SLOT && type != R_X86_64_GLOB_DAT) || !si || si >= d.nsym)
                continue;
            GElf_Sym sym;
            if (!gelf_getsym(d.sym, (int)si, &sym) || sym.st_shndx != SHN_UNDEF ||
                sym.st_name >= d.str->d_size)
                continue;
            unsigned st = GELF_ST_TYPE(sym.st_info);
            if (type == R_X86_64_GLOB_DAT && st != STT_FUNC && st != STT_GNU_IFUNC) continue;
            const char *name = (const char *)d.str->d_buf + sym.st_name;
            if (!*name) continue;
            const char *ver = NULL;
            if (d.versym && (si + 1) * 2 <= d.versym->d_size) {
                GElf_Versym vs;
                if (gelf_getversym(d.versym, (int)si, &vs)) {
                    size_t vi = vs & 0x7fff;
                    if (vi >= 2 && vi < d.nvname) ver = d.vname[vi];
                }
            }
            struct ftr_gotcall c = {r.r_offset, name, ver, type == R_X86_64_GLOB_DAT};
            if (push(out, &cap, &c) < 0) rc = -1;
        }
    }
    if (rc == 0) rc = own_strings(out);
    free(d.vname);
    if (rc < 0) {
        ftr_gotcalls_free(out);
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    qsort(out->v, out->n, sizeof *out->v, by_slot);
    return 0;
}

void ftr_gotcalls_free(struct ftr_gotcalls *g)
{
    free(g->v);
    free(g->strs);
    memset(g, 0, sizeof *g);
}
