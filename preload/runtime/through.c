/*
 * through.c - which sites are called through (docs/design.md, "Exits: call-through and the
 * return hook"), and where their bodies start.
 *
 * A call-through site becomes `jmp stub`; ftr_tramp_through then calls the function's body
 * with the stack 16 bytes lower than its caller left it. That is right only for a function
 * that reads nothing from the caller's stack, so a site qualifies when:
 *   - it is the function's first instruction (after any endbr64): -pg -mfentry, -mnop-mcount,
 *     -fpatchable-function-entry; never an mcount site (after the prologue) or a nested
 *     function's (push %r10 around it);
 *   - the function's DWARF says every parameter travels in a register (patcher/dwarf_args.c,
 *     conservative: no DWARF, variadic, a by-value aggregate over 16 bytes, long double, more
 *     than 6 integer or 8 vector registers' worth: no);
 *   - its symbol is no compiler clone (foo.isra.0, foo.constprop.0, foo.part.0): DWARF shows
 *     the source's signature, the clone may take others.
 * FTRACE_EXIT=hook turns it off. Every other site keeps the return hook.
 * Runs under the module registry's lock, in the constructor or after dlopen: libc is fine.
 */
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftr_patcher.h"
#include "tracer.h"

static int entry_shaped(const struct ftr_site *s)
{
    if (s->mcount || s->chain) return 0;
    if (s->shape != FTR_SHAPE_FENTRY_GOT && s->shape != FTR_SHAPE_FENTRY_REL &&
        s->shape != FTR_SHAPE_NOP5 && s->shape != FTR_SHAPE_NOPS)
        return 0;
    static const uint8_t endbr64[4] = {0xf3, 0x0f, 0x1e, 0xfa};
    return s->addr == s->func ||
           (s->addr == s->func + 4 && !memcmp((const void *)(uintptr_t)s->func, endbr64, 4));
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* The file's build id equals the one the scan read (the file was not replaced since). */
int ftr_module_same_build(Elf *elf, const struct ftr_module *m)
{
    if (!m->build_id_len) return 1;
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    while ((scn = elf_nextscn(elf, scn))) {
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_NOTE) continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        size_t off = 0, no, dof;
        GElf_Nhdr nh;
        while (d && (off = gelf_getnote(d, off, &nh, &no, &dof)) > 0)
            if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 &&
                !memcmp((const char *)d->d_buf + no, "GNU", 4))
                return nh.n_descsz == m->build_id_len &&
                       !memcmp((const char *)d->d_buf + dof, m->build_id, m->build_id_len);
    }
    return 0;
}

size_t ftr_through_decide(struct ftr_module *m)
{
    size_t candidates = 0, n = 0;
    for (size_t i = 0; i < m->nsites; i++) {
        m->sites[i].through = 0;
        candidates += entry_shaped(&m->sites[i]);
    }
    if (ftr_cfg.exit_hook || !candidates || !m->path) return 0;
    int fd = open(m->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    uint64_t *addrs = NULL;
    long na = 0;
    char err[128];
    Elf *elf = elf_version(EV_CURRENT) != EV_NONE ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
    if (elf && ftr_module_same_build(elf, m)) na = ftr_dwarf_regargs(elf, &addrs, err, sizeof err);
    if (elf) elf_end(elf);
    close(fd);
    for (size_t i = 0; na > 0 && i < m->nsites; i++) {
        struct ftr_site *s = &m->sites[i];
        uint64_t at = s->func - m->base;
        if (!entry_shaped(s) || (s->name && !ftr_dwarf_name_ok(s->name)) ||
            !bsearch(&at, addrs, (size_t)na, sizeof *addrs, cmp_u64))
            continue;
        s->through = 1;
        n++;
    }
    free(addrs);
    return n;
}

int ftr_site_body_set(uint32_t index, uintptr_t where)
{
    if (index >= FTR_SITE_FLAGS_MAX) return 0;
    if (!ftr_site_body) {
        void *p = mmap(NULL, FTR_SITE_FLAGS_MAX * sizeof *ftr_site_body, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (p == MAP_FAILED) return 0;
        ftr_site_body = p;
    }
    __atomic_store_n(&ftr_site_body[index], where, __ATOMIC_RELEASE);
    return 1;
}

int ftr_through_publish(const struct ftr_site *s)
{
    return s->through && ftr_site_body_set(s->index, (uintptr_t)(s->addr + s->len));
}
