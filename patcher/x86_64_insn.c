/*
 * x86_64_insn.c - recognise function-entry hook sites in x86-64 code (the bytes that replace them
 * are x86_64_gen.c's). Pure functions on byte buffers: no ELF, no live memory, no globals.
 *
 * What the compilers emit (gcc 12.2, clang 14.0.6, binutils ld 2.40; objdump of .o files and of
 * linked PIE / .so / static files; -O0 and -O2 give the same site, only the prologue differs):
 *
 *   gcc -pg (PIE default)         55 48 89 e5 [prologue] ff 15 <GOT slot of mcount>
 *   gcc -pg -fno-pie              55 48 89 e5 [prologue] e8 <mcount@plt>
 *       [prologue] = what gcc puts before the call: push %rbx (53) / push %r12 (41 54),
 *       sub $n,%rsp (48 83 ec ib / 48 81 ec id), and stack realignment
 *       and $-64,%rsp (48 83 e4 c0) + sub/add (48 83 c4 80); with -fstack-clash-protection
 *       a probe loop (lea -n(%rsp),%r11; sub $0x1000,%rsp; orq $0,(%rsp); cmp; jne back).
 *       Dynamic realignment through a DRAP register starts *before* push %rbp:
 *       4c 8d 54 24 08 (lea 8(%rsp),%r10), 48 83 e4 c0, 41 ff 72 f8 (push -8(%r10)), 55 ...
 *       There 8(%rbp) is a *copy* of the return address, so a return hook placed through it
 *       would be bypassed: such functions are deliberately not recognised.
 *   clang -pg                     55 48 89 e5 [prologue] e8 <mcount@plt>
 *       clang's call is an ordinary IR call, so before it come pushes, realignment AND the
 *       copies of argument registers it must keep: mov %edi,%ebx (89 fb), mov %edi,%r14d
 *       (41 89 fe), mov %r9,-0x48(%rbp) (4c 89 4d b8), movsd %xmm0,-0x38(%rbp)
 *       (f2 0f 11 45 c8; c5 fb 11 45 c8 with AVX), mov %fs:0x28,%rax (64 48 8b 04 25 28 00 00
 *       00) with a stack protector, lea 0x10(%rbp),%rax, a probe loop with movq $0,(%rsp)...
 *       Hence the small length decoder below: the call is found by walking whole instructions,
 *       never by searching bytes (a byte search could land inside an immediate).
 *   gcc -pg -mfentry (PIE/PIC)    ff 15 <GOT slot of __fentry__>       at the function start
 *   gcc -pg -mfentry -fno-pie     e8 <__fentry__@plt>                  at the function start
 *   clang -pg -mfentry            e8 <__fentry__@plt> (PIC or not)     at the function start
 *   -static / locally defined     67 e8 <__fentry__> or <mcount>: ld relaxes the GOT call to
 *                                 "addr32 call" (6 bytes), same boundary at +6 as ff 15
 *   gcc -pg -mfentry -mnop-mcount -mrecord-mcount -fno-pie
 *                                 0f 1f 44 00 00 at the function start, listed in __mcount_loc
 *                                 (-mnop-mcount is rejected with -fPIC; without -mfentry the nop
 *                                 sits after the prologue, where the call would be)
 *   gcc -fpatchable-function-entry=5      90 90 90 90 90 at the function start
 *   clang -fpatchable-function-entry=5    0f 1f 44 00 08 (a 5-byte nop with disp8 = 8)
 *   -fcf-protection (both compilers): f3 0f 1e fa (endbr64) comes first, the site after it;
 *       __patchable_function_entries points after the endbr64 with gcc 12 and clang 14.
 *   GNU C nested functions (gcc only: clang has none), whose static chain arrives in r10:
 *     -pg -mfentry [-mnop-mcount -mrecord-mcount]
 *                                 41 52 (push %r10), the site (any of the fentry shapes above,
 *                                 or its nop), 41 5a (pop %r10), at the function start, -O0
 *                                 and -O2 alike; only the nested function itself, not the one
 *                                 that contains it. __mcount_loc lists the site, not the push.
 *     -pg                         push %r10 / mcount call / pop %r10 after the prologue: an
 *                                 ordinary mcount site (the push is walked like any other).
 *     -fpatchable-function-entry  the nops come first, r10 is not touched.
 *
 * The 5-byte nop is recognised with any disp8 (0f 1f 44 00 xx) because every such encoding is
 * one instruction.
 */
