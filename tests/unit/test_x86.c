/*
 * test_x86.c - the site decoder and byte generators of patcher/x86_64_insn.c on hand-written
 * buffers. The byte sequences are those gcc 12 / clang 14 emit (see the comment at the top of
 * x86_64_insn.c); addresses are arbitrary runtime addresses chosen for the displacements.
 */
#include <criterion/criterion.h>
#include <stdint.h>
#include <string.h>

#include "ftr_patcher.h"

#define BUF(...) ((const uint8_t[]){__VA_ARGS__})
#define LEN(...) sizeof((const uint8_t[]){__VA_ARGS__})

/* site at 0x1000: ff 15 with disp 0x2000 -> slot 0x3006; e8 with rel 0x100 -> 0x1105 */
#define AT 0x1000u

static unsigned classify(const uint8_t *b, size_t n, const struct ftr_hook_targets *t, uint8_t *len)
{
    *len = 0xee;
    return ftr_x86_classify(b, n, AT, t, len);
}

Test(x86, shape_names)
{
    cr_assert_str_eq(ftr_site_shape_name(FTR_SHAPE_NONE), "none");
    cr_assert_str_eq(ftr_site_shape_name(FTR_SHAPE_FENTRY_GOT), "call *__fentry__@GOTPCREL(%rip)");
    cr_assert_str_eq(ftr_site_shape_name(FTR_SHAPE_MCOUNT_REL), "call mcount");
    cr_assert_str_eq(ftr_site_shape_name(FTR_SHAPE_NOPS), "1-byte nops");
    cr_assert_str_eq(ftr_site_shape_name(FTR_SHAPE_CALL_OURS), "call to a stub");
    cr_assert_str_eq(ftr_site_shape_name(8), "?");
    cr_assert_str_eq(ftr_site_shape_name(~0u), "?");
    cr_assert(ftr_shape_is_mcount(FTR_SHAPE_MCOUNT_GOT) &&
              ftr_shape_is_mcount(FTR_SHAPE_MCOUNT_REL));
    cr_assert(!ftr_shape_is_mcount(FTR_SHAPE_FENTRY_GOT) && !ftr_shape_is_mcount(FTR_SHAPE_NOP5));
}

Test(x86, classify_got_call)
{
    const uint8_t *b = BUF(0xff, 0x15, 0x00, 0x20, 0x00, 0x00, 0xc3);
    uint8_t len;
    cr_assert_eq(classify(b, 7, NULL, &len), FTR_SHAPE_FENTRY_GOT);
    cr_assert_eq(len, 6);

    struct ftr_hook_targets t = {.fentry_got = 0x3006};
    cr_assert_eq(classify(b, 6, &t, &len), FTR_SHAPE_FENTRY_GOT);
    cr_assert_eq(len, 6);
    t = (struct ftr_hook_targets){.mcount_got = 0x3006};
    cr_assert_eq(classify(b, 6, &t, &len), FTR_SHAPE_MCOUNT_GOT);
    /* another slot, or a direct target with the same value, is not the hook */
    t = (struct ftr_hook_targets){
        .fentry_got = 0x3007, .mcount_got = 0x3005, .fentry_call = 0x3006};
    cr_assert_eq(classify(b, 6, &t, &len), FTR_SHAPE_NONE);
    cr_assert_eq(len, 0xee, "len is only set for a site");
    /* truncated */
    cr_assert_eq(classify(b, 5, NULL, &len), FTR_SHAPE_NONE);
    /* negative displacement: slot below the site */
    const uint8_t *n = BUF(0xff, 0x15, 0xfa, 0xff, 0xff, 0xff);
    t = (struct ftr_hook_targets){.fentry_got = AT};
    cr_assert_eq(classify(n, 6, &t, &len), FTR_SHAPE_FENTRY_GOT);
}

Test(x86, classify_direct_call)
{
    const uint8_t *b = BUF(0xe8, 0x00, 0x01, 0x00, 0x00);
    uint8_t len;
    cr_assert_eq(classify(b, 5, NULL, &len), FTR_SHAPE_FENTRY_REL);
    cr_assert_eq(len, 5);
    cr_assert_eq(classify(b, 4, NULL, &len), FTR_SHAPE_NONE);

    struct ftr_hook_targets t = {.fentry_call = 0x1105};
    cr_assert_eq(classify(b, 5, &t, &len), FTR_SHAPE_FENTRY_REL);
    t = (struct ftr_hook_targets){.fentry_call = 0x9999, .fentry_call2 = 0x1105};
    cr_assert_eq(classify(b, 5, &t, &len), FTR_SHAPE_FENTRY_REL);
    t = (struct ftr_hook_targets){.mcount_call = 0x1105};
    cr_assert_eq(classify(b, 5, &t, &len), FTR_SHAPE_MCOUNT_REL);
    t = (struct ftr_hook_targets){.mcount_call2 = 0x1105};
    cr_assert_eq(classify(b, 5, &t, &len), FTR_SHAPE_MCOUNT_REL);
    /* a GOT slot at that address does not make a direct call a hook call */
    t = (struct ftr_hook_targets){.fentry_got = 0x1105, .mcount_call = 0x1104};
    cr_assert_eq(classify(b, 5, &t, &len), FTR_SHAPE_NONE);
    /* backwards */
    const uint8_t *back = BUF(0xe8, 0xfb, 0xfe, 0xff, 0xff); /* -0x105 */
    t = (struct ftr_hook_targets){.mcount_call = AT + 5 - 0x105};
    cr_assert_eq(classify(back, 5, &t, &len), FTR_SHAPE_MCOUNT_REL);
}

