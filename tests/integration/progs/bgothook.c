/* bgothook.c - a program that hooks its own GOT slot, as plthook-style libraries do
 * (libcall_tests.py). It finds the slot of getppid() in its relocations (JUMP_SLOT, or with
 * -fno-plt GLOB_DAT), makes the slot's page writable for good, stores its own wrapper there,
 * and later puts the slot back as it found it. Meanwhile the test switches the library calls off and on and
 * re-filters with ftrace-ctl: the slot must stay the program's (its wrapper sees each of its
 * calls) and the page writable (else its last store is a SIGSEGV).
 *   bgothook DIR   DIR/ready: made once the slot is hooked; DIR/go: made by the test when done
 * Prints "wrapper: N of 200 calls" (and how the others went); exit status 0 when N is 200.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "progs.h"

static pid_t (*orig)(void);
static volatile long wrapped, wrong;

NOINLINE pid_t my_getppid(void)
{
    wrapped++;
    return orig();
}

NOINLINE void calls(int n, pid_t want)
{
    for (int i = 0; i < n; i++)
        if (getppid() != want) wrong++;
}

/* The GOT slot of NAME in the executable (found as plthook does: its dynamic relocations) */
static int find_slot(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size;
    void ***out = arg;
    const ElfW(Dyn) *dyn = NULL;
    for (int i = 0; i < info->dlpi_phnum; i++)
        if (info->dlpi_phdr[i].p_type == PT_DYNAMIC)
            dyn = (const ElfW(Dyn) *)(info->dlpi_addr + info->dlpi_phdr[i].p_vaddr);
    const ElfW(Sym) *symtab = NULL;
    const char *strtab = NULL;
    const ElfW(Rela) *rel[2] = {NULL, NULL};
    size_t relsz[2] = {0, 0};
    for (; dyn && dyn->d_tag != DT_NULL; dyn++) {
        if (dyn->d_tag == DT_SYMTAB) symtab = (const ElfW(Sym) *)dyn->d_un.d_ptr;
        if (dyn->d_tag == DT_STRTAB) strtab = (const char *)dyn->d_un.d_ptr;
        if (dyn->d_tag == DT_JMPREL) rel[0] = (const ElfW(Rela) *)dyn->d_un.d_ptr;
        if (dyn->d_tag == DT_PLTRELSZ) relsz[0] = dyn->d_un.d_val;
        if (dyn->d_tag == DT_RELA) rel[1] = (const ElfW(Rela) *)dyn->d_un.d_ptr;
        if (dyn->d_tag == DT_RELASZ) relsz[1] = dyn->d_un.d_val;
    }
    for (int k = 0; k < 2 && symtab && strtab; k++)
        for (size_t i = 0; rel[k] && i < relsz[k] / sizeof(ElfW(Rela)); i++) {
            size_t type = ELF64_R_TYPE(rel[k][i].r_info), sym = ELF64_R_SYM(rel[k][i].r_info);
            if ((type == R_X86_64_JUMP_SLOT || type == R_X86_64_GLOB_DAT) &&
                !strcmp(strtab + symtab[sym].st_name, "getppid")) {
                *out = (void **)(info->dlpi_addr + rel[k][i].r_offset);
                return 1;
            }
        }
    return 1; /* the executable comes first: the others are not searched */
}

static int exists(const char *dir, const char *name)
{
    char p[4096];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    return access(p, F_OK) == 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) return 2;
    void **found = NULL;
    dl_iterate_phdr(find_slot, &found);
    if (!found) return 4;
    pid_t (**slot)(void) = (pid_t(**)(void))found;
    long page = sysconf(_SC_PAGESIZE);
    void *pg = (void *)((uintptr_t)slot & ~(uintptr_t)(page - 1));
    if (mprotect(pg, (size_t)page, PROT_READ | PROT_WRITE) != 0) return 3;
    pid_t want = getppid();
    orig = *slot;
    *slot = my_getppid; /* the program's hook */
    calls(100, want);
    char p[4096];
    snprintf(p, sizeof p, "%s/ready", argv[1]);
    int fd = open(p, O_WRONLY | O_CREAT, 0644);
    if (fd >= 0) close(fd);
    for (int i = 0; i < 30000 && !exists(argv[1], "go"); i++) {
        struct timespec d = {0, 1000000};
        nanosleep(&d, NULL);
    }
    calls(100, want);
    *slot = orig; /* unhooked: a SIGSEGV if the page was made read-only again */
    calls(100, want);
    printf("wrapper: %ld of 200 calls, %ld wrong results\n", (long)wrapped, (long)wrong);
    return wrapped == 200 && !wrong ? 0 : 1;
}