#include "ftr_patcher.h"

#include <string.h>

#define FTR_X_NAME(name, val, str) [val] = str,
static const char *const shape_names[] = {FTR_SITE_SHAPES(FTR_X_NAME)};
#undef FTR_X_NAME

const char *ftr_site_shape_name(unsigned shape)
{
    if (shape < sizeof(shape_names) / sizeof(shape_names[0]) && shape_names[shape])
        return shape_names[shape];
    return "?";
}

static int32_t rd_s32(const uint8_t *p)
{
    int32_t v;
    memcpy(&v, p, sizeof v); /* x86-64 is little-endian, like the code we read */
    return v;
}

static int is_endbr64(const uint8_t *c, size_t avail)
{
    return avail >= 4 && c[0] == 0xf3 && c[1] == 0x0f && c[2] == 0x1e && c[3] == 0xfa;
}

/* A direct call's target, told apart by t. Zero fields of t are unused, never matched. */
static unsigned call_shape(const struct ftr_hook_targets *t, uint64_t target)
{
    if (!t) return FTR_SHAPE_FENTRY_REL;
    if (t->stub_lo < t->stub_hi && target >= t->stub_lo && target < t->stub_hi)
        return FTR_SHAPE_CALL_OURS;
    if (target && (target == t->fentry_call || target == t->fentry_call2))
        return FTR_SHAPE_FENTRY_REL;
    if (target && (target == t->mcount_call || target == t->mcount_call2))
        return FTR_SHAPE_MCOUNT_REL;
    if (t->plt_shape && target >= t->plt_lo && target < t->plt_hi) return t->plt_shape;
    return FTR_SHAPE_NONE;
}

unsigned ftr_x86_classify(const uint8_t *code, size_t avail, uint64_t addr,
                          const struct ftr_hook_targets *t, uint8_t *len)
{
    unsigned shape = FTR_SHAPE_NONE;
    uint8_t n = 0;

    if (avail >= 6 && code[0] == 0xff && code[1] == 0x15) {
        /* call *disp32(%rip): the slot is relative to the end of the 6-byte instruction */
        uint64_t slot = addr + 6 + (int64_t)rd_s32(code + 2);
        n = 6;
        if (!t)
            shape = FTR_SHAPE_FENTRY_GOT;
        else if (t->fentry_got && slot == t->fentry_got)
            shape = FTR_SHAPE_FENTRY_GOT;
        else if (t->mcount_got && slot == t->mcount_got)
            shape = FTR_SHAPE_MCOUNT_GOT;
    } else if (avail >= 5 && code[0] == 0xe8) {
        n = 5;
        shape = call_shape(t, addr + 5 + (int64_t)rd_s32(code + 1));
    } else if (avail >= 6 && code[0] == 0x67 && code[1] == 0xe8) {
        n = 6; /* addr32 call: the linker's relaxation of ff 15 when the target is local */
        shape = call_shape(t, addr + 6 + (int64_t)rd_s32(code + 2));
        if (shape == FTR_SHAPE_CALL_OURS) shape = FTR_SHAPE_NONE; /* we never write this form */
    } else if (avail >= 5 && code[0] == 0x0f && code[1] == 0x1f && code[2] == 0x44 &&
               code[3] == 0x00) {
        n = 5;
        shape = FTR_SHAPE_NOP5;
    } else if (avail >= 5 && !memcmp(code, "\x90\x90\x90\x90\x90", 5)) {
        n = 5;
        shape = FTR_SHAPE_NOPS;
    }
    if (shape != FTR_SHAPE_NONE && len) *len = n;
    return shape;
}

