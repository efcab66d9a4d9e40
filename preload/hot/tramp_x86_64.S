/*
 * tramp_x86_64.S - the entry and return trampolines of libftrace.so (x86_64 System V).
 *
 * A patched site is `call stub` (5 bytes), or `jmp stub` for call-through; the site's stub
 * (patcher/x86_64_gen.c) does `movl $site_index, -128(%rsp); jmp *common`, where common is
 * ftr_tramp_fentry, ftr_tramp_mcount, ftr_tramp_fentry_chain (gcc's nested functions: push %r10
 * before the site) or ftr_tramp_through.
 *
 * Register contract of the entry trampolines: on entry the function has not started (fentry,
 * patchable entry) or has only run `push %rbp; mov %rsp,%rbp` (mcount). Every register a
 * function may receive an argument or static chain in must survive: rdi rsi rdx rcx r8 r9, rax
 * (al = vector-register count of a varargs call), r10 (static chain), and r11 too: a caller of
 * a no_caller_saved_registers function keeps a value in it across the call, and the untraced
 * NOP builds keep it. The site index comes in the red zone, at -128 from rsp at the
 * trampoline's first byte (FTR_STUB_INDEX_DISP, ftr_patcher.h), -120(%rbp) once rbp is pushed;
 * each trampoline reads it before it calls anything. Vector, x87 and mxcsr state are not
 * saved: hooks.c is compiled with -mgeneral-regs-only and reaches libc only through
 * ftr_call_saving(), which xsaves everything. Flags are not live at a function's entry. The
 * stack is realigned to 16 bytes for the C call.
 *
 * Exits (the return trampoline, entered by the function's `ret` to a hooked return address,
 * and call-through's after the body returned): every general register but rsp comes back as
 * the function left it. rax:rdx, xmm0/1 and st0/st1 may hold the return value, and a caller may
 * keep values in any of the others across the call: the System V rules let a function clobber
 * rcx, rsi, rdi and r8-r11, but a caller of an ms_abi function keeps rsi and rdi, one of clang's
 * preserve_most keeps all but r11, one of a no_caller_saved_registers function keeps all. So the
 * nine registers a C call may change are saved around the exit hook (EXIT_SAVE); vector and x87
 * state are not touched (same reason as above). The return trampoline jumps to the real return
 * address through the hooked slot, which it leaves just below rsp (in the red zone, where no
 * signal frame goes), so that no register carries it.
 *
 * Unwinding (docs/design.md, "Unwinding through traced frames"): every instruction here has
 * exact CFI, so that an unwinder started anywhere (a signal handler, asynchronous cancellation)
 * walks on. A frame whose return address is hooked has ftr_tramp_return as its caller's pc; an
 * unwinder looks that up at ftr_tramp_return - 1, which is covered by a one-byte FDE of its own:
 * the "pseudo-frame" (CFA = rsp, return address in the hooked slot, CFA - 8), whose personality
 * routine (unwind.c) puts the real return address back in the slot before the unwinder reads it.
 */
    .text

#define GLOBAL_HIDDEN(name) .globl name; .hidden name; .type name, @function; name:
#define GLOBAL_EXPORT(name) .globl name; .type name, @function; name:
#define END(name) .size name, . - name

/* Frame of an entry trampoline, relative to %rbp after `push %rbp; mov %rsp,%rbp`: an ordinary
 * frame-pointer frame (frame-pointer unwinders such as perf's walk through it).
 *     0(%rbp)  the rbp of the interrupted code
 *     8(%rbp)  return address into the traced function (after its site)
 *    16(%rbp)  fentry shape: the function's own return address (the slot we hook)
 * mcount shape: the function already did push %rbp; mov %rsp,%rbp, so its return address
 * is at 8(function's rbp) = 8(0(%rbp)).
 * chain shape (ftr_tramp_fentry_chain): 16(%rbp) holds the r10 the function pushed, its
 * return address is at 24(%rbp).
 *   -8..-72(%rbp)  the nine registers SAVE_ARGS saves (rax at -8 ... r11 at -72: the hooks
 *                  get -72(%rbp), where values.h's FTR_REG_* index them); -80(%rbp) a free word (through:
 *                  the body's address); -120(%rbp) the site index the stub left
 * RESTORE_ARGS takes the CFA's offset from rsp at the trampoline's first byte. */
