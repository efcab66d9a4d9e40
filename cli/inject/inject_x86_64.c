/*
 * inject_x86_64.c - the injector's x86_64 parts (inject_int.h): the registers of the thread that
 * makes the call, saved and restored whole, the signal frame the call returns into, and how the
 * call is laid out.
 *
 * The call follows the System V ABI: the arguments in rdi and rsi, rax 0 (no vector registers
 * for a variadic callee), rsp 8 bytes off a 16-byte boundary at the function's entry (as after
 * a call instruction's push of the return address), the direction flag clear, and the 128-byte
 * red zone below rsp left alone (the interrupted code may keep data there).
 *
 * The return address is glibc's __restore_rt (mov $15, %rax; syscall: rt_sigreturn), and above
 * it lies an rt_sigframe as the kernel builds one for a signal handler (ftr_inj_arch_frame): the
 * thread's saved general registers with its system call set to restart, its signal mask, and a
 * copy of its XSAVE area. So the thread needs nobody to resume: if the injector dies during the
 * call, rt_sigreturn puts everything back and the interrupted system call starts again. While
 * the injector lives, it stops the thread at the entry of that rt_sigreturn (PTRACE_SYSCALL) and
 * restores it itself, exactly (ftr_inj_arch_restore).
 *
 * orig_rax: the thread was stopped in a system call, and the kernel, when it resumes it,
 * restarts that call if orig_rax holds its number and rax an -ERESTART* code (rax = orig_rax,
 * rip -= 2). It is -1 for the call, so that the call starts at the function.
 */
#define _GNU_SOURCE
#include <cpuid.h>
#include <elf.h>
#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <sys/user.h>

#include "inject_int.h"

#define RED_ZONE 128
#define XSTATE_MAX (64 * 1024) /* more than any XSAVE area (AMX's is 11 KiB) */
#define X86_DF 0x400u          /* the direction flag in rflags */
#define FRAME_MAX (XSTATE_MAX + 1024 + 4096)

/* the kernel's rt_sigframe (arch/x86/include/asm/sigframe.h, uapi/asm/sigcontext.h,
 * uapi/asm/ucontext.h), as rt_sigreturn reads it: the return address, then the ucontext */
struct k_sigcontext {
    uint64_t r8, r9, r10, r11, r12, r13, r14, r15, rdi, rsi, rbp, rbx, rdx, rax, rcx, rsp, rip;
    uint64_t eflags;
    uint16_t cs, gs, fs, ss;
    uint64_t err, trapno, oldmask, cr2;
    uint64_t fpstate; /* its FP/vector state: an FXSAVE or XSAVE image, 64-byte aligned */
    uint64_t reserved1[8];
};
struct k_stack {
    uint64_t ss_sp;
    int32_t ss_flags, pad;
    uint64_t ss_size;
};
struct k_ucontext {
    uint64_t uc_flags, uc_link;
    struct k_stack uc_stack;
    struct k_sigcontext uc_mcontext;
    uint64_t uc_sigmask;
};
_Static_assert(sizeof(struct k_sigcontext) == 256, "struct sigcontext");
_Static_assert(sizeof(struct k_ucontext) == 304, "struct ucontext");

#define UC_FP_XSTATE 0x1
#define UC_SIGCONTEXT_SS 0x2
#define UC_STRICT_RESTORE_SS 0x4
#ifndef FP_XSTATE_MAGIC1 /* <bits/sigcontext.h> has them */
#define FP_XSTATE_MAGIC1 0x46505853u
#define FP_XSTATE_MAGIC2 0x46505845u
#endif
#define SW_BYTES 464  /* struct _fpx_sw_bytes, in the FXSAVE area's software-reserved bytes */
#define XSTATE_BV 512 /* the XSAVE header's bitmap of the components held */
#define FXSAVE_SIZE 512
#define XTILE (3ull << 17) /* AMX: components the kernel enables per process */

const unsigned ftr_inj_arch_machine = EM_X86_64;
/* mov $15 (rt_sigreturn), %rax; syscall: glibc's __restore_rt, which is not exported */
const unsigned char ftr_inj_arch_sigreturn[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00,
                                                0x00, 0x00, 0x0f, 0x05};
