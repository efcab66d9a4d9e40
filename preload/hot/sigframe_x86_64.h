/*
 * sigframe_x86_64.h - where the interrupted context lies in a signal handler's frame (x86_64).
 *
 * The kernel builds every signal frame of a 64-bit process as struct rt_sigframe: at the
 * handler's entry its stack pointer points at the return address (glibc's restorer), and the
 * ucontext_t follows it; the interrupted registers are its uc_mcontext.gregs (rsp at offset
 * 160, rip at 168: REG_RSP, REG_RIP). rt_sigreturn loads them back from there.
 */
#ifndef FTR_SIGFRAME_X86_64_H
#define FTR_SIGFRAME_X86_64_H

#define FTR_SIGFRAME_SP_OFF (8u + 160u) /* from the handler's return address slot */
#define FTR_SIGFRAME_IP_OFF (8u + 168u)

#endif /* FTR_SIGFRAME_X86_64_H */
