/*
 * x86_64_got.c - which GOT slots a module's text only calls through (ftr_patcher.h).
 *
 * A -fno-plt call is `call *f@GOTPCREL(%rip)` (ff 15 disp32) or, as a tail call, `jmp *...`
 * (ff 25 disp32). The same GLOB_DAT slot also serves `mov f@GOTPCREL(%rip), %reg`, an address
 * taken: giving such a slot our stub would change what the program compares and stores. So a
 * slot is hooked only if no other instruction reads it. Without decoding the whole text, every
 * 4-byte window is taken for a disp32 that ends an instruction (RIP-relative operands without
 * an immediate): a window that points at the slot and is not preceded by ff 15 / ff 25 is taken
 * for a read. A coincidence only leaves a slot unhooked; a read with an immediate after the
 * displacement (cmpq $0, f@GOTPCREL(%rip): a weak function's test) compares the pointer with a
 * constant, which the stub does not change (it is never 0 where the slot was not). A load into
 * a register followed at once by a call through that register (clang -O0) counts as a call.
 */
#include <stdlib.h>
#include <string.h>

#include "ftr_patcher.h"

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return x < y ? -1 : x > y;
}

/* mov slot(%rip), %reg and at once call/jmp *%reg (clang -O0 -fno-plt): a call too, if the
 * register is one the call clobbers (System V caller-saved: rax rcx rdx rsi rdi r8-r11), so
 * that the loaded address cannot be used after it. */
static int loaded_then_called(const uint8_t *text, size_t len, size_t i)
{
    if (i < 3 || i + 4 + 3 > len) return 0;
    uint8_t rex = text[i - 3], op = text[i - 2], modrm = text[i - 1];
    if ((rex != 0x48 && rex != 0x4c) || op != 0x8b || (modrm & 0xc7) != 0x05) return 0;
    unsigned reg = (modrm >> 3) & 7;
    if (rex == 0x48 ? (reg >= 3 && reg <= 5) : reg > 3) return 0; /* callee-saved, or rsp */
    const uint8_t *n = text + i + 4;
    if (rex == 0x48) return n[0] == 0xff && (n[1] == (0xd0 | reg) || n[1] == (0xe0 | reg));
    return n[0] == 0x41 && n[1] == 0xff && (n[2] == (0xd0 | reg) || n[2] == (0xe0 | reg));
}

size_t ftr_x86_got_reads(const uint8_t *text, size_t len, uint64_t text_addr, const uint64_t *slots,
                         size_t n, uint8_t *read)
{
    if (!n || len < 6) return 0;
    uint64_t lo = slots[0], hi = slots[n - 1] + 8;
    size_t found = 0;
    for (size_t i = 2; i + 4 <= len; i++) {
        int32_t disp;
        memcpy(&disp, text + i, 4);
        uint64_t target = text_addr + i + 4 + (uint64_t)(int64_t)disp;
        if (target < lo || target >= hi) continue;
        const uint64_t *hit = bsearch(&target, slots, n, sizeof *slots, cmp_u64);
        if (!hit) continue;
        if (text[i - 2] == 0xff && (text[i - 1] == 0x15 || text[i - 1] == 0x25)) continue;
        if (loaded_then_called(text, len, i)) continue;
        size_t k = (size_t)(hit - slots);
        found += !read[k];
        read[k] = 1;
    }
    return found;
}