Test(x86, classify_zero_fields_are_unused)
{
    /* e8 at AT whose target is address 0 must not match the unused (zero) fields */
    int32_t rel = -(int32_t)(AT + 5);
    uint8_t b[5] = {0xe8};
    memcpy(b + 1, &rel, 4);
    struct ftr_hook_targets t = {0};
    uint8_t len;
    cr_assert_eq(classify(b, 5, &t, &len), FTR_SHAPE_NONE);
    int32_t disp = -(int32_t)(AT + 6);
    uint8_t g[6] = {0xff, 0x15};
    memcpy(g + 2, &disp, 4);
    cr_assert_eq(classify(g, 6, &t, &len), FTR_SHAPE_NONE);
}

Test(x86, classify_relaxed_addr32_call)
{
    /* 67 e8 rel32: 6 bytes, target relative to +6 */
    const uint8_t *b = BUF(0x67, 0xe8, 0x00, 0x01, 0x00, 0x00);
    uint8_t len;
    struct ftr_hook_targets t = {.fentry_call = 0x1106};
    cr_assert_eq(classify(b, 6, &t, &len), FTR_SHAPE_FENTRY_REL);
    cr_assert_eq(len, 6);
    t = (struct ftr_hook_targets){.mcount_call2 = 0x1106};
    cr_assert_eq(classify(b, 6, &t, &len), FTR_SHAPE_MCOUNT_REL);
    t = (struct ftr_hook_targets){.fentry_call = 0x1105};
    cr_assert_eq(classify(b, 6, &t, &len), FTR_SHAPE_NONE);
    cr_assert_eq(classify(b, 5, NULL, &len), FTR_SHAPE_NONE);
    /* we never write this form, so it is never "ours" */
    t = (struct ftr_hook_targets){.stub_lo = 0x1100, .stub_hi = 0x1200};
    cr_assert_eq(classify(b, 6, &t, &len), FTR_SHAPE_NONE);
}

Test(x86, classify_ours_and_plt_fallback)
{
    const uint8_t *b = BUF(0xe8, 0x00, 0x01, 0x00, 0x00); /* -> 0x1105 */
    uint8_t len;
    struct ftr_hook_targets t = {.stub_lo = 0x1100, .stub_hi = 0x1106};
    cr_assert_eq(classify(b, 5, &t, &len), FTR_SHAPE_CALL_OURS);
    cr_assert_eq(len, 5);
    t.stub_hi = 0x1105; /* exclusive */
    cr_assert_eq(classify(b, 5, &t, &len), FTR_SHAPE_NONE);
    /* the stub range wins over a hook target (it is checked first: ours are never hooks) */
    t = (struct ftr_hook_targets){.stub_lo = 0x1105, .stub_hi = 0x1110, .fentry_call = 0x1105};
    cr_assert_eq(classify(b, 5, &t, &len), FTR_SHAPE_CALL_OURS);

    t = (struct ftr_hook_targets){
        .plt_lo = 0x1100, .plt_hi = 0x1200, .plt_shape = FTR_SHAPE_MCOUNT_REL};
    cr_assert_eq(classify(b, 5, &t, &len), FTR_SHAPE_MCOUNT_REL);
    t.plt_shape = FTR_SHAPE_FENTRY_REL;
    cr_assert_eq(classify(b, 5, &t, &len), FTR_SHAPE_FENTRY_REL);
    t.plt_shape = 0;
    cr_assert_eq(classify(b, 5, &t, &len), FTR_SHAPE_NONE);
    t.plt_shape = FTR_SHAPE_MCOUNT_REL;
    t.plt_lo = 0x1106;
    cr_assert_eq(classify(b, 5, &t, &len), FTR_SHAPE_NONE);
}

Test(x86, classify_nops)
{
    uint8_t len;
    struct ftr_hook_targets t = {.fentry_got = 1};
    cr_assert_eq(classify(BUF(0x0f, 0x1f, 0x44, 0x00, 0x00), 5, &t, &len), FTR_SHAPE_NOP5);
    cr_assert_eq(len, 5);
    /* clang -fpatchable-function-entry=5 */
    cr_assert_eq(classify(BUF(0x0f, 0x1f, 0x44, 0x00, 0x08), 5, NULL, &len), FTR_SHAPE_NOP5);
    /* our 6-byte NOP state reads as a 5-byte nop (and a 1-byte one after it) */
    cr_assert_eq(classify(BUF(0x0f, 0x1f, 0x44, 0x00, 0x00, 0x90), 6, NULL, &len), FTR_SHAPE_NOP5);
    cr_assert_eq(len, 5);
    cr_assert_eq(classify(BUF(0x0f, 0x1f, 0x44, 0x00, 0x00), 4, NULL, &len), FTR_SHAPE_NONE);
    /* other nop encodings are not sites: nopl 0(%rax), nopw 0(%rax,%rax,1) */
    cr_assert_eq(classify(BUF(0x0f, 0x1f, 0x40, 0x00, 0x90), 5, NULL, &len), FTR_SHAPE_NONE);
    cr_assert_eq(classify(BUF(0x66, 0x0f, 0x1f, 0x44, 0x00, 0x00), 6, NULL, &len), FTR_SHAPE_NONE);

    cr_assert_eq(classify(BUF(0x90, 0x90, 0x90, 0x90, 0x90, 0x55), 6, &t, &len), FTR_SHAPE_NOPS);
    cr_assert_eq(len, 5);
    cr_assert_eq(classify(BUF(0x90, 0x90, 0x90, 0x90, 0x90), 4, NULL, &len), FTR_SHAPE_NONE);
    cr_assert_eq(classify(BUF(0x90, 0x90, 0x90, 0x90, 0x55), 5, NULL, &len), FTR_SHAPE_NONE);
}

