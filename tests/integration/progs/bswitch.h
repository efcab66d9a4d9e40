/* bswitch.h - a hand-written stack switch for the test programs (bstacks.c, bgreen.c): what
 * boost.context and most fiber libraries do, seen by no wrapper of the tracer. Include it once,
 * after behave.h. */
#ifndef BSWITCH_H
#define BSWITCH_H
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>

/* ---- bs_switch(&from_sp, to_sp): save the callee-saved registers on this stack, store its
 * stack pointer in *from, load to, restore, return there. bs_trampoline starts a new stack:
 * fn (r13) is called with arg (r12) and never returns. ---- */
__asm__(".text\n"
        ".globl bs_switch\n"
        ".hidden bs_switch\n"
        ".type bs_switch,@function\n"
        "bs_switch:\n"
        "    pushq %rbp\n    pushq %rbx\n    pushq %r12\n    pushq %r13\n"
        "    pushq %r14\n    pushq %r15\n"
        "    movq %rsp, (%rdi)\n"
        "    movq %rsi, %rsp\n"
        "    popq %r15\n    popq %r14\n    popq %r13\n    popq %r12\n"
        "    popq %rbx\n    popq %rbp\n"
        "    ret\n"
        ".size bs_switch, .-bs_switch\n"
        ".globl bs_trampoline\n"
        ".hidden bs_trampoline\n"
        ".type bs_trampoline,@function\n"
        "bs_trampoline:\n"
        "    .cfi_startproc\n"
        "    .cfi_undefined rip\n"
        "    xorl %ebp, %ebp\n"
        "    movq %r12, %rdi\n"
        "    andq $-16, %rsp\n"
        "    callq *%r13\n"
        "    ud2\n"
        "    .cfi_endproc\n"
        ".size bs_trampoline, .-bs_trampoline\n");
void bs_switch(void **from, void *to);
void bs_trampoline(void);

/* An mmap'd stack (its lowest page a guard) set up so that bs_switch to the returned stack
 * pointer runs fn(arg). */
NOTRACE static void *bs_stack(size_t size, void (*fn)(void *), void *arg)
{
    char *p =
        mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
    if (p == MAP_FAILED) {
        perror("mmap");
        exit(2);
    }
    mprotect(p, 4096, PROT_NONE);
    void **sp = (void **)(p + size);
    *--sp = 0;
    *--sp = (void *)bs_trampoline; /* bs_switch's ret */
    *--sp = 0;                     /* rbp */
    *--sp = 0;                     /* rbx */
    *--sp = arg;                   /* r12 */
    *--sp = (void *)fn;            /* r13 */
    *--sp = 0;                     /* r14 */
    *--sp = 0;                     /* r15 */
    return sp;
}

#endif /* BSWITCH_H */