const size_t ftr_inj_arch_sigreturn_len = sizeof ftr_inj_arch_sigreturn;
const unsigned char ftr_inj_arch_syscall_insn[] = {0x0f, 0x05};
const size_t ftr_inj_arch_syscall_insn_len = sizeof ftr_inj_arch_syscall_insn;
const unsigned char ftr_inj_arch_syscall_ret[] = {0x0f, 0x05, 0xc3}; /* syscall; ret */
const size_t ftr_inj_arch_syscall_ret_len = sizeof ftr_inj_arch_syscall_ret;

enum { FP_NONE, FP_XSTATE, FP_FPREGS };

struct ftr_inj_saved {
    struct user_regs_struct regs;
    uint64_t sigmask; /* the thread's signal mask */
    int fp;           /* what was saved of the FP/vector state */
    size_t xlen;      /* the XSAVE area's size, as the kernel gave it */
    struct user_fpregs_struct fpregs;
    unsigned char xstate[XSTATE_MAX];
    unsigned char frame[FRAME_MAX]; /* the signal frame's image (ftr_inj_arch_frame) */
};

struct ftr_inj_saved *ftr_inj_arch_alloc(void)
{
    return calloc(1, sizeof(struct ftr_inj_saved));
}

void ftr_inj_arch_set_mask(struct ftr_inj_saved *s, uint64_t mask)
{
    s->sigmask = mask;
}

void ftr_inj_arch_free(struct ftr_inj_saved *s)
{
    free(s);
}

int ftr_inj_arch_get_regs(pid_t tid, struct ftr_inj_saved *s)
{
    return ptrace(PTRACE_GETREGS, tid, NULL, &s->regs) < 0 ? -1 : 0;
}

/* The XSAVE area holds everything (x87, SSE, AVX, AVX-512, PKRU...); kernels or CPUs without
 * it give the FP registers (x87 and SSE) instead. */
int ftr_inj_arch_get_fp(pid_t tid, struct ftr_inj_saved *s)
{
    struct iovec iov = {s->xstate, sizeof s->xstate};
    if (ptrace(PTRACE_GETREGSET, tid, (void *)NT_X86_XSTATE, &iov) == 0) {
        s->fp = FP_XSTATE;
        s->xlen = iov.iov_len;
        return 0;
    }
    if (errno != EINVAL && errno != EIO && errno != ENODEV) return -1;
    if (ptrace(PTRACE_GETFPREGS, tid, NULL, &s->fpregs) < 0) return -1;
    s->fp = FP_FPREGS;
    return 0;
}

/* Where the saved registers show the thread stopped in a system call the kernel will restart,
 * what the kernel's restart does when no handler runs (arch_do_signal_or_restart in
 * arch/x86/kernel/signal.c): the system call instruction again (rip - 2), with rax the call's
 * number, or restart_syscall for -ERESTART_RESTARTBLOCK (it resumes the call from
 * current->restart_block, e.g. a relative sleep with the time left). */
static uint64_t restart_nr(const struct user_regs_struct *r)
{
    return (long)r->rax == -FTR_INJ_ERESTART_RESTARTBLOCK ? (uint64_t)SYS_restart_syscall
                                                          : r->orig_rax;
}

int ftr_inj_arch_restore(pid_t tid, const struct ftr_inj_saved *s, int at_entry)
{
    int rc = 0;
    if (s->fp == FP_XSTATE) {
        struct iovec iov = {(void *)s->xstate, s->xlen};
        if (ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &iov) < 0) rc = -1;
    } else if (s->fp == FP_FPREGS) {
        if (ptrace(PTRACE_SETFPREGS, tid, NULL, &s->fpregs) < 0) rc = -1;
    }
    /* the general registers even if the FP state failed: they matter most. At a system call's
     * entry stop, the kernel makes the call orig_rax names when the thread resumes: the
     * restart itself, made at once (rip is already past the system call instruction, where
     * the restarted call returns) */
    struct user_regs_struct r = s->regs;
    if (at_entry) r.orig_rax = restart_nr(&s->regs);
    if (ptrace(PTRACE_SETREGS, tid, NULL, &r) < 0) rc = -1;
    return rc;
}