Test(x86, classify_not_sites)
{
    uint8_t len;
    cr_assert_eq(classify(BUF(0x55, 0x48, 0x89, 0xe5, 0x5d, 0xc3), 6, NULL, &len), FTR_SHAPE_NONE);
    cr_assert_eq(classify(BUF(0xe9, 0, 0, 0, 0), 5, NULL, &len), FTR_SHAPE_NONE); /* jmp */
    cr_assert_eq(classify(BUF(0xff, 0x25, 0, 0, 0, 0), 6, NULL, &len), FTR_SHAPE_NONE);
    cr_assert_eq(classify(BUF(0xf3, 0x0f, 0x1e, 0xfa, 0xe8, 0, 0, 0, 0), 9, NULL, &len),
                 FTR_SHAPE_NONE, "classify does not skip endbr64");
    cr_assert_eq(classify(BUF(0), 0, NULL, &len), FTR_SHAPE_NONE);
}

/* ---- find_site ---- */

struct found {
    int off;
    unsigned shape;
    uint8_t len;
};

static struct found find(const uint8_t *b, size_t n, const struct ftr_hook_targets *t)
{
    struct found f = {.shape = 0xdead, .len = 0xee};
    f.off = ftr_x86_find_site(b, n, AT, t, &f.shape, &f.len);
    return f;
}

#define ASSERT_SITE(f, o, s, l)                                                                    \
    do {                                                                                           \
        cr_assert_eq((f).off, (o));                                                                \
        cr_assert_eq((f).shape, (unsigned)(s), "shape %u", (f).shape);                             \
        cr_assert_eq((f).len, (l));                                                                \
    } while (0)

/* targets used by the prologue tests: the e8 rel32 / ff 15 disp32 in these buffers are
 * written so that calls reach these addresses (see mk_call()) */
#define FENTRY_PLT 0x500000u
#define MCOUNT_PLT 0x500010u
#define FENTRY_GOT 0x600000u
#define MCOUNT_GOT 0x600008u
static const struct ftr_hook_targets T = {.fentry_got = FENTRY_GOT,
                                          .mcount_got = MCOUNT_GOT,
                                          .fentry_call = FENTRY_PLT,
                                          .mcount_call = MCOUNT_PLT};

/* Appends the prologue bytes and a call at their end to buf. kind: 0xe8 or 0x15 (ff 15). */
static size_t mk(uint8_t *buf, const uint8_t *pro, size_t plen, int kind, uint64_t target)
{
    if (plen) memcpy(buf, pro, plen);
    size_t n = plen;
    if (kind == 0xe8) {
        int32_t r = (int32_t)(target - (AT + n + 5));
        buf[n++] = 0xe8;
        memcpy(buf + n, &r, 4);
        n += 4;
    } else {
        int32_t r = (int32_t)(target - (AT + n + 6));
        buf[n++] = 0xff;
        buf[n++] = 0x15;
        memcpy(buf + n, &r, 4);
        n += 4;
    }
    buf[n++] = 0x5d; /* pop %rbp, ret: what follows does not matter */
    buf[n++] = 0xc3;
    return n;
}

Test(x86, find_fentry_at_start)
{
    uint8_t b[64];
    size_t n = mk(b, NULL, 0, 0x15, FENTRY_GOT);
    ASSERT_SITE(find(b, n, &T), 0, FTR_SHAPE_FENTRY_GOT, 6);
    n = mk(b, NULL, 0, 0xe8, FENTRY_PLT);
    ASSERT_SITE(find(b, n, &T), 0, FTR_SHAPE_FENTRY_REL, 5);
    ASSERT_SITE(find(b, n, NULL), 0, FTR_SHAPE_FENTRY_REL, 5);

    const uint8_t *endbr = BUF(0xf3, 0x0f, 0x1e, 0xfa);
    n = mk(b, endbr, 4, 0x15, FENTRY_GOT);
    ASSERT_SITE(find(b, n, &T), 4, FTR_SHAPE_FENTRY_GOT, 6);
    n = mk(b, endbr, 4, 0xe8, FENTRY_PLT);
    ASSERT_SITE(find(b, n, &T), 4, FTR_SHAPE_FENTRY_REL, 5);

    /* an mcount call at the very start has no frame to work with: not a site */
    n = mk(b, NULL, 0, 0xe8, MCOUNT_PLT);
    cr_assert_eq(find(b, n, &T).off, -1);
    /* a call to something else at the start is not a site */
    n = mk(b, NULL, 0, 0xe8, 0x700000);
    cr_assert_eq(find(b, n, &T).off, -1);
    n = mk(b, endbr, 4, 0x15, FENTRY_GOT + 8);
    cr_assert_eq(find(b, n, &T).off, -1);
}

/* mk() with pop %r10 (41 5a) in place of what follows the call */
static size_t mk_chain(uint8_t *buf, const uint8_t *pro, size_t plen, int kind, uint64_t target)
{
    size_t n = mk(buf, pro, plen, kind, target);
    buf[n - 2] = 0x41;
    buf[n - 1] = 0x5a;
    return n;
}