.macro SAVE_ARGS
    push %rbp
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %rbp, 0
    mov %rsp, %rbp
    .cfi_def_cfa_register %rbp
    push %rax
    push %rcx
    push %rdx
    push %rsi
    push %rdi
    push %r8
    push %r9
    push %r10
    push %r11
    sub $8, %rsp
    and $-16, %rsp
.endm

/* the registers SAVE_ARGS pushed, back (rbp and the CFA stay) */
.macro POP_ARGS
    lea -72(%rbp), %rsp
    pop %r11
    pop %r10
    pop %r9
    pop %r8
    pop %rdi
    pop %rsi
    pop %rdx
    pop %rcx
    pop %rax
.endm

.macro RESTORE_ARGS cfa=8
    POP_ARGS
    pop %rbp
    .cfi_def_cfa %rsp, \cfa
    .cfi_restore %rbp
.endm

/* Around an exit hook: the registers a C call may change (rax:rdx also hold the return value),
 * 72 bytes. sp_cfa=1: the CFA is rsp-relative, and follows the pushes. */
.macro EXIT_SAVE sp_cfa=1
    .irp reg, rax, rdx, rcx, rsi, rdi, r8, r9, r10, r11
    push %\reg
    .if \sp_cfa
    .cfi_adjust_cfa_offset 8
    .endif
    .endr
.endm
.macro EXIT_RESTORE sp_cfa=1
    .irp reg, r11, r10, r9, r8, rdi, rsi, rcx, rdx, rax
    pop %\reg
    .if \sp_cfa
    .cfi_adjust_cfa_offset -8
    .endif
    .endr
.endm

GLOBAL_HIDDEN(ftr_tramp_fentry)
    .cfi_startproc
    SAVE_ARGS
    mov -120(%rbp), %edi           /* the site index the stub left */
    lea 16(%rbp), %rsi
    lea -72(%rbp), %rdx            /* the saved registers (values.h: FTR_REG_*) */
    call ftr_hook_entry
    RESTORE_ARGS
    ret
    .cfi_endproc
END(ftr_tramp_fentry)

GLOBAL_HIDDEN(ftr_tramp_mcount)
    .cfi_startproc
    SAVE_ARGS
    mov -120(%rbp), %edi           /* the site index the stub left */
    mov 0(%rbp), %rsi
    add $8, %rsi
    lea -72(%rbp), %rdx
    call ftr_hook_entry
    RESTORE_ARGS
    ret
    .cfi_endproc
END(ftr_tramp_mcount)

/* A nested function's site: push %r10; call stub; pop %r10 at its start. gcc gives the push no
 * CFI: at the site's return address its CFA rule is rsp + 8 as at the function's first byte,
 * which holds only once rsp is past the pushed r10. So this frame's CFA is put one word higher
 * than a call's (rsp + 16 at the first byte, the return address at CFA - 16): an unwinder
 * comes out of it with rsp at the function's own return address, where that rule reads it.
 * (r10 is not described: it is call-clobbered, no landing pad needs it.) */
GLOBAL_HIDDEN(ftr_tramp_fentry_chain)
    .cfi_startproc
    .cfi_def_cfa %rsp, 16
    .cfi_offset %rip, -16
    SAVE_ARGS
    mov -120(%rbp), %edi           /* the site index the stub left */
    lea 24(%rbp), %rsi
    lea -72(%rbp), %rdx
    call ftr_hook_entry
    RESTORE_ARGS 16
    ret
    .cfi_endproc
END(ftr_tramp_fentry_chain)

