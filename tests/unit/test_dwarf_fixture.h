/*
 * test_dwarf_fixture.h - what the DWARF readers' unit tests (test_dwarf_args.c,
 * test_dwarf_params.c) share: sources compiled at run time in a temporary directory, symbols
 * looked up with libelf, and copies of a file with corrupted DWARF sections.
 */
#ifndef TEST_DWARF_FIXTURE_H
#define TEST_DWARF_FIXTURE_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <gelf.h>
#include <libelf.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* K keeps each function out of line with its own signature (no clone, no IPA change) */
#define KEEP                                                                                       \
    "#ifdef __clang__\n"                                                                           \
    "#define K __attribute__((noinline, used))\n"                                                  \
    "#else\n"                                                                                      \
    "#define K __attribute__((noipa, used))\n"                                                     \
    "#endif\n"

static char tmpdir[64];

static inline void make_tmpdir(void)
{
    strcpy(tmpdir, "/tmp/ftr-dwarf-XXXXXX");
    cr_assert(mkdtemp(tmpdir), "mkdtemp");
}

static inline void remove_tmpdir(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpdir);
    cr_expect(system(cmd) == 0);
}

static inline int have(const char *tool)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", tool);
    return system(cmd) == 0;
}

static inline void write_file(const char *path, const char *text)
{
    FILE *f = fopen(path, "w");
    cr_assert(f, "%s", path);
    fputs(text, f);
    cr_assert(fclose(f) == 0);
}

static inline uint8_t *read_all(const char *path, size_t *size)
{
    int fd = open(path, O_RDONLY);
    struct stat st;
    cr_assert(fd >= 0 && fstat(fd, &st) == 0, "%s", path);
    uint8_t *buf = malloc((size_t)st.st_size);
    cr_assert(buf && read(fd, buf, (size_t)st.st_size) == st.st_size, "%s", path);
    close(fd);
    *size = (size_t)st.st_size;
    return buf;
}

/* The address of the FUNC symbol name in elf's .symtab, or 0. */
static inline uint64_t symbol(Elf *elf, const char *name)
{
    Elf_Scn *scn = NULL;
    GElf_Shdr sh;
    while ((scn = elf_nextscn(elf, scn))) {
        if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_SYMTAB || !sh.sh_entsize) continue;
        Elf_Data *d = elf_getdata(scn, NULL);
        for (size_t i = 1; d && i < sh.sh_size / sh.sh_entsize; i++) {
            GElf_Sym s;
            const char *n;
            if (gelf_getsym(d, (int)i, &s) && GELF_ST_TYPE(s.st_info) == STT_FUNC &&
                s.st_shndx != SHN_UNDEF && (n = elf_strptr(elf, sh.sh_link, s.st_name)) &&
                !strcmp(n, name))
                return s.st_value;
        }
    }
    return 0;
}

/* Runs jobs (shell commands, one a line) in tmpdir, two at a time. */
static inline void run_jobs(const char *jobs)
{
    char cmd[4200];
    int len = snprintf(cmd, sizeof cmd, "cd '%s' && xargs -P 2 -I@ sh -c @ <<'EOF'\n%sEOF\n",
                       tmpdir, jobs);
    cr_assert(len > 0 && (size_t)len < sizeof cmd);
    cr_assert(system(cmd) == 0, "compiling failed: %s", cmd);
}

/* ---- corrupted copies ---- */

struct section {
    size_t off, size, hdr; /* file offset and size of the data; file offset of sh_size */
};

static inline int find_section(const uint8_t *img, size_t size, const char *name, struct section *s)
{
    Elf *elf = elf_memory((char *)img, size);
    size_t shstrndx;
    int found = 0;
    GElf_Ehdr eh;
    if (!elf || !gelf_getehdr(elf, &eh) || elf_getshdrstrndx(elf, &shstrndx)) return 0;
    Elf_Scn *scn = NULL;
    while (!found && (scn = elf_nextscn(elf, scn))) {
        GElf_Shdr sh;
        const char *n;
        if (!gelf_getshdr(scn, &sh) || !(n = elf_strptr(elf, shstrndx, sh.sh_name)) ||
            strcmp(n, name))
            continue;
        s->off = sh.sh_offset;
        s->size = sh.sh_size;
        s->hdr = eh.e_shoff + elf_ndxscn(scn) * eh.e_shentsize + offsetof(Elf64_Shdr, sh_size);
        found = 1;
    }
    elf_end(elf);
    return found;
}

static inline uint64_t rng(uint64_t *s)
{
    *s ^= *s << 13;
    *s ^= *s >> 7;
    *s ^= *s << 17;
    return *s;
}

/* Reads (read_copy) copies of the file at path whose DWARF sections are corrupted: a few
 * bytes changed, truncated (a smaller sh_size), all garbage. */
static inline void corrupt(const char *path, void (*read_copy)(uint8_t *img, size_t size))
{
    static const char *names[] = {".debug_info",        ".debug_abbrev", ".debug_addr",
                                  ".debug_str_offsets", ".debug_str",    ".debug_loclists",
                                  ".debug_loc"};
    size_t size;
    uint8_t *orig = read_all(path, &size), *img = malloc(size);
    cr_assert(img);
    uint64_t seed = 0x9e3779b97f4a7c15ull;
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        struct section s;
        if (!find_section(orig, size, names[k], &s) || !s.size) continue;
        int rounds = k < 2 ? 300 : k >= 5 ? 200 : 60;
        for (int r = 0; r < rounds; r++) {
            memcpy(img, orig, size);
            uint64_t t = rng(&seed);
            if (r % 4 == 3) { /* truncated: a smaller sh_size */
                uint64_t n = t % s.size;
                memcpy(img + s.hdr, &n, sizeof n);
            } else { /* a few bytes changed, in a run or scattered */
                int flips = 1 + (int)(t % 8);
                size_t at = (size_t)(rng(&seed) % s.size);
                for (int f = 0; f < flips; f++) {
                    size_t p = r % 4 == 0 ? (at + (size_t)f) % s.size : rng(&seed) % s.size;
                    uint8_t b = (uint8_t)rng(&seed);
                    img[s.off + p] = r % 8 == 1 ? 0xff : r % 8 == 5 ? 0x80 : b;
                }
            }
            read_copy(img, size);
        }
        memcpy(img, orig, size); /* all of it garbage */
        for (size_t i = 0; i < s.size; i++)
            img[s.off + i] = (uint8_t)rng(&seed);
        read_copy(img, size);
    }
    free(img);
    free(orig);
}

#endif /* TEST_DWARF_FIXTURE_H */
