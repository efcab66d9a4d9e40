/*
 * inject_x86_64.c - the injector's x86_64 parts (inject_int.h): the registers of the thread that
 * makes the call, saved and restored whole, and how the call is laid out.
 *
 * The call follows the System V ABI: the arguments in rdi and rsi, rax 0 (no vector registers
 * for a variadic callee), rsp 8 bytes off a 16-byte boundary at the function's entry (as after
 * a call instruction's push of the return address), the direction flag clear, and the 128-byte
 * red zone below rsp left alone (the interrupted code may keep data there). The return address
 * is 0: the function's ret faults there, and the injector catches that SIGSEGV.
 *
 * orig_rax: the thread was stopped in a system call, and the kernel, when it resumes it,
 * restarts that call if orig_rax holds its number and rax an -ERESTART* code (rax = orig_rax,
 * rip -= 2). It is -1 for the call, so that the call starts at the function; then restored with
 * everything else, so that the interrupted system call restarts exactly as after any ptrace stop.
 */
#define _GNU_SOURCE
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/uio.h>
#include <sys/user.h>

#include "inject_int.h"

#define RED_ZONE 128
#define XSTATE_MAX (64 * 1024) /* more than any XSAVE area (AMX's is 11 KiB) */
#define X86_DF 0x400u          /* the direction flag in rflags */

const unsigned ftr_inj_arch_machine = EM_X86_64;
/* mov $15 (rt_sigreturn), %rax; syscall: glibc's __restore_rt, which is not exported */
const unsigned char ftr_inj_arch_sigreturn[] = {0x48, 0xc7, 0xc0, 0x0f, 0x00,
                                                0x00, 0x00, 0x0f, 0x05};
const size_t ftr_inj_arch_sigreturn_len = sizeof ftr_inj_arch_sigreturn;
const unsigned char ftr_inj_arch_syscall_insn[] = {0x0f, 0x05};
const size_t ftr_inj_arch_syscall_insn_len = sizeof ftr_inj_arch_syscall_insn;

enum { FP_NONE, FP_XSTATE, FP_FPREGS };

struct ftr_inj_saved {
    struct user_regs_struct regs;
    int fp;      /* what was saved of the FP/vector state */
    size_t xlen; /* the XSAVE area's size, as the kernel gave it */
    struct user_fpregs_struct fpregs;
    unsigned char xstate[XSTATE_MAX];
};

struct ftr_inj_saved *ftr_inj_arch_alloc(void)
{
    return calloc(1, sizeof(struct ftr_inj_saved));
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

int ftr_inj_arch_restore(pid_t tid, const struct ftr_inj_saved *s)
{
    int rc = 0;
    if (s->fp == FP_XSTATE) {
        struct iovec iov = {(void *)s->xstate, s->xlen};
        if (ptrace(PTRACE_SETREGSET, tid, (void *)NT_X86_XSTATE, &iov) < 0) rc = -1;
    } else if (s->fp == FP_FPREGS) {
        if (ptrace(PTRACE_SETFPREGS, tid, NULL, &s->fpregs) < 0) rc = -1;
    }
    /* the general registers even if the FP state failed: they matter most */
    if (ptrace(PTRACE_SETREGS, tid, NULL, &s->regs) < 0) rc = -1;
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

void ftr_inj_arch_frame(uint64_t sp, size_t data_len, uint64_t *data, uint64_t *entry_sp,
                        uint64_t *ret_at, size_t *ret_len)
{
    *data = (sp - RED_ZONE - data_len) & ~(uint64_t)15;
    *entry_sp = *data - 8; /* the return address, just below the data: rsp % 16 == 8 */
    *ret_at = *entry_sp;
    *ret_len = 8;
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

/* The ret popped the return address: rsp is 8 above the entry's. A call of a null function
 * pointer inside the call also lands at 0, but with its own return address pushed below. */
int ftr_inj_arch_returned(pid_t tid, uint64_t entry_sp, uint64_t *ret)
{
    struct user_regs_struct r;
    if (ptrace(PTRACE_GETREGS, tid, NULL, &r) < 0) return -1;
    *ret = r.rax;
    return r.rip == 0 && r.rsp == entry_sp + 8;
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