/* gcc's nested functions: push %r10; <fentry site>; pop %r10 at the start (-O0 and -O2) */
Test(x86, find_nested_function_site)
{
    uint8_t b[64];
    const uint8_t *push = BUF(0x41, 0x52), *endbr_push = BUF(0xf3, 0x0f, 0x1e, 0xfa, 0x41, 0x52);
    size_t n = mk_chain(b, push, 2, 0x15, FENTRY_GOT);
    ASSERT_SITE(find(b, n, &T), 2, FTR_SHAPE_FENTRY_GOT, 6);
    cr_assert(ftr_x86_chain_site(b, n, 2, 6));
    n = mk_chain(b, push, 2, 0xe8, FENTRY_PLT);
    ASSERT_SITE(find(b, n, &T), 2, FTR_SHAPE_FENTRY_REL, 5);
    cr_assert(ftr_x86_chain_site(b, n, 2, 5));
    n = mk_chain(b, endbr_push, 6, 0x15, FENTRY_GOT);
    ASSERT_SITE(find(b, n, &T), 6, FTR_SHAPE_FENTRY_GOT, 6);
    cr_assert(ftr_x86_chain_site(b, n, 6, 6));
    cr_assert(!ftr_x86_chain_site(b, n, 2, 6), "the push must be the first instruction");
    /* our CALL state there (a module seen again) */
    struct ftr_hook_targets t = T;
    t.stub_lo = 0x800000;
    t.stub_hi = 0x800100;
    n = mk_chain(b, push, 2, 0xe8, 0x800010);
    ASSERT_SITE(find(b, n, &t), 2, FTR_SHAPE_CALL_OURS, 5);
    /* -mnop-mcount's nop there: a site only for the compiler's list, but the shape holds */
    memcpy(b, BUF(0x41, 0x52, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0x41, 0x5a), 9);
    cr_assert_eq(find(b, 9, &T).off, -1);
    cr_assert(ftr_x86_chain_site(b, 9, 2, 5));

    /* no pop %r10 right after the call: not this shape, not a site */
    n = mk(b, push, 2, 0x15, FENTRY_GOT);
    cr_assert_eq(find(b, n, &T).off, -1);
    cr_assert(!ftr_x86_chain_site(b, n, 2, 6));
    n = mk_chain(b, push, 2, 0x15, FENTRY_GOT);
    cr_assert_eq(find(b, n - 1, &T).off, -1, "truncated before the pop's second byte");
    b[n - 1] = 0x5b; /* pop %r11 */
    cr_assert_eq(find(b, n, &T).off, -1);
    /* another register pushed (push %r11: 41 53; push %rbx: 53) */
    n = mk_chain(b, BUF(0x41, 0x53), 2, 0x15, FENTRY_GOT);
    cr_assert_eq(find(b, n, &T).off, -1);
    cr_assert(!ftr_x86_chain_site(b, n, 2, 6));
    /* an mcount call or another call after the push is no site */
    n = mk_chain(b, push, 2, 0xe8, MCOUNT_PLT);
    cr_assert_eq(find(b, n, &T).off, -1);
    n = mk_chain(b, push, 2, 0xe8, 0x700000);
    cr_assert_eq(find(b, n, &T).off, -1);
    /* -pg without -mfentry: push %r10 / mcount call / pop %r10 after the prologue is an
     * ordinary mcount site, not this shape */
    n = mk_chain(b, BUF(0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x18, 0x41, 0x52), 10, 0x15,
                 MCOUNT_GOT);
    ASSERT_SITE(find(b, n, &T), 10, FTR_SHAPE_MCOUNT_GOT, 6);
    cr_assert(!ftr_x86_chain_site(b, n, 10, 6));
    cr_assert(!ftr_x86_chain_site(b, n, 2, 100), "bad length");
}

/* The CALL state of a nested function's site: the call returns onto its pop %r10 */
Test(x86, nested_function_call_state)
{
    uint8_t b[16] = {0x41, 0x52, 0xff, 0x15, 0, 0, 0, 0, 0x41, 0x5a};
    cr_assert_eq(ftr_x86_gen_call(b + 2, 6, 0x1002, 0x2000), 0);
    cr_assert_arr_eq(b, BUF(0x41, 0x52, 0xe8, 0xf9, 0x0f, 0x00, 0x00, 0x90, 0x41, 0x5a), 10);
    struct ftr_emu e;
    cr_assert_eq(ftr_x86_emulation(b + 2, 6, 0x1002, &e), 0);
    cr_assert_eq(e.kind, FTR_EMU_CALL);
    cr_assert_eq(e.next, 0x1008, "returns onto the pop %%r10");
    cr_assert(ftr_x86_chain_site(b, 10, 2, 6), "still the shape in the CALL state");
    ftr_x86_gen_nop(b + 2, 6);
    cr_assert(ftr_x86_chain_site(b, 10, 2, 6), "and in the NOP state");
}

Test(x86, find_nops_are_not_sites)
{
    cr_assert_eq(find(BUF(0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3), 6, &T).off, -1);
    cr_assert_eq(find(BUF(0x90, 0x90, 0x90, 0x90, 0x90, 0xc3), 6, &T).off, -1);
    cr_assert_eq(
        find(BUF(0xf3, 0x0f, 0x1e, 0xfa, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0xc3), 10, NULL).off, -1);
    /* -mnop-mcount without -mfentry: a nop after the prologue is not found either */
    cr_assert_eq(
        find(BUF(0x55, 0x48, 0x89, 0xe5, 0x0f, 0x1f, 0x44, 0x00, 0x00, 0x5d, 0xc3), 11, &T).off,
        -1);
}

struct prologue {
    const char *what;
    const uint8_t *bytes;
    size_t len;
};
#define PRO(what, ...)                                                                             \
    {                                                                                              \
        what, BUF(__VA_ARGS__), LEN(__VA_ARGS__)                                                   \
    }

