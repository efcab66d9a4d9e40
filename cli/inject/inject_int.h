/*
 * inject_int.h - the injector's parts as its files share them (inject.h is the API): the /proc
 * and ELF parsing (elfsym.c; pure functions, unit-tested), the system calls in which a thread
 * may be stopped for the call (inject.c), and what each architecture provides
 * (inject_x86_64.c).
 */
#ifndef FTR_INJECT_INT_H
#define FTR_INJECT_INT_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- /proc/PID/maps (elfsym.c) ---- */

struct ftr_inj_map {
    uint64_t start, end, offset, inode;
    unsigned dev_major, dev_minor;
    char perms[5];    /* "r-xp" */
    const char *path; /* into the line; path_len bytes, " (deleted)" left out; "" if none */
    size_t path_len;
};

/* One line of /proc/PID/maps (ending at '\n' or NUL). @return 0, or -1 if malformed */
int ftr_inj_parse_maps_line(const char *line, struct ftr_inj_map *m);
/* The mapping that holds addr, and the one just below it (below->end == 0 if none).
 * @return 0, or -1 if no mapping holds addr */
int ftr_inj_maps_find(const char *maps, uint64_t addr, struct ftr_inj_map *m,
                      struct ftr_inj_map *below);

/* ---- ELF dynamic symbols (elfsym.c) ---- */

struct ftr_inj_elf {
    const unsigned char *img; /* the file, mapped read-only */
    size_t size;
    const void *syms, *versym; /* .dynsym, .gnu.version (or NULL) */
    const char *strs;          /* .dynstr */
    size_t nsyms, strs_size;
    uint64_t load_vaddr; /* the first PT_LOAD's p_vaddr, page-aligned down */
};

/* Maps and checks an ELF file of this architecture (ftr_inj_arch_machine). @return 0, -1 */
int ftr_inj_elf_open(const char *path, struct ftr_inj_elf *e, char *err, size_t errlen);
void ftr_inj_elf_close(struct ftr_inj_elf *e);
/* The value of a defined dynamic symbol, its default version preferred. @return 0, -1 */
int ftr_inj_elf_symbol(const struct ftr_inj_elf *e, const char *name, uint64_t *value);
/* Where the bytes pat occur in the file's executable segments: the address of the only
 * occurrence. @return 1 (found once), 0 (never), 2 (more than once: ambiguous) */
int ftr_inj_elf_find_code(const struct ftr_inj_elf *e, const void *pat, size_t len,
                          uint64_t *vaddr);
/* The file's GNU build ID: where its bytes are (vaddr) and how many. @return 0, -1 (none) */
int ftr_inj_elf_build_id(const struct ftr_inj_elf *e, const unsigned char **id, size_t *len,
                         uint64_t *vaddr);

/* glibc as a process has it mapped: the addresses of what the injector calls or looks for */
struct ftr_inj_libc {
    uint64_t base;             /* load bias of libc.so.6 */
    uint64_t dlopen;           /* dlopen@@GLIBC_2.34 */
    uint64_t dlerror;          /* dlerror */
    uint64_t version;          /* gnu_get_libc_version: the proof it is glibc */
    uint64_t sigreturn;        /* __restore_rt, the return address of glibc's signal frames (and
                                  of the call's); 0 if not found */
    uint64_t syscall_ret;      /* a "syscall; ret" in its code; 0 if none */
    uint64_t text_lo, text_hi; /* its executable mapping */
};

/* Finds libc.so.6 in maps (the process's /proc/PID/maps text) and its symbols, reading the
 * very file mapped (/proc/PID/map_files, else through /proc/PID/root). root_dir is
 * "/proc/PID" or "/proc/PID/task/TID" (a live thread). @return 0, or -1 with err */
int ftr_inj_find_libc(pid_t pid, const char *root_dir, const char *maps, struct ftr_inj_libc *lc,
                      char *err, size_t errlen);

/* ---- /proc/PID/task/TID/syscall and status (elfsym.c) ---- */

#define FTR_INJ_RUNNING (-2L) /* "running": not blocked */
#define FTR_INJ_NOCALL (-1L)  /* blocked, but not in a system call */

struct ftr_inj_sysc {
    long nr;          /* the system call's number, or FTR_INJ_RUNNING / FTR_INJ_NOCALL */
    uint64_t args[6]; /* its arguments (nr >= 0) */
    uint64_t sp, pc;  /* the thread's stack pointer and program counter (not when running) */
};

/* /proc/PID/task/TID/syscall's text. @return 0, or -1 if malformed */
int ftr_inj_parse_syscall(const char *text, struct ftr_inj_sysc *s);
/* The value of "Key:" in a /proc status text (after the blanks), or NULL */
const char *ftr_inj_status_field(const char *status, const char *key);
/* Is signal sig in a status signal set ("SigBlk:\t0000000000010000")? @return 1, 0, -1 */
int ftr_inj_sigset_has(const char *hex, int sig);

/* In which system calls may a thread be stopped for the call (inject.c's calls[] says why) */
enum ftr_inj_class {
    FTR_INJ_UNSAFE,
    FTR_INJ_SAFE,        /* always */
    FTR_INJ_SAFE_READ,   /* if arg 0 is a pipe, FIFO, eventfd, timerfd or signalfd */
    FTR_INJ_SAFE_ACCEPT, /* if arg 0 is a socket without a receive timeout */
    /* these three may install a temporary signal mask: safe if they do not (ppoll's arg 3 is
     * NULL; pselect6's arg 5 is NULL or points to a NULL mask), or if ptrace shows the mask they
     * saved (Linux 5.0 and later; see calls[]) */
    FTR_INJ_SAFE_PPOLL,
    FTR_INJ_SAFE_PSELECT,
    FTR_INJ_SAFE_SIGSUSPEND,
};
/* The class of system call nr; its name in *name (NULL if unknown). */
enum ftr_inj_class ftr_inj_syscall_class(long nr, const char **name);

