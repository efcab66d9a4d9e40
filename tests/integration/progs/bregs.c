/* bregs: callers that keep values across a call in registers the System V ABI lets a callee
 * clobber. Callers of no_caller_saved_registers functions (gcc, clang) expect every register
 * back but rax, r11 included (the site's call to __fentry__/mcount may take r11 in the -pg
 * builds, not in the NOP ones: so a traced entry keeps it too); callers of ms_abi
 * functions keep rsi and rdi; callers of clang's preserve_most keep all but r11. A traced
 * function's return, hooked or called through, must give all of them back.
 *   usage: bregs
 * main -> check_regs x 3 -> call_keeping -> keep_all (no_caller_saved_registers). Each round
 * prints the registers that changed across the call ("none" when all were kept).
 * tree: {main, main;check_regs 3, main;check_regs;call_keeping 3,
 *        main;check_regs;call_keeping;keep_all 3}
 * Built with -mno-red-zone: call_keeping calls from inline assembly, below its own frame.
 */
#include <stdio.h>
#include <string.h>

#include "behave.h"

static volatile long sink;

/* Saves and restores itself every register it changes, but rax: a caller needs to save none. */
__attribute__((noinline, no_caller_saved_registers, target("general-regs-only"))) long
keep_all(long a, long b)
{
    sink += a;
    return a * 3 + b;
}

enum { R_RDI, R_RSI, R_RCX, R_RDX, R_R8, R_R9, R_R10, R_R11, NREGS };
static const char *const names[NREGS] = {"rdi", "rsi", "rcx", "rdx", "r8", "r9", "r10", "r11"};

/* keep_all(a, b) with the argument registers and rcx, rdx, r8, r9, r10, r11 holding known values;
 * their values after the call in out[], keep_all's result returned. */
NOINLINE long call_keeping(long a, long b, long out[NREGS])
{
    long r;
    __asm__ volatile("mov %[a], %%rdi\n\t"
                     "mov %[b], %%rsi\n\t"
                     "mov $0x1c1c1c, %%rcx\n\t"
                     "mov $0x2d2d2d, %%rdx\n\t"
                     "mov $0x888888, %%r8\n\t"
                     "mov $0x999999, %%r9\n\t"
                     "mov $0xaaaaaa, %%r10\n\t"
                     "mov $0xbbbbbb, %%r11\n\t"
                     "call keep_all\n\t"
                     "mov %%rdi, 0(%[o])\n\t"
                     "mov %%rsi, 8(%[o])\n\t"
                     "mov %%rcx, 16(%[o])\n\t"
                     "mov %%rdx, 24(%[o])\n\t"
                     "mov %%r8, 32(%[o])\n\t"
                     "mov %%r9, 40(%[o])\n\t"
                     "mov %%r10, 48(%[o])\n\t"
                     "mov %%r11, 56(%[o])\n\t"
                     : "=a"(r)
                     : [a] "m"(a), [b] "m"(b), [o] "b"(out)
                     : "rcx", "rdx", "rsi", "rdi", "r8", "r9", "r10", "r11", "memory", "cc");
    return r;
}

NOINLINE int check_regs(long a, long b)
{
    const long want[NREGS] = {a, b, 0x1c1c1c, 0x2d2d2d, 0x888888, 0x999999, 0xaaaaaa, 0xbbbbbb};
    long got[NREGS];
    long r = call_keeping(a, b, got);
    char changed[128] = "";
    for (int i = 0; i < NREGS; i++)
        if (got[i] != want[i]) {
            strcat(changed, " ");
            strcat(changed, names[i]);
        }
    printf("keep_all(%ld, %ld) = %ld, changed:%s\n", a, b, r, changed[0] ? changed : " none");
    return changed[0] != 0;
}

int main(void)
{
    int bad = 0;
    for (long i = 1; i <= 3; i++)
        bad += check_regs(i, 10 * i);
    return bad ? 1 : 0;
}