/* Call-through (docs/design.md, "Exits: call-through and the return hook"): the site of a
 * function that takes nothing on the stack is `jmp stub`, so this is entered with rsp at the
 * function's own return address, as at its first byte. ftr_hook_through_entry() says where the
 * body starts (the byte after the site) and how to go on:
 *  - call it from here: its return comes back here through a matched call/ret (predicted), the
 *    exit is recorded, and this frame returns to the real caller. The body sees the stack 16
 *    bytes lower (this return address and the saved rbp), which only a function that reads no
 *    argument from the stack can allow (decided per function from DWARF);
 *  - or jump to it as its first byte would have been reached: no entry wanted (the return is
 *    left alone), or the hook chose the return hook for this call (near the stack's end).
 * Frame while the body runs: [return into the caller][saved rbp][return into this], an
 * ordinary frame-pointer frame with exact CFI, so every unwinder walks through it to the real
 * caller (unwind.c drops it from what backtrace() shows). Flags survive `lea` and `pop`. */
GLOBAL_HIDDEN(ftr_tramp_through)
    .cfi_startproc
    SAVE_ARGS
    mov -120(%rbp), %edi           /* the site index the stub left */
    lea 8(%rbp), %rsi
    lea -72(%rbp), %rdx
    call ftr_hook_through_entry    /* rax: the body; rdx: 1 = call it from here */
    mov %rax, -80(%rbp)            /* no register: every one goes back as it came */
    test %edx, %edx
    POP_ARGS
    jz 1f
    call *-80(%rbp)                /* rsp = rbp: the body's return address at rbp - 8 */
    EXIT_SAVE 0                    /* the CFA is rbp-relative: rsp moves freely */
    sub $8, %rsp                   /* rsp = rbp (16-byte aligned) - 72: realigned */
    lea 8(%rbp), %rdi
    lea -8(%rbp), %rsi             /* the saved rax (rdx below it): the return value */
    call ftr_hook_through_exit
    add $8, %rsp
    EXIT_RESTORE 0
    .cfi_remember_state
    pop %rbp
    .cfi_def_cfa %rsp, 8
    .cfi_restore %rbp
    ret
    .cfi_restore_state
1:  pop %rbp
    .cfi_def_cfa %rsp, 8
    .cfi_restore %rbp
    jmp *-88(%rsp)                 /* -80(%rbp), in the red zone: no signal frame goes there */
    .cfi_endproc
END(ftr_tramp_through)
    .globl ftr_tramp_through_end; .hidden ftr_tramp_through_end
ftr_tramp_through_end: /* unwind.c: return addresses in [ftr_tramp_through, here) are ours */

/* A library call (preload/runtime/libcalls.c): the module's GOT slot holds the stub of the symbol,
 * so the program's `call f@plt` (or `call *f@GOTPCREL(%rip)`) arrives here with rsp at the
 * call's return address, as at f's first byte. The entry hook hooks that return address like
 * any function's and says where f is; then every register goes back as it came and f is
 * jumped to, its address read from the red zone (no register may carry it: r11 too may be
 * live, see the contract above). The frame is an ordinary one (the caller's return address at
 * 8(%rbp)), so unwinders walk through it to the caller. */
GLOBAL_HIDDEN(ftr_tramp_libcall)
    .cfi_startproc
    SAVE_ARGS
    mov -120(%rbp), %edi           /* the site index the stub left */
    lea 8(%rbp), %rsi              /* the call's return address */
    lea -72(%rbp), %rdx
    call ftr_hook_libcall          /* rax: the library's function */
    mov %rax, -80(%rbp)
    POP_ARGS
    pop %rbp
    .cfi_def_cfa %rsp, 8
    .cfi_restore %rbp
    jmp *-88(%rsp)                 /* -80(%rbp), in the red zone: no signal frame goes there */
    .cfi_endproc
END(ftr_tramp_libcall)

/* The pseudo-frame: an FDE for the one byte before ftr_tramp_return, where unwinders look up
 * the caller of a frame whose return address is hooked. CFA = rsp (the hooked slot + 8: the
 * pseudo-frame takes no stack), return address at CFA - 8 (the hooked slot), every other
 * register unchanged. The personality runs before the unwinder reads the return address
 * (libgcc: uw_frame_state_for, personality, uw_update_context), and puts it back. Referenced
 * pc-relative: no relocation in the read-only .eh_frame. */