/* Prologues seen before mcount calls (gcc / clang, -O0 / -O2, see x86_64_insn.c). */
static const struct prologue prologues[] = {
    PRO("gcc -O2 leaf", 0x55, 0x48, 0x89, 0xe5),
    PRO("gcc -O2 -fcf-protection", 0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5),
    PRO("mov %rsp,%rbp as 48 8b ec", 0x55, 0x48, 0x8b, 0xec),
    PRO("gcc -O0", 0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x08),
    PRO("gcc -O2 push rbx", 0x55, 0x48, 0x89, 0xe5, 0x53, 0x48, 0x83, 0xec, 0x08),
    PRO("gcc -O0 push r12/rbx", 0x55, 0x48, 0x89, 0xe5, 0x41, 0x54, 0x53, 0x48, 0x83, 0xec, 0x30),
    PRO("gcc -O2 five pushes", 0x55, 0x48, 0x89, 0xe5, 0x41, 0x57, 0x41, 0x56, 0x41, 0x55, 0x41,
        0x54, 0x53, 0x48, 0x83, 0xec, 0x28),
    PRO("gcc realign", 0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xe4, 0xc0, 0x48, 0x83, 0xec, 0x40),
    PRO("gcc -O0 realign", 0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xe4, 0xc0, 0x48, 0x83, 0xc4, 0x80),
    PRO("gcc big frame", 0x55, 0x48, 0x89, 0xe5, 0x48, 0x81, 0xec, 0xa0, 0x86, 0x01, 0x00),
    PRO("gcc stack clash loop", 0x55, 0x48, 0x89, 0xe5, 0x4c, 0x8d, 0x9c, 0x24, 0x00, 0x80, 0xfe,
        0xff, 0x48, 0x81, 0xec, 0x00, 0x10, 0x00, 0x00, 0x48, 0x83, 0x0c, 0x24, 0x00, 0x4c, 0x39,
        0xdc, 0x75, 0xef, 0x48, 0x81, 0xec, 0xa0, 0x06, 0x00, 0x00),
    PRO("gcc stack clash probe", 0x55, 0x48, 0x89, 0xe5, 0x48, 0x81, 0xec, 0x00, 0x10, 0x00, 0x00,
        0x48, 0x83, 0x0c, 0x24, 0x00, 0x48, 0x81, 0xec, 0x90, 0x03, 0x00, 0x00),
    PRO("clang -O2", 0x55, 0x48, 0x89, 0xe5, 0x53, 0x50, 0x89, 0xfb),
    PRO("clang -O2 realign", 0x55, 0x48, 0x89, 0xe5, 0x41, 0x57, 0x41, 0x56, 0x41, 0x54, 0x53, 0x48,
        0x83, 0xe4, 0xc0, 0x48, 0x81, 0xec, 0x80, 0x00, 0x00, 0x00, 0x48, 0x89, 0xe3, 0x41, 0x89,
        0xfe),
    PRO("clang -O2 many args", 0x55, 0x48, 0x89, 0xe5, 0x41, 0x57, 0x41, 0x56, 0x41, 0x55, 0x41,
        0x54, 0x53, 0x48, 0x83, 0xec, 0x28, 0x4c, 0x89, 0x4d, 0xb8, 0x45, 0x89, 0xc7, 0x41, 0x89,
        0xcc, 0x48, 0x89, 0xd3, 0xf3, 0x0f, 0x11, 0x55, 0xd4, 0x49, 0x89, 0xf5, 0x41, 0x89, 0xfe,
        0xf2, 0x0f, 0x11, 0x4d, 0xc0, 0xf2, 0x0f, 0x11, 0x45, 0xc8),
    PRO("clang -O2 -mavx2 many args", 0x55, 0x48, 0x89, 0xe5, 0x53, 0x48, 0x83, 0xec, 0x28, 0xc5,
        0xfa, 0x11, 0x55, 0xd4, 0xc5, 0xfb, 0x11, 0x4d, 0xc0, 0xc4, 0xe1, 0x7b, 0x11, 0x45, 0xc8),
    PRO("clang -O0 args", 0x55, 0x48, 0x89, 0xe5, 0x48, 0x81, 0xec, 0x80, 0x00, 0x00, 0x00, 0xf2,
        0x0f, 0x11, 0x45, 0x80, 0x89, 0x7d, 0x94, 0x48, 0x89, 0x75, 0x98, 0x44, 0x89, 0x45, 0xb4),
    PRO("clang -O0 realign", 0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xe4, 0xe0, 0x48, 0x83, 0xec, 0x60,
        0x89, 0x7c, 0x24, 0x1c),
    PRO("clang -O0 struct", 0x55, 0x48, 0x89, 0xe5, 0x48, 0x83, 0xec, 0x20, 0x89, 0x7d, 0xec, 0x48,
        0x8d, 0x45, 0x10, 0x48, 0x89, 0x45, 0xf0),
    PRO("clang stack protector", 0x55, 0x48, 0x89, 0xe5, 0x53, 0x48, 0x83, 0xe4, 0xc0, 0x41, 0x89,
        0xfe, 0x64, 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00, 0x48, 0x89, 0x43, 0x48),
    PRO("clang stack clash", 0x55, 0x48, 0x89, 0xe5, 0x53, 0x49, 0x89, 0xe3, 0x49, 0x81, 0xeb, 0x00,
        0x80, 0x01, 0x00, 0x48, 0x81, 0xec, 0x00, 0x10, 0x00, 0x00, 0x48, 0xc7, 0x04, 0x24, 0x00,
        0x00, 0x00, 0x00, 0x4c, 0x39, 0xdc, 0x75, 0xec, 0x48, 0x81, 0xec, 0xa8, 0x06, 0x00, 0x00,
        0x89, 0xfb),
    PRO("sse / movabs / rip-relative / sib", 0x55, 0x48, 0x89, 0xe5, 0x66, 0x0f, 0xef, 0xc0, 0x0f,
        0x29, 0x44, 0x24, 0x20, 0x48, 0xb8, 1, 2, 3, 4, 5, 6, 7, 8, 0x48, 0x8b, 0x05, 0x10, 0x20,
        0x30, 0x00, 0x8b, 0x04, 0x25, 0x00, 0x10, 0x00, 0x00, 0x66, 0x0f, 0x3a, 0x0f, 0xc1, 0x08,
        0x66, 0x0f, 0x38, 0x00, 0xc1, 0x0f, 0x1f, 0x40, 0x00),
};

