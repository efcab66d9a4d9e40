/*
 * ucontext_x86_64.S - makecontext() wrapped (stacks.c): variadic, so the wrapper keeps every
 * argument register (and al, the vector-register count) and the stack as they came, asks
 * ftr_makecontext_note() to remember the context's stack, and jumps to the real makecontext.
 */
    .text
    .globl makecontext
    .type makecontext, @function
makecontext:
    .cfi_startproc
    push %rax
    .cfi_adjust_cfa_offset 8
    push %rdi
    .cfi_adjust_cfa_offset 8
    push %rsi
    .cfi_adjust_cfa_offset 8
    push %rdx
    .cfi_adjust_cfa_offset 8
    push %rcx
    .cfi_adjust_cfa_offset 8
    push %r8
    .cfi_adjust_cfa_offset 8
    push %r9
    .cfi_adjust_cfa_offset 8
    call ftr_makecontext_note      /* rdi: the ucontext; 7 pushes: the stack is 16-aligned */
    mov %rax, %r11
    pop %r9
    .cfi_adjust_cfa_offset -8
    pop %r8
    .cfi_adjust_cfa_offset -8
    pop %rcx
    .cfi_adjust_cfa_offset -8
    pop %rdx
    .cfi_adjust_cfa_offset -8
    pop %rsi
    .cfi_adjust_cfa_offset -8
    pop %rdi
    .cfi_adjust_cfa_offset -8
    pop %rax
    .cfi_adjust_cfa_offset -8
    test %r11, %r11
    jz 1f
    jmp *%r11
1:  ret                            /* no makecontext after us: nothing to do */
    .cfi_endproc
    .size makecontext, . - makecontext

    .section .note.GNU-stack, "", @progbits