GLOBAL_HIDDEN(ftr_tramp_hooked) /* named, so that debuggers show "ftr_tramp_hooked" there */
    .cfi_startproc
    .cfi_personality 0x1b, ftr_unwind_personality /* DW_EH_PE_pcrel | DW_EH_PE_sdata4 */
    .cfi_def_cfa %rsp, 0
    int3 /* never executed */
    .cfi_endproc
END(ftr_tramp_hooked)

/* The body: rsp = the hooked slot + 8 on entry. The slot is kept inside the frame (it still
 * holds our address, which leads an unwinder to the pseudo-frame above) until the real return
 * address is stored in it; CFA = slot + 8 throughout, return address at CFA - 8. */
GLOBAL_HIDDEN(ftr_tramp_return)
    .cfi_startproc
    .cfi_def_cfa %rsp, 0
    lea -8(%rsp), %rsp
    .cfi_adjust_cfa_offset 8
    EXIT_SAVE
    push %rbp
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %rbp, 0
    mov %rsp, %rbp
    .cfi_def_cfa_register %rbp /* CFA = rbp + 88; the slot is 80(%rbp) */
    and $-16, %rsp             /* realigned anyway: hand-written callers need not align */
    lea 88(%rbp), %rdi
    lea 72(%rbp), %rsi         /* the saved rax (rdx below it): the return value */
    call ftr_hook_exit
    mov %rax, 80(%rbp)         /* the slot: from here on unwinders read the real address */
    mov %rbp, %rsp
    pop %rbp
    .cfi_def_cfa %rsp, 80
    .cfi_restore %rbp
    EXIT_RESTORE
    lea 8(%rsp), %rsp          /* the slot, now below rsp, inside the red zone: intact */
    .cfi_adjust_cfa_offset -8
    jmp *-8(%rsp)
    .cfi_endproc
END(ftr_tramp_return)

/* The slow-path area (ftr_call_saving, ftr_tramp_sigret). BLOCK_SIGNALS: rt_sigprocmask(
 * SIG_BLOCK, &slow_blocked, old, 8), old a register or $0. AREA_TAKE: ftr_slow_busy + 1 (r14
 * keeps its TLS offset), to \nested if the area was in use already, else rax = the area (0: not
 * mapped yet; r13 keeps its TLS offset). RAISE_DEFERRED_TRAP: a SIGTRAP put off by on_sigtrap()
 * (init.c) while the thread was on the area, raised again. Each clobbers rax, rcx, r11 (system
 * calls) and the registers it names. */
.macro BLOCK_SIGNALS old
    mov $14, %eax
    xor %edi, %edi
    lea slow_blocked(%rip), %rsi
    mov \old, %rdx
    mov $8, %r10d
    syscall
.endm
.macro AREA_TAKE nested
    movq ftr_slow_busy@GOTTPOFF(%rip), %r14
    addl $1, %fs:(%r14)            /* one instruction: atomic against our own signal handlers */
    cmpl $1, %fs:(%r14)
    jne \nested
    movq ftr_slow_area@GOTTPOFF(%rip), %r13
    mov %fs:(%r13), %rax
.endm
.macro RAISE_DEFERRED_TRAP /* clobbers rdx, rsi, rdi, r12, r13 */
    movq ftr_slow_deferred_trap@GOTTPOFF(%rip), %r13
    cmpl $0, %fs:(%r13)
    je .Lno_trap\@
    movl $0, %fs:(%r13)            /* tgkill(getpid(), gettid(), SIGTRAP) */
    mov $186, %eax
    syscall
    mov %rax, %r12
    mov $39, %eax
    syscall
    mov %rax, %rdi
    mov %r12, %rsi
    mov $5, %edx
    mov $234, %eax
    syscall
.Lno_trap\@:
.endm