Test(x86, find_mcount_after_prologues)
{
    for (size_t i = 0; i < sizeof prologues / sizeof prologues[0]; i++) {
        const struct prologue *p = &prologues[i];
        uint8_t b[256];
        size_t n = mk(b, p->bytes, p->len, 0x15, MCOUNT_GOT);
        struct found f = find(b, n, &T);
        cr_assert_eq(f.off, (int)p->len, "%s: got %d", p->what, f.off);
        cr_assert_eq(f.shape, FTR_SHAPE_MCOUNT_GOT, "%s", p->what);
        cr_assert_eq(f.len, 6);
        cr_assert(ftr_x86_prologue_reaches(b, n, p->len), "%s", p->what);

        n = mk(b, p->bytes, p->len, 0xe8, MCOUNT_PLT);
        ASSERT_SITE(find(b, n, &T), (int)p->len, FTR_SHAPE_MCOUNT_REL, 5);
        /* without targets, the position says mcount */
        ASSERT_SITE(find(b, n, NULL), (int)p->len, FTR_SHAPE_MCOUNT_REL, 5);
        n = mk(b, p->bytes, p->len, 0x15, 0x123456);
        ASSERT_SITE(find(b, n, NULL), (int)p->len, FTR_SHAPE_MCOUNT_GOT, 6);

        /* a call elsewhere, or to __fentry__, after the prologue: no site */
        n = mk(b, p->bytes, p->len, 0xe8, MCOUNT_PLT + 1);
        cr_assert_eq(find(b, n, &T).off, -1, "%s", p->what);
        n = mk(b, p->bytes, p->len, 0x15, FENTRY_GOT);
        cr_assert_eq(find(b, n, &T).off, -1, "%s", p->what);

        /* every truncation of the buffer before the end of the call fails cleanly */
        n = mk(b, p->bytes, p->len, 0xe8, MCOUNT_PLT);
        for (size_t cut = 0; cut < p->len + 5; cut++)
            cr_assert_eq(find(b, cut, &T).off, -1, "%s cut at %zu", p->what, cut);
    }
}

Test(x86, find_rejects_unsafe_prologues)
{
    uint8_t b[128];
    /* gcc DRAP realignment: 8(%rbp) is only a copy of the return address */
    size_t n = mk(b,
                  BUF(0x4c, 0x8d, 0x54, 0x24, 0x08, 0x48, 0x83, 0xe4, 0xc0, 0x41, 0xff, 0x72, 0xf8,
                      0x55, 0x48, 0x89, 0xe5, 0x41, 0x52, 0x53, 0x48, 0x83, 0xec, 0x60),
                  24, 0x15, MCOUNT_GOT);
    cr_assert_eq(find(b, n, &T).off, -1);
    cr_assert(!ftr_x86_prologue_reaches(b, n, 24));
    /* no frame pointer */
    n = mk(b, BUF(0x53, 0x48, 0x83, 0xec, 0x10), 5, 0xe8, MCOUNT_PLT);
    cr_assert_eq(find(b, n, &T).off, -1);
    /* push %rbp without the mov */
    n = mk(b, BUF(0x55, 0x53, 0x48, 0x83, 0xec, 0x10), 6, 0xe8, MCOUNT_PLT);
    cr_assert_eq(find(b, n, &T).off, -1);
    /* a forward jump over the call, a backward jump out of the prologue */
    n = mk(b, BUF(0x55, 0x48, 0x89, 0xe5, 0x74, 0x05), 6, 0xe8, MCOUNT_PLT);
    cr_assert_eq(find(b, n, &T).off, -1);
    n = mk(b, BUF(0x55, 0x48, 0x89, 0xe5, 0x74, 0xfa), 6, 0xe8, MCOUNT_PLT);
    cr_assert_eq(find(b, n, &T).off, -1);
    n = mk(b, BUF(0x55, 0x48, 0x89, 0xe5, 0x0f, 0x85, 0x00, 0x00, 0x00, 0x00), 10, 0xe8,
           MCOUNT_PLT);
    cr_assert_eq(find(b, n, &T).off, -1);
    /* another call first, a jmp, a ret, an unknown opcode (x87), EVEX */
    n = mk(b, BUF(0x55, 0x48, 0x89, 0xe5, 0xe8, 0, 0, 0, 0), 9, 0xe8, MCOUNT_PLT);
    cr_assert_eq(find(b, n, &T).off, -1);
    n = mk(b, BUF(0x55, 0x48, 0x89, 0xe5, 0xeb, 0x00), 6, 0xe8, MCOUNT_PLT);
    cr_assert_eq(find(b, n, &T).off, -1);
    n = mk(b, BUF(0x55, 0x48, 0x89, 0xe5, 0xc3), 5, 0xe8, MCOUNT_PLT);
    cr_assert_eq(find(b, n, &T).off, -1);
    n = mk(b, BUF(0x55, 0x48, 0x89, 0xe5, 0xd9, 0xee), 6, 0xe8, MCOUNT_PLT);
    cr_assert_eq(find(b, n, &T).off, -1);
    n = mk(b, BUF(0x55, 0x48, 0x89, 0xe5, 0x62, 0xf1, 0x7c, 0x48, 0x11, 0x45, 0x01), 11, 0xe8,
           MCOUNT_PLT);
    cr_assert_eq(find(b, n, &T).off, -1);
    /* a prologue too long to be one (64 pushes) */
    uint8_t lng[128] = {0x55, 0x48, 0x89, 0xe5};
    memset(lng + 4, 0x53, 70);
    n = mk(b, lng, 74, 0xe8, MCOUNT_PLT);
    cr_assert_eq(find(b, n, &T).off, -1);
}