/* ---- a length decoder for the instructions that may precede an mcount call ----
 * Only instructions without control flow are known, plus conditional jumps (stack probe
 * loops), which the walker accepts only backwards. Anything else (calls, ret, jmp, EVEX, x87,
 * string ops...) is unknown and ends the walk: we would rather miss a site than patch bytes
 * that are not an instruction boundary. */

struct insn {
    unsigned len;
    int branch;  /* 1: relative conditional jump */
    int64_t rel; /* its displacement, from the end of the instruction */
};

/* Length of a ModRM operand (ModRM, optional SIB, displacement) at c[0], or 0. */
static unsigned modrm_len(const uint8_t *c, size_t avail)
{
    if (avail < 1) return 0;
    unsigned mod = c[0] >> 6, rm = c[0] & 7, n = 1;
    if (mod != 3 && rm == 4) {
        if (avail < 2) return 0;
        n = 2;
        if (mod == 0 && (c[1] & 7) == 5) n += 4; /* SIB without base: disp32 */
    }
    if (mod == 0 && rm == 5)
        n += 4; /* RIP-relative */
    else if (mod == 1)
        n += 1;
    else if (mod == 2)
        n += 4;
    return n <= avail ? n : 0;
}

/* Operand layout of a two-byte (0f xx) or VEX map-1 opcode: -1 unknown, else the immediate
 * size after the ModRM operand. Jcc rel32 (0f 80..8f) is handled by the caller. */
static int op0f_imm(uint8_t op)
{
    if ((op >= 0x10 && op <= 0x1f) || (op >= 0x28 && op <= 0x2f) || (op >= 0x40 && op <= 0x6f) ||
        (op >= 0x74 && op <= 0x76) || op == 0x7e || op == 0x7f || (op >= 0x90 && op <= 0x9f) ||
        op == 0xa3 || op == 0xab || op == 0xaf || op == 0xb6 || op == 0xb7 || op == 0xbe ||
        op == 0xbf || (op >= 0xd0 && op <= 0xfe))
        return 0;
    if ((op >= 0x70 && op <= 0x73) || op == 0xa4 || op == 0xac || op == 0xba || op == 0xc2 ||
        (op >= 0xc4 && op <= 0xc6))
        return 1;
    return -1;
}

