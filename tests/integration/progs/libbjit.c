/* libbjit: a tiny code generator for bexc_fde (jit). Its thunk calls back fn(arg) from memory
 * it mapped, and is described to libgcc by its own _Unwind_Find_FDE; any other address goes to
 * the next definition. Nothing here is traced. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include "behave.h"

struct dwarf_eh_bases {
    void *tbase, *dbase, *func;
};
typedef const void *(*find_fn)(void *, struct dwarf_eh_bases *);

/* sub $8,%rsp; mov %rdi,%rax; mov %esi,%edi; call *%rax; add $8,%rsp; ret */
static const unsigned char thunk_code[] = {0x48, 0x83, 0xec, 0x08, 0x48, 0x89, 0xf8, 0x89,
                                           0xf7, 0xff, 0xd0, 0x48, 0x83, 0xc4, 0x08, 0xc3};
static unsigned char *code;
static uint64_t eh[8]; /* CIE (24 bytes) then FDE (32 bytes) */
long bjit_lookups;

NOTRACE void *bjit_thunk(void)
{
    if (code) return code;
    unsigned char *c = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    memcpy(c, thunk_code, sizeof thunk_code);
    mprotect(c, 4096, PROT_READ | PROT_EXEC);
    unsigned char *p = (unsigned char *)eh;
    /* CIE: length 20, id 0, version 1, "zR", code align 1, data align -8, ra 16, aug 1 byte:
     * absptr; def_cfa rsp+8; rip at cfa-8; nop nop */
    static const unsigned char cie[] = {20, 0,    0,  0, 0,    0,    0, 0, 1,    'z', 'R', 0,
                                        1,  0x78, 16, 1, 0x00, 0x0c, 7, 8, 0x90, 1,   0,   0};
    memcpy(p, cie, sizeof cie);
    /* FDE: length 28, CIE pointer, pc_begin, pc_range, aug 0, advance 4, def_cfa_offset 16,
     * nop */
    unsigned char *f = p + sizeof cie;
    uint32_t len = 28, back = (uint32_t)(f + 4 - p);
    uint64_t begin = (uint64_t)(uintptr_t)c, range = sizeof thunk_code;
    memcpy(f, &len, 4);
    memcpy(f + 4, &back, 4);
    memcpy(f + 8, &begin, 8);
    memcpy(f + 16, &range, 8);
    const unsigned char insn[] = {0, 0x44, 0x0e, 16, 0, 0, 0, 0};
    memcpy(f + 24, insn, sizeof insn);
    code = c;
    return code;
}

NOTRACE const void *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases)
{
    static find_fn next;
    bjit_lookups++;
    if (code && (unsigned char *)pc >= code && (unsigned char *)pc < code + sizeof thunk_code) {
        bases->tbase = bases->dbase = NULL;
        bases->func = code;
        return (const unsigned char *)eh + 24;
    }
    if (!next) next = (find_fn)dlsym(RTLD_NEXT, "_Unwind_Find_FDE");
    return next(pc, bases);
}