Test(x86, find_our_call_state)
{
    struct ftr_hook_targets t = T;
    t.stub_lo = 0x800000;
    t.stub_hi = 0x800100;
    uint8_t b[64];
    size_t n = mk(b, NULL, 0, 0xe8, 0x800010);
    ASSERT_SITE(find(b, n, &t), 0, FTR_SHAPE_CALL_OURS, 5);
    n = mk(b, BUF(0xf3, 0x0f, 0x1e, 0xfa), 4, 0xe8, 0x8000f0);
    ASSERT_SITE(find(b, n, &t), 4, FTR_SHAPE_CALL_OURS, 5);
    n = mk(b, BUF(0x55, 0x48, 0x89, 0xe5, 0x53, 0x50, 0x89, 0xfb), 8, 0xe8, 0x800020);
    ASSERT_SITE(find(b, n, &t), 8, FTR_SHAPE_CALL_OURS, 5);
    /* without the stub range, our call is an unknown call */
    cr_assert_eq(find(b, n, &T).off, -1);
}

Test(x86, prologue_reaches)
{
    /* gcc -pg -mnop-mcount without -mfentry: the nop follows the prologue */
    const uint8_t *b = BUF(0x55, 0x48, 0x89, 0xe5, 0x53, 0x48, 0x83, 0xec, 0x08, 0x0f, 0x1f, 0x44,
                           0x00, 0x00, 0x5d, 0xc3);
    size_t n = 16;
    cr_assert(ftr_x86_prologue_reaches(b, n, 9));
    cr_assert(ftr_x86_prologue_reaches(b, n, 4));
    cr_assert(ftr_x86_prologue_reaches(b, n, 5));
    cr_assert(!ftr_x86_prologue_reaches(b, n, 8), "inside sub $8,%%rsp");
    cr_assert(!ftr_x86_prologue_reaches(b, n, 0), "the entry is not after the prologue");
    cr_assert(!ftr_x86_prologue_reaches(b, n, 1));
    cr_assert(ftr_x86_prologue_reaches(b, 9, 9), "only the bytes before the site are needed");
    cr_assert(!ftr_x86_prologue_reaches(b, 8, 9), "an instruction cut short");
    cr_assert(!ftr_x86_prologue_reaches(b, n, 100));
    const uint8_t *e = BUF(0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5, 0x90);
    cr_assert(ftr_x86_prologue_reaches(e, 9, 8));
    cr_assert(!ftr_x86_prologue_reaches(e, 9, 4));
}

/* ---- generators ---- */

Test(x86, gen_nop)
{
    uint8_t out[8];
    memset(out, 0xaa, sizeof out);
    ftr_x86_gen_nop(out, 5);
    cr_assert_arr_eq(out, BUF(0x0f, 0x1f, 0x44, 0x00, 0x00, 0xaa), 6);
    memset(out, 0xaa, sizeof out);
    ftr_x86_gen_nop(out, 6);
    cr_assert_arr_eq(out, BUF(0x0f, 0x1f, 0x44, 0x00, 0x00, 0x90, 0xaa), 7);
    uint8_t len;
    cr_assert_eq(ftr_x86_classify(out, 6, AT, &T, &len), FTR_SHAPE_NOP5);
}

Test(x86, gen_call)
{
    uint8_t out[8];
    memset(out, 0xaa, sizeof out);
    cr_assert_eq(ftr_x86_gen_call(out, 5, 0x1000, 0x1105), 0);
    cr_assert_arr_eq(out, BUF(0xe8, 0x00, 0x01, 0x00, 0x00, 0xaa), 6);
    memset(out, 0xaa, sizeof out);
    cr_assert_eq(ftr_x86_gen_call(out, 6, 0x1000, 0x1000), 0); /* backwards: -5 */
    cr_assert_arr_eq(out, BUF(0xe8, 0xfb, 0xff, 0xff, 0xff, 0x90, 0xaa), 7);

    /* reach: rel32 counts from site + 5 */
    uint64_t site = 0x7f0000000000ull;
    cr_assert_eq(ftr_x86_gen_call(out, 5, site, site + 5 + INT32_MAX), 0);
    cr_assert_arr_eq(out, BUF(0xe8, 0xff, 0xff, 0xff, 0x7f), 5);
    cr_assert_eq(ftr_x86_gen_call(out, 5, site, site + 5 + (uint64_t)INT32_MAX + 1), -1);
    cr_assert_eq(ftr_x86_gen_call(out, 5, site, site + 5 - 0x80000000ull), 0);
    cr_assert_arr_eq(out, BUF(0xe8, 0x00, 0x00, 0x00, 0x80), 5);
    cr_assert_eq(ftr_x86_gen_call(out, 5, site, site + 5 - 0x80000001ull), -1);
    cr_assert_eq(ftr_x86_gen_call(out, 5, 0x1000, 0x7fff00000000ull), -1);
    cr_assert_eq(ftr_x86_gen_call(out, 4, 0x1000, 0x1100), -1, "bad length");
    cr_assert_eq(ftr_x86_gen_call(out, 7, 0x1000, 0x1100), -1, "bad length");

    /* what we write is recognised as ours */
    cr_assert_eq(ftr_x86_gen_call(out, 6, AT, 0x9000), 0);
    struct ftr_hook_targets t = {.stub_lo = 0x9000, .stub_hi = 0x9010};
    uint8_t len;
    cr_assert_eq(ftr_x86_classify(out, 6, AT, &t, &len), FTR_SHAPE_CALL_OURS);
    cr_assert_eq(len, 5);
}

