/*
 * unwind_fde_x86_64.S - the unwind information of generated code (stubs, the sled mirror).
 *
 * A stub is `movl $index, -128(%rsp); jmp *slot`, a mirror entry one `jmp`: neither moves rsp,
 * so at every byte of them the caller's frame is as at a function's first instruction: the
 * return address at (%rsp), the canonical frame address rsp+8, every other register unchanged.
 * unwind_fde.c hands this one CIE/FDE pair to libgcc's unwinder for any address in such code,
 * with the code's own address as the region start (the FDE's own addresses are never read).
 */
    .section .rodata
    .balign 8
    .globl ftr_generated_fde
    .hidden ftr_generated_fde
cie:
    .long cie_end - cie_id          /* length */
cie_id:
    .long 0                         /* CIE id */
    .byte 1                         /* version */
    .asciz "zR"                     /* augmentation: data length, FDE address encoding */
    .uleb128 1                      /* code alignment */
    .sleb128 -8                     /* data alignment */
    .byte 16                        /* return address column: rip */
    .uleb128 1                      /* augmentation data: 1 byte */
    .byte 0x00                      /* DW_EH_PE_absptr */
    .byte 0x0c, 7, 8                /* DW_CFA_def_cfa: rsp + 8 */
    .byte 0x90, 1                   /* DW_CFA_offset: rip at cfa - 8 */
    .balign 8, 0                    /* DW_CFA_nop */
cie_end:
ftr_generated_fde:
    .long fde_end - fde_cie         /* length */
fde_cie:
    .long fde_cie - cie             /* back to the CIE */
    .quad 0                         /* pc_begin (the unwinder takes the bases' func instead) */
    .quad 16                        /* pc_range */
    .uleb128 0                      /* augmentation data: none */
    .balign 8, 0                    /* no instructions: the CIE's rules hold throughout */
fde_end:
    .long 0                         /* a terminator, as .eh_frame has */

    .section .note.GNU-stack, "", @progbits