/* ---- what each architecture provides (inject_x86_64.c) ---- */

struct ftr_inj_saved; /* a thread's general registers, FP/vector state and signal mask */

/* what the kernel leaves in rax for a system call it will restart (linux/errno.h) */
#define FTR_INJ_ERESTARTSYS 512
#define FTR_INJ_ERESTARTNOINTR 513
#define FTR_INJ_ERESTARTNOHAND 514
#define FTR_INJ_ERESTART_RESTARTBLOCK 516

/* The call's frame on the thread's stack, one piece (ftr_inj_arch_frame) */
struct ftr_inj_frame {
    uint64_t at;              /* where img goes: its lowest address */
    size_t len;               /* up to the red zone */
    const unsigned char *img; /* its bytes */
    uint64_t data;            /* where the data (the call's argument: a path) is in it */
    uint64_t ret_at; /* the signal frame's return address (__restore_rt): a call whose return
                        address slot this is returns through the frame */
};

extern const unsigned ftr_inj_arch_machine;          /* ELF e_machine of this architecture */
extern const unsigned char ftr_inj_arch_sigreturn[]; /* glibc's __restore_rt, its bytes */
extern const size_t ftr_inj_arch_sigreturn_len;
extern const unsigned char ftr_inj_arch_syscall_insn[]; /* the system call instruction */
extern const size_t ftr_inj_arch_syscall_insn_len;
extern const unsigned char ftr_inj_arch_syscall_ret[]; /* a system call, then a return */
extern const size_t ftr_inj_arch_syscall_ret_len;

struct ftr_inj_saved *ftr_inj_arch_alloc(void);
void ftr_inj_arch_free(struct ftr_inj_saved *s);
/* The general registers (PTRACE_GETREGS) of stopped thread tid. @return 0, -1 (errno) */
int ftr_inj_arch_get_regs(pid_t tid, struct ftr_inj_saved *s);
/* ... and its whole FP/vector state (NT_X86_XSTATE or the FP registers) */
int ftr_inj_arch_get_fp(pid_t tid, struct ftr_inj_saved *s);
/* The thread's own signal mask, which the frame restores */
void ftr_inj_arch_set_mask(struct ftr_inj_saved *s, uint64_t mask);
/* Sets the FP state (if it was got), then the general registers back as saved. at_entry: the
 * thread is at a system call's entry stop, and its interrupted system call is restarted there,
 * as the kernel would after a stop; else it is at a signal's or an interrupt's stop, where the
 * kernel restarts it itself. @return 0, -1 (errno) */
int ftr_inj_arch_restore(pid_t tid, const struct ftr_inj_saved *s, int at_entry);
/* The system call the saved registers are in: its number (-1 if none), arguments, the value
 * it returns for now (an -ERESTART* one when it waits to be restarted), sp and pc. */
void ftr_inj_arch_syscall(const struct ftr_inj_saved *s, struct ftr_inj_sysc *sc, long *ret);
/* The frame of a call below sp (the thread's stack pointer, stopped in a system call to be
 * restarted): data_len bytes of data (the call's argument), and under them a signal frame of
 * the saved state for sigreturn (__restore_rt), so that the call, returning into it, resumes
 * the thread as it was without the injector. @return 0, -1 (errno: too large) */
int ftr_inj_arch_frame(struct ftr_inj_saved *s, uint64_t sigreturn, uint64_t sp, const void *data,
                       size_t data_len, struct ftr_inj_frame *f);
/* Where a call returning through the frame at ret_at stops the thread (PTRACE_SYSCALL): the
 * entry of rt_sigreturn, at *stop_pc with *stop_sp. Its value is lost there. */
void ftr_inj_arch_sigreturn_stop(uint64_t sigreturn, uint64_t ret_at, uint64_t *stop_pc,
                                 uint64_t *stop_sp);
/* For a call whose value is wanted: the two words to write below ret_at, the call's entry sp,
 * and the system call entry stop where the value is the system call's number. */
void ftr_inj_arch_value_stub(uint64_t syscall_ret, uint64_t ret_at, uint64_t words[2],
                             uint64_t *entry_sp, uint64_t *stop_pc, uint64_t *stop_sp);
/* Sets the registers for fn(a0, a1) from the saved ones, entering with sp entry_sp (its return
 * address is there); the kernel's system call restart is kept out of it. @return 0, -1 */
int ftr_inj_arch_set_call(pid_t tid, const struct ftr_inj_saved *s, uint64_t fn, uint64_t entry_sp,
                          uint64_t a0, uint64_t a1);
/* At a system call stop: the thread's pc, sp and system call number. @return 0, -1 (errno) */
int ftr_inj_arch_at_syscall(pid_t tid, uint64_t *pc, uint64_t *sp, uint64_t *nr);
/* A reason to refuse the process found in its status text (e.g. a shadow stack), or NULL. */
const char *ftr_inj_arch_refusal(const char *status);

/* The one-line reason of a refusal or failure: printf into err[0..n) (inject.c). */
void ftr_inj_errf(char *err, size_t n, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

#endif
