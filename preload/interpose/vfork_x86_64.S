/*
 * vfork_x86_64.S - vfork() wrapped: the child runs on its parent's memory, its thread's TLS
 * included, until it execs or _exits. Tracing is off in the calling thread across the call
 * (ftr_thread_pause/unpause, threads.c), so that whatever traced code the child runs records
 * nothing into the parent's buffers, shadow stack or counters. The parent, resumed, gets its
 * state back; the child returns with tracing off (its exec'd image traces itself).
 *
 * While a vfork child runs, ftr_vforks counts it: the child and its parent share every variable,
 * and the count says when asking the kernel which process this is may be needed.
 *
 * Like glibc's, it keeps its return address in a register across the system call (rdi: the
 * kernel preserves it): the child's calls would overwrite it on the shared stack.
 */
    .text
    .globl vfork
    .type vfork, @function
vfork:
    .cfi_startproc
    sub $8, %rsp               /* 16-byte aligned for the call */
    .cfi_adjust_cfa_offset 8
    call ftr_thread_pause      /* eax: the thread's tracing state, now off */
    add $8, %rsp
    .cfi_adjust_cfa_offset -8
    mov %eax, %esi
    pop %rdi
    .cfi_adjust_cfa_offset -8
    .cfi_register %rip, %rdi
    lock incl ftr_vforks(%rip) /* a vfork child is about (ftr_own_process) */
    mov $58, %eax              /* SYS_vfork */
    syscall
    push %rdi
    .cfi_adjust_cfa_offset 8
    .cfi_offset %rip, -8
    test %rax, %rax
    jz 2f                      /* the child: tracing stays off */
    lock decl ftr_vforks(%rip) /* the parent: the child has exec'd or ended */
    push %rax
    .cfi_adjust_cfa_offset 8
    mov %esi, %edi
    call ftr_thread_unpause    /* the parent: its state back */
    pop %rax
    .cfi_adjust_cfa_offset -8
    cmp $-4095, %rax
    jae 1f
    ret
1:  mov %eax, %edi
    neg %edi
    sub $8, %rsp
    .cfi_adjust_cfa_offset 8
    call ftr_vfork_errno       /* errno = -rax */
    add $8, %rsp
    .cfi_adjust_cfa_offset -8
    mov $-1, %rax
2:  ret
    .cfi_endproc
    .size vfork, . - vfork
    .section .note.GNU-stack, "", @progbits