/* A signal handler's hooked return: the frame's real return address is the signal restorer
 * (glibc's __restore_rt, whose rt_sigreturn loads every register from the signal frame), so
 * every register but rsp is dead here. Nothing is written below rsp: the handler's frame, dead
 * now, may be jumped back into (QEMU's sigaltstack coroutines sigsetjmp() in the handler,
 * return, and siglongjmp() back in). Untraced, the restorer writes no stack; so the exit hook
 * runs on the thread's slow-path area, with signals blocked (rt_sigreturn puts back the
 * handler's interrupted mask) so that no handler of the program lands on it. If the area is
 * missing or busy (a SIGTRAP handler of ours nested in its own slow path), the hook runs as
 * ftr_tramp_return does, on this stack. The pseudo-frame for unwinders is the byte before. */
GLOBAL_HIDDEN(ftr_tramp_sighooked)
    .cfi_startproc
    .cfi_personality 0x1b, ftr_unwind_personality
    .cfi_def_cfa %rsp, 0
    int3 /* never executed */
    .cfi_endproc
END(ftr_tramp_sighooked)

GLOBAL_HIDDEN(ftr_tramp_sigret)
    .cfi_startproc
    .cfi_def_cfa %rsp, 0
    mov %rsp, %rbx                 /* callee-saved: survives the C call */
    .cfi_def_cfa_register %rbx
    BLOCK_SIGNALS $0
    AREA_TAKE 1f
    test %rax, %rax
    jz 1f
    add ftr_slow_area_size(%rip), %rax
    and $-64, %rax
    mov %rax, %rsp                 /* off the program's stack */
    mov %rbx, %rdi
    xor %esi, %esi                 /* no return value */
    call ftr_hook_sigexit
    mov %rax, -8(%rbx)             /* the slot: from here on unwinders read the real address */
    mov %rbx, %rsp
    .cfi_def_cfa_register %rsp
    subl $1, %fs:(%r14)
    RAISE_DEFERRED_TRAP
    jmp *-8(%rsp)                  /* the slot, in the red zone: no signal frame goes there */
    .cfi_def_cfa_register %rbx
1:  subl $1, %fs:(%r14)            /* on this stack, as ftr_tramp_return */
    lea -8(%rbx), %rsp
    and $-16, %rsp
    mov %rbx, %rdi
    xor %esi, %esi
    call ftr_hook_sigexit
    mov %rax, -8(%rbx)
    mov %rbx, %rsp
    .cfi_def_cfa_register %rsp
    jmp *%rax
    .cfi_endproc
END(ftr_tramp_sigret)

/* void ftr_call_saving(void (*fn)(void *), void *arg): fn(arg) with all extended state saved,
 * on the thread's private slow-path area (ftr_slow_area, mapped here with a raw mmap system
 * call the first time: no libc, so that it works inside any signal handler): the xsave image
 * at its start, then a stack of its own. The caller's stack may be a small sigaltstack that
 * neither an 11 KiB xsave image (AMX) nor the slow path's C code would fit on. XSAVEC saves
 * only the components in use, compacted. Signals other than the synchronous ones are blocked
 * meanwhile (two rt_sigprocmask system calls per slow path: once per chunk, once per thread):
 * a handler of the program must never run on the private area, which is small, unguarded and
 * just above the saved image, nor find its walk of the stack starting there. A nested call (a
 * fault in the slow path whose handler is traced) finds the area busy and falls back to saving
 * on its own stack. */
GLOBAL_HIDDEN(ftr_call_saving)
    .cfi_startproc
    push %rbp
    .cfi_adjust_cfa_offset 8
    .cfi_rel_offset %rbp, 0
    mov %rsp, %rbp
    .cfi_def_cfa_register %rbp
    push %rbx
    push %r12
    push %r13
    push %r14
    mov %rdi, %r12                 /* fn */
    mov %rsi, %rbx                 /* arg (rbx, r12-r14 are callee-saved: survive the call) */
    sub $16, %rsp                  /* -48(%rbp): the signal mask to put back */
    BLOCK_SIGNALS %rsp
    AREA_TAKE 3f                   /* nested: the area is in use */
    test %rax, %rax
    jnz 2f
    mov $9, %eax                   /* mmap(NULL, size, RW, PRIVATE|ANONYMOUS, -1, 0) */
    xor %edi, %edi
    mov ftr_slow_area_size(%rip), %rsi
    mov $3, %edx
    mov $0x22, %r10d
    mov $-1, %r8
    xor %r9d, %r9d
    syscall
    cmp $-4096, %rax
    ja 3f                          /* no memory: the old way, on this stack */
    mov %rax, %fs:(%r13)