/* Decodes one instruction at c; @return 0 when unknown or truncated. */
static int decode(const uint8_t *c, size_t avail, struct insn *in)
{
    size_t p = 0;
    int opsize16 = 0, rexw = 0, npfx = 0;
    int imm = -1; /* immediate bytes after the ModRM operand; -1: no ModRM operand */

    memset(in, 0, sizeof *in);
    while (p < avail && npfx < 4 &&
           (c[p] == 0x66 || c[p] == 0xf2 || c[p] == 0xf3 || c[p] == 0x64 || c[p] == 0x65 ||
            c[p] == 0x2e || c[p] == 0x3e)) {
        opsize16 |= c[p] == 0x66;
        p++, npfx++;
    }
    if (p < avail && (c[p] & 0xf0) == 0x40) {
        rexw = (c[p] & 8) != 0;
        p++;
    }
    if (p >= avail) return 0;
    uint8_t op = c[p++];
    size_t fixed = 0; /* bytes that follow the opcode when there is no ModRM */
    unsigned immz = opsize16 ? 2 : 4;

    if (op == 0x0f) {
        if (p >= avail) return 0;
        uint8_t op2 = c[p++];
        if (op2 >= 0x80 && op2 <= 0x8f) {
            if (p + 4 > avail) return 0;
            in->branch = 1;
            in->rel = rd_s32(c + p);
            in->len = p + 4;
            return 1;
        }
        if (op2 == 0x38)
            p++, imm = 0; /* 0f 38 xx /r */
        else if (op2 == 0x3a)
            p++, imm = 1; /* 0f 3a xx /r ib */
        else if ((imm = op0f_imm(op2)) < 0)
            return 0;
    } else if ((op == 0xc4 || op == 0xc5) && p == 1) {
        /* VEX (prefixes and REX are not allowed before it) */
        unsigned map = 1;
        if (op == 0xc4) {
            if (p + 2 > avail) return 0;
            map = c[p] & 0x1f;
            p += 2;
        } else {
            p += 1;
        }
        if (p >= avail) return 0;
        uint8_t vop = c[p++];
        if (map == 1)
            imm = (vop >= 0x80 && vop <= 0x8f) ? -1 : op0f_imm(vop);
        else if (map == 2)
            imm = 0;
        else if (map == 3)
            imm = 1;
        if (imm < 0) return 0;
    } else if (op <= 0x3f && (op & 7) <= 3) {
        imm = 0; /* add/or/adc/sbb/and/sub/xor/cmp r/m forms */
    } else if (op <= 0x3f && (op & 7) == 4) {
        fixed = 1; /* op al, imm8 */
    } else if (op <= 0x3f && (op & 7) == 5) {
        fixed = immz; /* op eax, imm32 */
    } else if (op >= 0x50 && op <= 0x57) {
        fixed = 0; /* push reg */
    } else if (op == 0x63 || (op >= 0x84 && op <= 0x8b) || op == 0x8d ||
               (op >= 0xd0 && op <= 0xd3)) {
        imm = 0; /* movsxd, test, xchg, mov, lea, shifts by 1/cl */
    } else if (op == 0x68) {
        fixed = 4;
    } else if (op == 0x6a) {
        fixed = 1;
    } else if (op == 0x69 || op == 0x81 || op == 0xc7) {
        imm = immz;
    } else if (op == 0x6b || op == 0x80 || op == 0x83 || op == 0xc0 || op == 0xc1 || op == 0xc6) {
        imm = 1;
    } else if (op >= 0x70 && op <= 0x7f) {
        if (p + 1 > avail) return 0;
        in->branch = 1;
        in->rel = (int8_t)c[p];
        in->len = p + 1;
        return 1;
    } else if (op == 0x90 || op == 0x98 || op == 0x99) {
        fixed = 0; /* nop, cltq, cqto */
    } else if (op == 0xa8) {
        fixed = 1;
    } else if (op == 0xa9) {
        fixed = immz;
    } else if (op >= 0xb0 && op <= 0xb7) {
        fixed = 1;
    } else if (op >= 0xb8 && op <= 0xbf) {
        fixed = rexw ? 8 : immz; /* movabs with REX.W */
    } else if (op == 0xf6 || op == 0xf7) {
        if (p >= avail) return 0;
        unsigned reg = (c[p] >> 3) & 7;
        imm = reg <= 1 ? (op == 0xf6 ? 1 : (int)immz) : 0; /* test has an immediate */
    } else {
        return 0;
    }

    if (imm >= 0) {
        if (p >= avail) return 0;
        unsigned m = modrm_len(c + p, avail - p);
        if (!m) return 0;
        p += m + (unsigned)imm;
    } else {
        p += fixed;
    }
    if (p > avail || p > 15) return 0;
    in->len = p;
    return 1;
}

/* Walks [endbr64] push %rbp; mov %rsp,%rbp and the instructions that follow.
 * stop >= 0: @return stop if the walk lands exactly on it (a site listed by the compiler), -1
 * otherwise. stop < 0: @return the offset of the first mcount call or of our call (shape and
 * len set), -1 when an unknown instruction or another call comes first. */
#define WALK_MAX_INSNS 64

