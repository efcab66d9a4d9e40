/*
 * x86_64_gen.c - the bytes ftrace-run writes (x86-64): a site's NOP, CALL and JMP states, the
 * per-site stub, and what a thread that meets a site in the middle of its rewrite must do
 * instead (the breakpoint handler of text_poke_bp.c emulates the instruction the site is
 * becoming, as the kernel's int3_emulate_call()/int3_emulate_jmp() do).
 * Pure functions on byte buffers: no live memory, no globals.
 *
 * Layouts (every state keeps an instruction boundary at +5, and ends at site+len):
 *   NOP   0f 1f 44 00 00 [90]        nopl 0(%rax,%rax,1)
 *   CALL  e8 <rel32>     [90]        call stub
 *   JMP   e9 <rel32>     [90]        jmp stub
 *   stub  c7 44 24 80 <imm32> ff 25 <rel32> cc...  movl $index,-128(%rsp); jmp *slot(%rip)
 */
#include "ftr_patcher.h"

#include <string.h>

static void wr_s32(uint8_t *p, int32_t v)
{
    memcpy(p, &v, sizeof v); /* x86-64 is little-endian, like the code we write */
}

static int32_t rd_s32(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v);
    return v;
}

static int rel32_ok(int64_t d)
{
    return d >= INT32_MIN && d <= INT32_MAX;
}

void ftr_x86_gen_nop(uint8_t *out, unsigned len)
{
    static const uint8_t nop5[5] = {0x0f, 0x1f, 0x44, 0x00, 0x00};
    unsigned i = 0;

    if (len >= 5) {
        memcpy(out, nop5, 5);
        i = 5;
    }
    for (; i < len; i++)
        out[i] = 0x90; /* keeps the boundary at +5 (6-byte sites) */
}

static int gen_rel(uint8_t op, uint8_t *out, unsigned len, uint64_t site, uint64_t target)
{
    if (len < 5 || len > FTR_SITE_LEN_MAX) return -1;
    int64_t d = (int64_t)(target - (site + 5));
    if (!rel32_ok(d)) return -1;
    out[0] = op;
    wr_s32(out + 1, (int32_t)d);
    for (unsigned i = 5; i < len; i++)
        out[i] = 0x90;
    return 0;
}

int ftr_x86_gen_call(uint8_t *out, unsigned len, uint64_t site, uint64_t target)
{
    return gen_rel(0xe8, out, len, site, target);
}

int ftr_x86_gen_jmp(uint8_t *out, unsigned len, uint64_t site, uint64_t target)
{
    return gen_rel(0xe9, out, len, site, target);
}

int ftr_x86_gen_stub(uint8_t *out, uint64_t at, uint32_t index, uint64_t slot)
{
    /* c7 44 24 80 imm32 (8 bytes) then ff 25 rel32 (6 bytes): rel32 counts from at + 14.
     * Nothing moves the stack pointer: the stub's unwind rule is that of a function's first
     * byte. */
    int64_t d = (int64_t)(slot - (at + 14));
    if (!rel32_ok(d)) return -1;
    out[0] = 0xc7;
    out[1] = 0x44;
    out[2] = 0x24;
    out[3] = (uint8_t)FTR_STUB_INDEX_DISP;
    memcpy(out + 4, &index, 4);
    out[8] = 0xff;
    out[9] = 0x25;
    wr_s32(out + 10, (int32_t)d);
    memset(out + 14, 0xcc, FTR_STUB_SIZE - 14); /* int3: never reached */
    return 0;
}

int ftr_x86_emulation(const uint8_t *bytes, unsigned len, uint64_t addr, struct ftr_emu *out)
{
    if (len < 5 || len > FTR_SITE_LEN_MAX) return -1;
    /* what follows the instruction at +5 must be padding that the emulation may skip */
    for (unsigned i = 5; i < len; i++)
        if (bytes[i] != 0x90) return -1;
    out->addr = addr;
    out->next = addr + len;
    if (bytes[0] == 0xe8 || bytes[0] == 0xe9) {
        out->kind = bytes[0] == 0xe8 ? FTR_EMU_CALL : FTR_EMU_JMP;
        out->target = addr + 5 + (uint64_t)(int64_t)rd_s32(bytes + 1);
        return 0;
    }
    static const uint8_t nop5[4] = {0x0f, 0x1f, 0x44, 0x00}; /* any disp8 */
    int nops = 1;
    for (unsigned i = 0; i < 5; i++)
        nops &= bytes[i] == 0x90;
    if (nops || !memcmp(bytes, nop5, sizeof nop5)) {
        out->kind = FTR_EMU_SKIP;
        out->target = out->next;
        return 0;
    }
    return -1;
}