Test(x86, gen_stub)
{
    uint8_t out[FTR_STUB_SIZE + 2];
    memset(out, 0xaa, sizeof out);
    /* movl $index,-128(%rsp); jmp *slot(%rip): slot 0x100 bytes after the stub, rel32 =
     * 0x100 - 14 */
    cr_assert_eq(ftr_x86_gen_stub(out, 0x5000, 0x01020304, 0x5100), 0);
    cr_assert_arr_eq(out,
                     BUF(0xc7, 0x44, 0x24, 0x80, 0x04, 0x03, 0x02, 0x01, 0xff, 0x25, 0xf2, 0x00,
                         0x00, 0x00, 0xcc, 0xcc, 0xaa, 0xaa),
                     FTR_STUB_SIZE + 2);
    /* slot before the stub */
    cr_assert_eq(ftr_x86_gen_stub(out, 0x5000, 7, 0x4ff8), 0);
    cr_assert_arr_eq(
        out,
        BUF(0xc7, 0x44, 0x24, 0x80, 0x07, 0x00, 0x00, 0x00, 0xff, 0x25, 0xea, 0xff, 0xff, 0xff),
        14);
    /* the whole index, not sign-extended */
    cr_assert_eq(ftr_x86_gen_stub(out, 0x5000, 0xfffffffeu, 0x5100), 0);
    cr_assert_arr_eq(out, BUF(0xc7, 0x44, 0x24, 0x80, 0xfe, 0xff, 0xff, 0xff), 8);
    /* reach */
    uint64_t at = 0x7f0000000000ull;
    cr_assert_eq(ftr_x86_gen_stub(out, at, 1, at + 14 + INT32_MAX), 0);
    cr_assert_eq(ftr_x86_gen_stub(out, at, 1, at + 14 + (uint64_t)INT32_MAX + 1), -1);
    cr_assert_eq(ftr_x86_gen_stub(out, at, 1, at + 14 - 0x80000000ull), 0);
    cr_assert_eq(ftr_x86_gen_stub(out, at, 1, at + 14 - 0x80000001ull), -1);
}

Test(x86, fixup_ip)
{
    struct ftr_site s = {.addr = 0x4000, .len = 6};
    cr_assert_eq(ftr_site_fixup_ip(&s, 0x3fff), 0x3fff);
    cr_assert_eq(ftr_site_fixup_ip(&s, 0x4000), 0x4000, "at the site: not inside");
    for (uint64_t ip = 0x4001; ip < 0x4005; ip++)
        cr_assert_eq(ftr_site_fixup_ip(&s, ip), 0x4005);
    cr_assert_eq(ftr_site_fixup_ip(&s, 0x4005), 0x4005);
    cr_assert_eq(ftr_site_fixup_ip(&s, 0x4006), 0x4006);
}

Test(x86, gen_jmp)
{
    uint8_t out[8];
    memset(out, 0xaa, sizeof out);
    cr_assert_eq(ftr_x86_gen_jmp(out, 6, 0x1000, 0x1105), 0);
    cr_assert_arr_eq(out, BUF(0xe9, 0x00, 0x01, 0x00, 0x00, 0x90, 0xaa), 7);
    cr_assert_eq(ftr_x86_gen_jmp(out, 5, 0x1000, 0x7fff00000000ull), -1);
    cr_assert_eq(ftr_x86_gen_jmp(out, 3, 0x1000, 0x1100), -1, "bad length");
}

/* What the breakpoint handler does for a thread that meets each state mid-rewrite. */
Test(x86, emulation)
{
    uint8_t b[8];
    struct ftr_emu e;
    ftr_x86_gen_nop(b, 6);
    cr_assert_eq(ftr_x86_emulation(b, 6, 0x1000, &e), 0);
    cr_assert_eq(e.kind, FTR_EMU_SKIP);
    cr_assert_eq(e.next, 0x1006, "a NOP goes on at the end of the whole site");
    cr_assert_eq(e.target, 0x1006);
    ftr_x86_gen_call(b, 6, 0x1000, 0x2000);
    cr_assert_eq(ftr_x86_emulation(b, 6, 0x1000, &e), 0);
    cr_assert_eq(e.kind, FTR_EMU_CALL);
    cr_assert_eq(e.target, 0x2000);
    cr_assert_eq(e.next, 0x1006, "returns past the padding: the tail may still be old");
    ftr_x86_gen_jmp(b, 5, 0x1000, 0x0800);
    cr_assert_eq(ftr_x86_emulation(b, 5, 0x1000, &e), 0);
    cr_assert_eq(e.kind, FTR_EMU_JMP);
    cr_assert_eq(e.target, 0x0800);
    memset(b, 0x90, 5);
    cr_assert_eq(ftr_x86_emulation(b, 5, 0x1000, &e), 0);
    cr_assert_eq(e.kind, FTR_EMU_SKIP);
    /* clang's 0f 1f 44 00 08 */
    memcpy(b, BUF(0x0f, 0x1f, 0x44, 0x00, 0x08), 5);
    cr_assert_eq(ftr_x86_emulation(b, 5, 0x1000, &e), 0);
    /* anything else is refused: the original ff 15 call, a call followed by no padding */
    memcpy(b, BUF(0xff, 0x15, 0x00, 0x10, 0x00, 0x00), 6);
    cr_assert_eq(ftr_x86_emulation(b, 6, 0x1000, &e), -1);
    ftr_x86_gen_call(b, 6, 0x1000, 0x2000);
    b[5] = 0xcc;
    cr_assert_eq(ftr_x86_emulation(b, 6, 0x1000, &e), -1);
    cr_assert_eq(ftr_x86_emulation(b, 4, 0x1000, &e), -1, "bad length");
}
