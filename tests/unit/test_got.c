/*
 * test_got.c - the GOT call slots of a module (patcher/elf_got.c) and which of them the text
 * only calls through (patcher/x86_64_got.c): on byte buffers, and on a shared object built at
 * run time with PLT calls, -fno-plt calls and an address taken.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <fcntl.h>
#include <libelf.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "ftr_patcher.h"

static void put_disp(uint8_t *buf, size_t at, uint64_t base, uint64_t target)
{
    int32_t d = (int32_t)(target - (base + at + 4));
    memcpy(buf + at, &d, 4);
}

Test(got_reads, calls_jumps_and_loads)
{
    uint8_t text[64];
    memset(text, 0x90, sizeof text);
    uint64_t base = 0x400000, slots[3] = {0x600000, 0x600008, 0x600010};
    /* call *slot0(%rip) */
    text[0] = 0xff, text[1] = 0x15;
    put_disp(text, 2, base, slots[0]);
    /* mov slot1(%rip), %rax: an address taken */
    text[8] = 0x48, text[9] = 0x8b, text[10] = 0x05;
    put_disp(text, 11, base, slots[1]);
    /* notrack jmp *slot2(%rip) */
    text[20] = 0x3e, text[21] = 0xff, text[22] = 0x25;
    put_disp(text, 23, base, slots[2]);
    uint8_t read[3] = {0};
    cr_assert_eq(ftr_x86_got_reads(text, sizeof text, base, slots, 3, read), 1);
    cr_assert_eq(read[0], 0);
    cr_assert_eq(read[1], 1);
    cr_assert_eq(read[2], 0);
    /* a load of slot0 as well: now it is read too */
    text[40] = 0x48, text[41] = 0x8b, text[42] = 0x0d;
    put_disp(text, 43, base, slots[0]);
    cr_assert_eq(ftr_x86_got_reads(text, sizeof text, base, slots, 3, read), 1);
    cr_assert_eq(read[0], 1);
}

Test(got_reads, load_then_call)
{
    uint8_t text[32];
    memset(text, 0x90, sizeof text);
    uint64_t base = 0x1000, slots[2] = {0x9000, 0x9008};
    /* mov slot0(%rip), %rax; call *%rax: a call */
    text[0] = 0x48, text[1] = 0x8b, text[2] = 0x05;
    put_disp(text, 3, base, slots[0]);
    text[7] = 0xff, text[8] = 0xd0;
    /* mov slot1(%rip), %r11; call *%rax: a load that is kept */
    text[10] = 0x4c, text[11] = 0x8b, text[12] = 0x1d;
    put_disp(text, 13, base, slots[1]);
    text[17] = 0xff, text[18] = 0xd0;
    uint8_t read[2] = {0};
    cr_assert_eq(ftr_x86_got_reads(text, sizeof text, base, slots, 2, read), 1);
    cr_assert_eq(read[0], 0);
    cr_assert_eq(read[1], 1);
}

Test(got_reads, nothing_near)
{
    uint8_t text[16] = {0xff, 0x15, 0, 0, 0, 0};
    uint64_t slot = 0x10000000;
    uint8_t read = 0;
    cr_assert_eq(ftr_x86_got_reads(text, sizeof text, 0x1000, &slot, 1, &read), 0);
    cr_assert_eq(ftr_x86_got_reads(text, 0, 0x1000, &slot, 1, &read), 0);
    cr_assert_eq(read, 0);
}

static const char lib_source[] =
    "#include <string.h>\n"
    "#include <unistd.h>\n"
    "#include <stdlib.h>\n"
    "size_t g_plt(const char *s) { return strlen(s); }\n"
    "__attribute__((optimize(\"no-plt\"))) int g_noplt(void) { return getpid(); }\n"
    "int (*g_taken(void))(int) { return abs; }\n"
    "int g_called_abs(int x) { return abs(x) + 1; }\n";

static char dir[64], so[128];