static long walk_prologue(const uint8_t *code, size_t avail, uint64_t func,
                          const struct ftr_hook_targets *t, long stop, unsigned *shape,
                          uint8_t *len)
{
    size_t p = is_endbr64(code, avail) ? 4 : 0;

    if (p + 4 > avail || code[p] != 0x55) return -1;
    /* mov %rsp,%rbp has two encodings; compilers use 48 89 e5, assemblers may pick 48 8b ec */
    if (memcmp(code + p + 1, "\x48\x89\xe5", 3) && memcmp(code + p + 1, "\x48\x8b\xec", 3))
        return -1;
    size_t body = p + 4;
    p = body;
    for (int i = 0; i < WALK_MAX_INSNS && p < avail; i++) {
        if (stop >= 0) {
            if ((size_t)stop == p) return stop;
            if ((size_t)stop < p) return -1;
        } else {
            uint8_t n = 0;
            unsigned s = ftr_x86_classify(code + p, avail - p, func + p, t, &n);
            if (!t && s == FTR_SHAPE_FENTRY_GOT)
                s = FTR_SHAPE_MCOUNT_GOT; /* no targets: the position decides */
            else if (!t && s == FTR_SHAPE_FENTRY_REL)
                s = FTR_SHAPE_MCOUNT_REL;
            if (ftr_shape_is_mcount(s) || s == FTR_SHAPE_CALL_OURS) {
                *shape = s;
                *len = n;
                return (long)p;
            }
        }
        struct insn in;
        if (!decode(code + p, avail - p, &in)) return -1;
        if (in.branch) {
            /* only a loop back into the already walked prologue (stack probing) */
            int64_t to = (int64_t)(p + in.len) + in.rel;
            if (to < (int64_t)body || to > (int64_t)p) return -1;
        }
        p += in.len;
    }
    if (stop >= 0 && (size_t)stop == p) return stop;
    return -1;
}

int ftr_x86_prologue_reaches(const uint8_t *code, size_t avail, size_t off)
{
    if (off > avail || off > (size_t)0x7fffffff) return 0;
    return walk_prologue(code, avail, 0, NULL, (long)off, NULL, NULL) == (long)off;
}

static int is_push_r10(const uint8_t *c, size_t avail)
{
    return avail >= 2 && c[0] == 0x41 && c[1] == 0x52;
}

int ftr_x86_chain_site(const uint8_t *code, size_t avail, size_t off, unsigned len)
{
    size_t entry = is_endbr64(code, avail) ? 4 : 0;
    if (off != entry + 2 || len > FTR_SITE_LEN_MAX || off + len + 2 > avail) return 0;
    return is_push_r10(code + entry, avail - entry) && code[off + len] == 0x41 &&
           code[off + len + 1] == 0x5a;
}

int ftr_x86_find_site(const uint8_t *code, size_t avail, uint64_t func,
                      const struct ftr_hook_targets *t, unsigned *shape, uint8_t *len)
{
    size_t off = is_endbr64(code, avail) ? 4 : 0;
    uint8_t n = 0;
    /* a nested function's push %r10 before the site: it must be popped right after it */
    size_t first = is_push_r10(code + off, avail - off) ? off + 2 : off;
    unsigned s = ftr_x86_classify(code + first, avail - first, func + first, t, &n);
    if (first != off && !ftr_x86_chain_site(code, avail, first, n)) s = FTR_SHAPE_NONE;

    /* at the very start only a __fentry__ call (or ours) is a site: a nop there is not
     * evidence of one without the compiler's list, and mcount needs the frame first */
    if (s == FTR_SHAPE_FENTRY_GOT || s == FTR_SHAPE_FENTRY_REL || s == FTR_SHAPE_CALL_OURS) {
        *shape = s;
        *len = n;
        return (int)first;
    }
    unsigned ws = FTR_SHAPE_NONE;
    long at = walk_prologue(code, avail, func, t, -1, &ws, &n);
    if (at < 0) return -1;
    *shape = ws;
    *len = n;
    return (int)at;
}