void ftr_inj_arch_syscall(const struct ftr_inj_saved *s, struct ftr_inj_sysc *sc, long *ret)
{
    const struct user_regs_struct *r = &s->regs;
    sc->nr = (long)r->orig_rax;
    sc->args[0] = r->rdi;
    sc->args[1] = r->rsi;
    sc->args[2] = r->rdx;
    sc->args[3] = r->r10;
    sc->args[4] = r->r8;
    sc->args[5] = r->r9;
    sc->sp = r->rsp;
    sc->pc = r->rip;
    *ret = (long)r->rax;
}

/* The XSAVE image's size and components for the frame's software bytes: what the kernel put in
 * them in the regset (its whole user layout), but without AMX's tiles when the thread does not
 * use them: a process that has not asked for AMX has a smaller signal frame layout, and
 * rt_sigreturn would take a larger size for a legacy frame (FXSAVE only). */
static void xstate_layout(const struct ftr_inj_saved *s, uint32_t *size, uint64_t *features)
{
    uint32_t magic1, sz;
    uint64_t xf, bv;
    memcpy(&magic1, s->xstate + SW_BYTES, 4);
    memcpy(&xf, s->xstate + SW_BYTES + 8, 8);
    memcpy(&sz, s->xstate + SW_BYTES + 16, 4);
    memcpy(&bv, s->xstate + XSTATE_BV, 8);
    if (magic1 != FP_XSTATE_MAGIC1 || sz > s->xlen || sz < FXSAVE_SIZE + 64)
        sz = (uint32_t)s->xlen, xf = bv | 3;
    unsigned a, b, c, d;
    if ((xf & XTILE) && !(bv & XTILE) && __get_cpuid_count(0xd, 17, &a, &b, &c, &d) && b && b < sz)
        sz = b, xf &= ~XTILE;
    *size = sz;
    *features = xf;
}

int ftr_inj_arch_frame(struct ftr_inj_saved *s, uint64_t sigreturn, uint64_t sp, const void *data,
                       size_t data_len, struct ftr_inj_frame *f)
{
    const struct user_regs_struct *r = &s->regs;
    uint32_t xsize = FXSAVE_SIZE;
    uint64_t xfeatures = 0;
    if (s->fp == FP_XSTATE) xstate_layout(s, &xsize, &xfeatures);
    uint64_t top = sp - RED_ZONE;
    f->data = (top - data_len) & ~(uint64_t)15;
    uint64_t fp = (f->data - xsize - 4) & ~(uint64_t)63;
    f->ret_at = ((fp - sizeof(struct k_ucontext)) & ~(uint64_t)15) - 8; /* % 16 == 8 */
    if (top - f->ret_at > sizeof s->frame) {
        errno = E2BIG;
        return -1;
    }
    unsigned char *img = s->frame;
    memset(img, 0, top - f->ret_at);
    memcpy(img, &sigreturn, 8); /* pretcode */
    struct k_ucontext uc = {0};
    uc.uc_flags = UC_SIGCONTEXT_SS | UC_STRICT_RESTORE_SS | (s->fp == FP_XSTATE ? UC_FP_XSTATE : 0);
    /* rt_sigreturn hands uc_stack to sigaltstack (restore_altstack), which would set the
     * thread's alternate signal stack to it; only the thread itself can read its current one.
     * A mode that is neither 0, SS_ONSTACK nor SS_DISABLE makes do_sigaltstack fail with
     * EINVAL before it changes anything, and restore_altstack ignores every error but EFAULT:
     * the alternate stack is left as it is. */
    uc.uc_stack.ss_flags = SS_ONSTACK | SS_DISABLE;
    struct k_sigcontext *m = &uc.uc_mcontext;
    *m = (struct k_sigcontext){r->r8,  r->r9,  r->r10, r->r11, r->r12, r->r13,
                               r->r14, r->r15, r->rdi, r->rsi, r->rbp, r->rbx,
                               r->rdx, r->rax, r->rcx, r->rsp, r->rip, r->eflags};
    m->cs = (uint16_t)r->cs;
    m->ss = (uint16_t)r->ss;
    m->fpstate = fp;
    /* the interrupted system call, restarted as the kernel does after a stop without handler,
     * but for -ERESTART_RESTARTBLOCK: rt_sigreturn sets current->restart_block to
     * do_no_restart_syscall, so restart_syscall would fail with EINTR. The call itself is made
     * again instead (the same arguments: a relative sleep or poll timeout starts anew, never
     * shorter, only later) */
    m->rip = r->rip - ftr_inj_arch_syscall_insn_len;
    m->rax = r->orig_rax;
    memcpy(&uc.uc_sigmask, &s->sigmask, 8);
    memcpy(img + 8, &uc, sizeof uc);
    unsigned char *fimg = img + (fp - f->ret_at);
    if (s->fp == FP_XSTATE) {
        memcpy(fimg, s->xstate, xsize);
        uint32_t sw[12] = {FP_XSTATE_MAGIC1, xsize + 4};
        memcpy(&sw[2], &xfeatures, 8);
        sw[4] = xsize;
        memcpy(fimg + SW_BYTES, sw, sizeof sw);
        uint32_t magic2 = FP_XSTATE_MAGIC2;
        memcpy(fimg + xsize, &magic2, 4);
    } else if (s->fp == FP_FPREGS) {
        memcpy(fimg, &s->fpregs, FXSAVE_SIZE); /* its software bytes 0: FXSAVE only */
    } else {
        m->fpstate = 0;
        memcpy(img + 8, &uc, sizeof uc);
    }
    memcpy(img + (f->data - f->ret_at), data, data_len);
    f->at = f->ret_at;
    f->len = top - f->ret_at;
    f->img = img;
    return 0;
}