static void build(const char *flags)
{
    strcpy(dir, "/tmp/ftr-got.XXXXXX");
    cr_assert(mkdtemp(dir));
    char src[128], cmd[512];
    snprintf(src, sizeof src, "%s/g.c", dir);
    snprintf(so, sizeof so, "%s/libg.so", dir);
    FILE *f = fopen(src, "w");
    cr_assert(f);
    fputs(lib_source, f);
    fclose(f);
    snprintf(cmd, sizeof cmd, "cc -O1 -shared -fPIC %s -fno-builtin -o %s %s", flags, so, src);
    cr_assert_eq(system(cmd), 0, "%s", cmd);
}

static void cleanup(void)
{
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    (void)system(cmd);
}

static const struct ftr_gotcall *find(const struct ftr_gotcalls *g, const char *name)
{
    for (size_t i = 0; i < g->n; i++)
        if (!strcmp(g->v[i].name, name)) return &g->v[i];
    return NULL;
}

static void read_calls(struct ftr_gotcalls *g)
{
    elf_version(EV_CURRENT);
    int fd = open(so, O_RDONLY);
    cr_assert(fd >= 0);
    Elf *elf = elf_begin(fd, ELF_C_READ_MMAP, NULL);
    cr_assert(elf);
    char err[200];
    cr_assert_eq(ftr_elf_gotcalls(elf, g, err, sizeof err), 0, "%s", err);
    elf_end(elf);
    close(fd);
}

Test(elf_got, plt_and_noplt_slots, .fini = cleanup)
{
    build("");
    struct ftr_gotcalls g;
    read_calls(&g);
    const struct ftr_gotcall *strlen_c = find(&g, "strlen"), *getpid_c = find(&g, "getpid");
    cr_assert(strlen_c && getpid_c);
    cr_assert_eq(strlen_c->glob_dat, 0, "strlen is called through the PLT");
    cr_assert_str_eq(strlen_c->version, "GLIBC_2.2.5");
    cr_assert_eq(getpid_c->glob_dat, 1, "getpid through its GOT slot (-fno-plt)");
    cr_assert(find(&g, "abs"), "abs: called and taken");
    cr_assert_null(find(&g, "g_plt"), "defined here: not a library call");
    for (size_t i = 1; i < g.n; i++)
        cr_assert_leq(g.v[i - 1].slot, g.v[i].slot, "sorted by slot");

    /* live: which GLOB_DAT slots does the text read? getpid's: no (a call); abs's: yes */
    void *h = dlopen(so, RTLD_NOW | RTLD_LOCAL);
    cr_assert(h, "%s", dlerror());
    struct link_map *lm = NULL;
    cr_assert_eq(dlinfo(h, RTLD_DI_LINKMAP, &lm), 0);
    const ElfW(Ehdr) *eh = (const void *)lm->l_addr;
    const ElfW(Phdr) *ph = (const void *)(lm->l_addr + eh->e_phoff);
    uint64_t slots[2];
    size_t n = 0;
    const struct ftr_gotcall *abs_c = NULL;
    for (size_t i = 0; i < g.n; i++)
        if (g.v[i].glob_dat && (!strcmp(g.v[i].name, "getpid") || !strcmp(g.v[i].name, "abs"))) {
            if (!strcmp(g.v[i].name, "abs")) abs_c = &g.v[i];
            slots[n++] = lm->l_addr + g.v[i].slot;
        }
    cr_assert_eq(n, 2, "getpid and abs have GLOB_DAT slots");
    uint8_t read[2] = {0};
    for (unsigned i = 0; i < eh->e_phnum; i++)
        if (ph[i].p_type == PT_LOAD && (ph[i].p_flags & PF_X))
            ftr_x86_got_reads((const uint8_t *)(lm->l_addr + ph[i].p_vaddr), ph[i].p_filesz,
                              lm->l_addr + ph[i].p_vaddr, slots, n, read);
    size_t abs_k = slots[0] == lm->l_addr + abs_c->slot ? 0 : 1;
    cr_assert_eq(read[abs_k], 1, "abs's address is taken");
    cr_assert_eq(read[1 - abs_k], 0, "getpid is only called");
    dlclose(h);
    ftr_gotcalls_free(&g);
}