2:  /* rax: the area. The xsave image at its start, the stack at its end. */
    mov %rax, %r13
    mov ftr_slow_area_size(%rip), %rcx
    lea (%rax,%rcx), %rsp
    and $-64, %rsp
    mov %r13, %rdi
    call save_state
    mov %rbx, %rdi
    call *%r12
    mov %r13, %rdi
    call restore_state
    jmp 4f
3:  /* on this stack */
    mov ftr_xsave_size(%rip), %ecx
    sub %rcx, %rsp
    and $-64, %rsp
    mov %rsp, %r13
    sub $16, %rsp                  /* keep the image out of the calls' way */
    mov %r13, %rdi
    call save_state
    mov %rbx, %rdi
    call *%r12
    mov %r13, %rdi
    call restore_state
4:  lea -48(%rbp), %rsp            /* off the area first, then free it */
    subl $1, %fs:(%r14)
    mov $14, %eax                  /* rt_sigprocmask(SIG_SETMASK, rsp, NULL, 8): the saved mask */
    mov $2, %edi
    mov %rsp, %rsi
    xor %edx, %edx
    mov $8, %r10d
    syscall
    RAISE_DEFERRED_TRAP
    lea -32(%rbp), %rsp
    pop %r14
    pop %r13
    pop %r12
    pop %rbx
    pop %rbp
    .cfi_def_cfa %rsp, 8
    ret
    .cfi_endproc
END(ftr_call_saving)

/* Every signal but SIGTRAP and SIGSYS. Blocked, those would come with the default action when
 * the kernel raises them: a single-step or int3 trap (the program's own, or our breakpoint
 * batches), a seccomp filter's trap of one of our system calls (a sandbox's handler emulates
 * it). A SIGTRAP another thread or process sends while we are on the private area is put off
 * by on_sigtrap() (init.c) and raised again here, once back on the thread's stack. A fault of
 * our own (SIGSEGV, SIGBUS, SIGILL, SIGFPE) ends the process with the default action. */
    .section .rodata
    .balign 8
slow_blocked:
    .quad ~((1 << 4) | (1 << 30))
    .text

/* save_state(image in rdi, 64-byte aligned): every enabled component in use. Clobbers rax,
 * rcx, rdx, rdi. restore_state(image in rdi): back. */
    .type save_state, @function
save_state:
    .cfi_startproc
    /* zero the legacy area's header part (bytes 512..575): xrstor faults on a dirty one */
    xor %eax, %eax
    lea 512(%rdi), %rcx
    mov %rax, (%rcx)
    mov %rax, 8(%rcx)
    mov %rax, 16(%rcx)
    mov %rax, 24(%rcx)
    mov %rax, 32(%rcx)
    mov %rax, 40(%rcx)
    mov %rax, 48(%rcx)
    mov %rax, 56(%rcx)
    mov $-1, %eax
    mov $-1, %edx
    cmpb $0, ftr_have_xsavec(%rip)
    je 1f
    xsavec64 (%rdi)
    ret
1:  xsave64 (%rdi)
    ret
    .cfi_endproc
    .size save_state, . - save_state

    .type restore_state, @function
restore_state:
    .cfi_startproc
    mov $-1, %eax
    mov $-1, %edx
    xrstor64 (%rdi)
    ret
    .cfi_endproc
    .size restore_state, . - restore_state

/* The hook symbols the compiler's instrumentation calls. Sites we patched never reach these;
 * sites we left alone (unknown shape, or before patching) call them and return at once. */
GLOBAL_EXPORT(__fentry__)
    .cfi_startproc
    ret
    .cfi_endproc
END(__fentry__)
GLOBAL_EXPORT(mcount)
    .cfi_startproc
    ret
    .cfi_endproc
END(mcount)
GLOBAL_EXPORT(_mcount)
    .cfi_startproc
    ret
    .cfi_endproc
END(_mcount)

    .section .note.GNU-stack, "", @progbits
