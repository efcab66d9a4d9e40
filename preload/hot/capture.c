/*
 * capture.c - values read at a hook (values.h): arguments from the registers the entry
 * trampoline saved and from the caller's stack, return values from what the exit trampoline
 * saved, floating-point ones from the vector registers themselves.
 *
 * Compiled like hooks.c (-mgeneral-regs-only, no libc): nothing here or in the hooks touches a
 * vector register, so xmm0..xmm7 still hold what the function was called with (or, at an exit,
 * what it returns) and are read with one movq each. Strings are copied with one
 * process_vm_readv system call: a bad pointer is an error return (EFAULT), never a fault in the
 * program. It is the only system call a hook makes, and only for an item the user asked for.
 */
#include "ftr_values.h"
#include "tracer.h"
#include "values.h"

static const uint8_t int_reg[6] = {FTR_REG_RDI, FTR_REG_RSI, FTR_REG_RDX,
                                   FTR_REG_RCX, FTR_REG_R8,  FTR_REG_R9};

static uint64_t xmm(unsigned i)
{
    uint64_t v = 0;
    switch (i) {
#define XMM(n)                                                                                     \
    case n:                                                                                        \
        __asm__ volatile("movq %%xmm" #n ", %0" : "=r"(v));                                        \
        break;
        XMM(0) XMM(1) XMM(2) XMM(3) XMM(4) XMM(5) XMM(6) XMM(7)
#undef XMM
    }
    return v;
}

struct iov {
    const void *base;
    size_t len;
};

/* Up to len bytes of the program's memory at src into dst: @return how many (0: none) */
static size_t read_mem(void *dst, uintptr_t src, size_t len)
{
    uintptr_t page_end = (src | 4095) + 1;
    struct iov local = {dst, len};
    struct iov remote[2] = {{(const void *)src, len}, {0, 0}};
    unsigned n = 1;
    if (page_end - src < len) { /* the second page may be unmapped: keep the first part */
        remote[0].len = page_end - src;
        remote[1] = (struct iov){(const void *)page_end, len - remote[0].len};
        n = 2;
    }
    long rc;
    register long r10 __asm__("r10") = (long)remote;
    register long r8 __asm__("r8") = n;
    register long r9 __asm__("r9") = 0;
    __asm__ volatile("syscall"
                     : "=a"(rc)
                     : "a"(310 /* process_vm_readv */), "D"((long)ftr_g.pid), "S"(&local), "d"(1),
                       "r"(r10), "r"(r8), "r"(r9)
                     : "rcx", "r11", "memory");
    return rc > 0 ? (size_t)rc : 0;
}

static uint8_t *put_int(uint8_t *o, const struct ftr_argitem *it, unsigned index, uint64_t v)
{
    unsigned size = it->size;
    *o++ = ftr_val_type(it->fmt, size);
    *o++ = (uint8_t)index;
    for (unsigned i = 0; i < size; i++)
        *o++ = (uint8_t)(v >> (8 * i));
    return o;
}

static uint8_t *put_str(uint8_t *o, unsigned index, uintptr_t p)
{
    *o++ = ftr_val_type(FTR_VF_STR, 8);
    *o++ = (uint8_t)index;
    uint8_t *state = o, *len = o + 1, *s = o + 2;
    *len = 0;
    if (!p) {
        *state = FTR_STR_NULL;
        return s;
    }
    /* one byte more than is kept: a string of exactly FTR_VALUES_STR_MAX is whole */
    size_t got = read_mem(s, p, FTR_VALUES_STR_MAX + 1);
    if (!got) {
        *state = FTR_STR_BAD;
        return s;
    }
    size_t n = 0;
    while (n < got && s[n])
        n++;
    *state = n < got ? FTR_STR_OK : FTR_STR_TRUNCATED;
    if (n > FTR_VALUES_STR_MAX) n = FTR_VALUES_STR_MAX;
    *len = (uint8_t)n;
    return s + n;
}

/* The most bytes an item may take */
#define ITEM_MAX (4 + FTR_VALUES_STR_MAX + 1)

/* An item whose value could not be read: shown as (bad) */
static uint8_t *put_bad(uint8_t *o, unsigned index)
{
    *o++ = ftr_val_type(FTR_VF_STR, 8);
    *o++ = (uint8_t)index;
    *o++ = FTR_STR_BAD;
    *o++ = 0;
    return o;
}

/* Stack word k above the return address slot: a plain load inside the thread's own stack
 * (where the caller's frame is), else a read that cannot fault (a coroutine's or a clone()
 * child's stack may end right above the arguments it was given). @return 1, 0 unreadable */
static int stack_word(const uintptr_t *slot, unsigned k, uint64_t *v)
{
    uintptr_t a = (uintptr_t)(slot + k);
    if (a >= ftr_tls.stack_lo && a + 8 <= ftr_tls.stack_hi && ftr_tls.stack_lo) {
        *v = *(const uint64_t *)a;
        return 1;
    }
    return read_mem(v, a, 8) == 8;
}

static uint8_t *put_item(uint8_t *o, const struct ftr_argitem *it, uint64_t v)
{
    unsigned index = it->label ? it->label : it->src == FTR_AS_RETVAL ? 0 : it->n;
    if (it->fmt == FTR_VF_STR) return put_str(o, index, (uintptr_t)v);
    return put_int(o, it, index, v);
}

static size_t finish(uint8_t *buf, uint8_t *o)
{
    while ((o - buf) % FTR_VALUES_SLOT_BYTES)
        *o++ = 0;
    return (size_t)(o - buf);
}

size_t ftr_capture_args(const struct ftr_valprog *p, const uintptr_t *regs, const uintptr_t *slot,
                        uint8_t *buf)
{
    uint8_t *o = buf;
    for (unsigned i = 0; i < p->nargs; i++) {
        const struct ftr_argitem *it = &p->args[i];
        size_t need = it->fmt == FTR_VF_STR ? ITEM_MAX : 4u + it->size; /* or (bad) */
        if (o + need > buf + FTR_VALUES_MAX_BYTES) break;
        uint64_t v = 0;
        if (it->src == FTR_AS_FPARG) {
            v = xmm(it->n - 1u);
        } else if (it->src == FTR_AS_ARG && it->n <= 6) {
            v = regs[int_reg[it->n - 1]];
        } else if (it->src == FTR_AS_ARG) {
            if (!stack_word(slot, it->n - 6u, &v)) {
                o = put_bad(o, it->label ? it->label : it->n);
                continue;
            }
        } else {
            continue; /* a return value is taken at the exit */
        }
        o = put_item(o, it, v);
    }
    return finish(buf, o);
}

size_t ftr_capture_ret(const struct ftr_valprog *p, const uintptr_t *ret, uint8_t *buf)
{
    const struct ftr_argitem *it = &p->ret;
    uint64_t v = it->fmt == FTR_VF_FLOAT || it->n == 1 ? xmm(0) : ret[0];
    return finish(buf, put_item(buf, it, v));
}