void ftr_inj_arch_value_stub(uint64_t syscall_ret, uint64_t ret_at, uint64_t words[2],
                             uint64_t *entry_sp, uint64_t *stop_pc, uint64_t *stop_sp)
{
    /* the function returns to the ret of "syscall; ret", which returns to its syscall: rax,
     * the function's value, becomes the system call's number (orig_rax at the entry stop),
     * then the ret goes to __restore_rt with rsp on the frame */
    words[0] = syscall_ret + 2;
    words[1] = syscall_ret;
    *entry_sp = ret_at - 16;
    *stop_pc = syscall_ret + 2;
    *stop_sp = ret_at;
}

int ftr_inj_arch_set_call(pid_t tid, const struct ftr_inj_saved *s, uint64_t fn, uint64_t entry_sp,
                          uint64_t a0, uint64_t a1)
{
    struct user_regs_struct r = s->regs;
    r.rip = fn;
    r.rsp = entry_sp;
    r.rdi = a0;
    r.rsi = a1;
    r.rax = 0;
    r.orig_rax = (unsigned long long)-1; /* no system call to restart */
    r.eflags &= ~(unsigned long long)X86_DF;
    return ptrace(PTRACE_SETREGS, tid, NULL, &r) < 0 ? -1 : 0;
}

int ftr_inj_arch_at_syscall(pid_t tid, uint64_t *pc, uint64_t *sp, uint64_t *nr)
{
    struct user_regs_struct r;
    if (ptrace(PTRACE_GETREGS, tid, NULL, &r) < 0) return -1;
    *pc = r.rip;
    *sp = r.rsp;
    *nr = r.orig_rax;
    return 0;
}

void ftr_inj_arch_sigreturn_stop(uint64_t sigreturn, uint64_t ret_at, uint64_t *stop_pc,
                                 uint64_t *stop_sp)
{
    *stop_pc = sigreturn + ftr_inj_arch_sigreturn_len; /* past its syscall instruction */
    *stop_sp = ret_at + 8;                             /* the ret popped the frame's pretcode */
}

/* A thread with a shadow stack (CET, "x86_Thread_features: shstk") would fault at the ret to
 * an address the shadow stack does not hold. */
const char *ftr_inj_arch_refusal(const char *status)
{
    const char *f = ftr_inj_status_field(status, "x86_Thread_features");
    if (f) {
        const char *end = strchr(f, '\n');
        const char *hit = strstr(f, "shstk");
        if (hit && (!end || hit < end))
            return "it runs with a shadow stack (CET), which the call's return would violate";
    }
    return NULL;
}
