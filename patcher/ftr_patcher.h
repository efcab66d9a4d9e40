/*
 * ftr_patcher.h - find function-entry hook sites and rewrite them.
 *
 * The patcher knows instructions, ELF files and live text; it knows nothing of trace records.
 * Its parts, one concern each:
 *   x86_64_insn.c  decide: recognise site shapes in byte buffers (a small length decoder).
 *   x86_64_gen.c   generate: the bytes of a NOP / CALL / JMP state and of a per-site stub, and
 *                  what the new bytes do (for the breakpoint handler). Pure, tested on buffers.
 *   elf_got.c      the GOT slots through which a module calls other modules (library calls);
 *   x86_64_got.c   ... and which of them its text does more with than call through.
 *   elf_sites.c    find the sites of one loaded module: __mcount_loc, __patchable_function_entries,
 *                  else the symbol table; name each site's function; read the build-id.
 *   dwarf_args.c   which functions of a module take all their arguments in registers, from its
 *                  DWARF, read by dwarf_read.c (a small reader on libelf: libdw cannot link
 *                  into the preload).
 *   dwarf_params.c where each function's parameters and return value are at its entry, and
 *                  what they are (for --auto-args), from the same DWARF.
 *   text_io.c      the only code that reads and writes live text: through /proc/thread-self/mem
 *                  (a missing page is an error, never a fault), read back; mprotect only for
 *                  callers that are alone.
 *   text_poke.c    rewrite sites: alone (plain writes), or live, while other threads run them:
 *                  the kernel's text_poke_bp batch (int3 first bytes, sync, tails, sync, first
 *                  bytes, sync) and its SIGTRAP side, which sends a trapped thread on as the new
 *                  instruction would.
 *   stw.c          the process's threads: count those that may run its code, find one running
 *                  with a signal blocked; and stop-the-world (park every other running thread
 *                  in a signal handler, run a callback, serialise, release), which the preload
 *                  no longer uses (it cannot see a thread's outer contexts; see the sled
 *                  states) but bench/repatch --park compares against.
 *
 * Life of a site: ORIGINAL bytes (whatever the compiler emitted) -> NOP state or CALL state,
 * and back and forth between those two. Both states keep an instruction boundary at +5:
 *   NOP  state: 0f 1f 44 00 00        [90 when the site is 6 bytes long]
 *   CALL state: e8 <rel32 to stub>    [90 when the site is 6 bytes long]
 * (5 x 90 sites: NOP 90 90 90 90 90 and CALL e8 90 90 90 90, see ftr_x86_sled_target())
 * so a return address site+5 (a thread inside the trampoline) stays valid in both states, and a
 * thread parked strictly inside (site, site+5) is moved to site+5 before it resumes
 * (ftr_site_fixup_ip()).
 */
#ifndef FTR_PATCHER_H
#define FTR_PATCHER_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* ---- site shapes ---- */
#define FTR_SITE_SHAPES(X)                                                                         \
    X(FTR_SHAPE_NONE, 0, "none")                                                                   \
    X(FTR_SHAPE_FENTRY_GOT, 1, "call *__fentry__@GOTPCREL(%rip)") /* ff 15 d32, 6 bytes */         \
    X(FTR_SHAPE_FENTRY_REL, 2, "call __fentry__") /* e8 r32 (5) or ld-relaxed 67 e8 r32 (6) */     \
    X(FTR_SHAPE_MCOUNT_GOT, 3, "call *mcount@GOTPCREL(%rip)") /* after the prologue */             \
    X(FTR_SHAPE_MCOUNT_REL, 4, "call mcount")                                                      \
    X(FTR_SHAPE_NOP5, 5, "5-byte nop")          /* 0f 1f 44 00 xx: -mnop-mcount, clang, our NOP */ \
    X(FTR_SHAPE_NOPS, 6, "1-byte nops")         /* -fpatchable-function-entry=5: 5 x 90 */         \
    X(FTR_SHAPE_CALL_OURS, 7, "call to a stub") /* our CALL state: e8 into [stub_lo, stub_hi) */

#define FTR_X_ENUM(name, val, str) name = val,
enum ftr_site_shape { FTR_SITE_SHAPES(FTR_X_ENUM) };
#undef FTR_X_ENUM
const char *ftr_site_shape_name(unsigned shape);

/* Does the site's hook run before the prologue (the function's return address is at the top of
 * the stack when the hook runs) or after it (mcount: the return address is at 8(%rbp))?
 * This is what the call shapes mean; a site's own answer is ftr_site.mcount, which is decided
 * by its position and also covers nop sites. */
static inline int ftr_shape_is_mcount(unsigned shape)
{
    return shape == FTR_SHAPE_MCOUNT_GOT || shape == FTR_SHAPE_MCOUNT_REL;
}

#define FTR_SITE_LEN_MAX 6

enum ftr_site_state {
    FTR_SITE_ORIGINAL = 0, /* the compiler's bytes */
    FTR_SITE_NOP = 1,      /* NOP state */
    FTR_SITE_CALL = 2,     /* CALL state */
    FTR_SITE_BROKEN = 3,   /* its bytes were not what we expected: left alone for good */
};

struct ftr_site {
    uint64_t addr;    /* runtime address of the site's first byte (after any endbr64) */
    uint64_t func;    /* runtime address of the function's first byte */
    const char *name; /* function name (raw symbol), owned by the module's string storage */
    uint32_t index;   /* process-wide index, assigned by the caller (>= 1) */
    uint8_t len;      /* 5 or 6 */
    uint8_t shape;    /* enum ftr_site_shape of the original bytes */
    uint8_t mcount;   /* 1 when the site follows the frame-pointer prologue (push %rbp; mov
                         %rsp,%rbp and more); 0 at the function start (after any endbr64) */
    uint8_t patched;  /* enum ftr_site_state (maintained by the caller) */
    uint8_t orig[FTR_SITE_LEN_MAX];
    uint8_t chain;   /* 1 when the site is wrapped in push %r10 / pop %r10 at the function's
                        start (gcc's nested functions keep their static chain so): the
                        function's return address is at 8(%rsp) when the site's call runs, one
                        word above where a plain entry site has it (mcount is then 0) */
    uint8_t through; /* 1 when the caller calls its function through (its CALL state is then a
                        jmp to the stub; maintained by the caller) */
    uint8_t libcall; /* 1: not a site in text but a library call, a GOT slot
                        (preload/runtime/libcalls.c): addr is the slot, func the function it calls,
                        name its symbol */
};

/* ---- x86_64_insn.c: decide and generate (pure) ---- */

/* What a call at a site may legitimately reach: the GOT slots and PLT/direct targets that mean
 * "__fentry__" or "mcount" in this module. A zero entry is unused. */
struct ftr_hook_targets {
    uint64_t fentry_got, mcount_got;     /* addresses of GOT slots (ff 15 disp32 form) */
    uint64_t fentry_call, mcount_call;   /* direct call targets (e8 rel32 form: PLT stub or
                                            the function itself) */
    uint64_t fentry_call2, mcount_call2; /* second accepted target (e.g. the PLT stub and the
                                            symbol's own definition) */
    /* e8 into [stub_lo, stub_hi) is our CALL state (FTR_SHAPE_CALL_OURS); empty: not used */
    uint64_t stub_lo, stub_hi;
    /* Fallback when the module imports exactly one of __fentry__ / mcount through a PLT whose
     * stubs could not be decoded: an e8 into [plt_lo, plt_hi) is taken as plt_shape
     * (FTR_SHAPE_FENTRY_REL or FTR_SHAPE_MCOUNT_REL); 0 = no fallback. */
    uint64_t plt_lo, plt_hi;
    uint8_t plt_shape;
};

/*! ftr_x86_classify() : recognises the site whose first byte is code[0], at runtime address
 *  addr, with avail readable bytes. Accepts the shapes of FTR_SITE_SHAPES; calls must reach one
 *  of t's targets (a NULL t accepts any target, for unit tests of the decoder alone).
 *  @return the shape (FTR_SHAPE_NONE when not a site) and sets *len. */
unsigned ftr_x86_classify(const uint8_t *code, size_t avail, uint64_t addr,
                          const struct ftr_hook_targets *t, uint8_t *len);

/*! ftr_x86_find_site() : in a function starting at code[0] (runtime address func), skips an
 *  optional endbr64 and a known frame-pointer prologue and returns the offset of an mcount call
 *  (or of a __fentry__ call at the very start, or right after the push %r10 of gcc's nested
 *  functions: ftr_x86_chain_site()), or -1. *shape and *len describe it.
 *  Our CALL state is found at both places. Nops are not sites here (only the compiler's lists
 *  can say a nop is one). With a NULL t, a call at the start is FENTRY_*, after the prologue
 *  MCOUNT_*. The prologue is walked instruction by instruction (calls, jumps other than
 *  backward Jcc, and unknown instructions end the walk); a DRAP realignment before push %rbp
 *  is not accepted (8(%rbp) would only be a copy of the return address). */
int ftr_x86_find_site(const uint8_t *code, size_t avail, uint64_t func,
                      const struct ftr_hook_targets *t, unsigned *shape, uint8_t *len);

/*! ftr_x86_prologue_reaches() : @return 1 when walking the frame-pointer prologue of the
 *  function at code[0] (as ftr_x86_find_site() does) lands exactly on offset off, past
 *  push %rbp; mov %rsp,%rbp. Checks a site listed by the compiler (a nop after -mnop-mcount
 *  without -mfentry, an mcount call) before it is treated as an mcount-position site. */
int ftr_x86_prologue_reaches(const uint8_t *code, size_t avail, size_t off);

/*! ftr_x86_chain_site() : @return 1 when the site of len bytes at offset off of the function
 *  starting at code[0] is gcc's nested-function entry: [endbr64] push %r10 (41 52), the site,
 *  pop %r10 (41 5a) right after it. (gcc keeps the static chain around a call to __fentry__
 *  that way; after the prologue, around an mcount call, the push needs nothing of us.) */
int ftr_x86_chain_site(const uint8_t *code, size_t avail, size_t off, unsigned len);

/* ---- x86_64_gen.c: generate (pure) ---- */

/*! ftr_x86_gen_nop() / ftr_x86_gen_call() / ftr_x86_gen_jmp() : the NOP, CALL and JMP states of
 *  a site of len 5 or 6 bytes (see above). gen_call/gen_jmp @return 0, or -1 when target is out
 *  of rel32 reach or len is not 5..6. */
void ftr_x86_gen_nop(uint8_t *out, unsigned len);
int ftr_x86_gen_call(uint8_t *out, unsigned len, uint64_t site, uint64_t target);
int ftr_x86_gen_jmp(uint8_t *out, unsigned len, uint64_t site, uint64_t target);

/* Per-site stub: leaves the site index in the red zone, at FTR_STUB_INDEX_DISP(%rsp), and
 * jumps to the common trampoline through an absolute address kept in the stub page:
 *     c7 44 24 80 <imm32 index>    movl $index, -128(%rsp)
 *     ff 25 <rel32>                jmp *slot(%rip)
 *     cc ... (padding to FTR_STUB_SIZE)
 * No register is taken: a caller may keep a value in any register across a call to a function
 * with another convention than System V's (no_caller_saved_registers keeps r11 too), and the
 * untraced NOP builds keep them all. At a site, the 128 bytes below rsp are nobody's: the
 * function has not started (or made a call, at an mcount site), and no signal frame is ever
 * put there (the kernel skips the red zone), so the word stays until the trampoline, which
 * reads it before its first call. Nothing is pushed, so the trampoline's frame is an ordinary
 * frame-pointer frame and the stub's own unwind rule is that of a function's first byte. */
#define FTR_STUB_INDEX_DISP (-128)
#define FTR_STUB_SIZE 16
/*! ftr_x86_gen_stub() : writes a stub at out (runtime address at) for index, jumping through
 *  the 8-byte slot at runtime address slot. @return 0, or -1 when slot is out of reach. */
int ftr_x86_gen_stub(uint8_t *out, uint64_t at, uint32_t index, uint64_t slot);

/* -fpatchable-function-entry's five 1-byte NOPs: a thread may be stopped between any two of
 * them, in any context (a signal handler interrupted it there), where no handshake can see
 * it. So such a site is never given a tail of our own: its NOP state stays 90 90 90 90 90 and
 * its CALL state is e8 90 90 90 90, a call whose rel32 is itself four NOPs. Only the first
 * byte ever changes, and a thread resuming at site+1..+4 runs NOPs in both states. The call
 * lands at site + 5 + (int32)0x90909090 (1.74 GiB below), where the module's "sled mirror"
 * holds a jmp to the site's stub. */
#define FTR_SLED_REL32 0x90909090u
static inline uint64_t ftr_x86_sled_target(uint64_t site)
{
    return site + 5 + (uint64_t)(int64_t)(int32_t)FTR_SLED_REL32;
}

/* What a thread that traps on the int3 of a site being rewritten does instead of running it:
 * exactly what the bytes being written would do. */
enum ftr_emu_kind {
    FTR_EMU_SKIP = 0, /* a NOP: go on at next */
    FTR_EMU_CALL = 1, /* push next, go to target */
    FTR_EMU_JMP = 2,  /* go to target */
};
struct ftr_emu {
    uint64_t addr;   /* the site */
    uint64_t next;   /* addr + len: the end of the site in every state */
    uint64_t target; /* CALL/JMP destination (next for SKIP) */
    uint32_t kind;   /* enum ftr_emu_kind */
    uint32_t pad;
};
/*! ftr_x86_emulation() : how to emulate the site state bytes[0..len) at addr (a NOP, CALL or
 *  JMP state as generated above, or 5 x 90). @return 0, or -1 when bytes are none of those. */
int ftr_x86_emulation(const uint8_t *bytes, unsigned len, uint64_t addr, struct ftr_emu *out);

/*! ftr_site_fixup_ip() : a thread stopped at ip: if ip lies strictly inside the first five bytes
 *  of the site, @return site+5 (the boundary that every state keeps), else ip. */
static inline uint64_t ftr_site_fixup_ip(const struct ftr_site *s, uint64_t ip)
{
    return (ip > s->addr && ip < s->addr + 5) ? s->addr + 5 : ip;
}

/* ---- elf_sites.c: the sites of one loaded module ---- */
#define FTR_SKIPPED_NAMES 4
struct ftr_module {
    char *path;
    uint64_t base;   /* load bias */
    uint64_t lo, hi; /* runtime range [lo, hi) of its PT_LOAD segments */
    uint8_t build_id[64];
    uint32_t build_id_len;
    struct ftr_site *sites; /* sorted by addr */
    size_t nsites;
    /* candidate sites that were refused: listed entries whose bytes are not a known shape or
     * whose position could not be verified; in "symbols" mode, functions that reach a hook
     * call early but whose prologue could not be walked (e.g. DRAP realignment) */
    size_t skipped;
    /* the names of the first FTR_SKIPPED_NAMES of them ("0x<offset>" when nameless), one after
     * the other, each NUL-terminated; nskipped_names of them */
    char *skipped_names;
    unsigned nskipped_names;
    char *names; /* storage for site names */
    /* "__mcount_loc", "__patchable_function_entries" or "symbols" (when both lists are present:
     * "__mcount_loc", and the sites of both are kept) */
    const char *method;
    /* what calls to __fentry__ / mcount look like in this module (stub range left empty) */
    struct ftr_hook_targets targets;
};

/*! ftr_module_scan() : finds the sites of the module loaded from path at bias base whose
 *  program headers are phdr/phnum (ElfW(Phdr) as from dl_iterate_phdr; NULL: read them from
 *  the file). Reads the ELF file for sections and symbols, and live memory (the module is
 *  mapped) for the site bytes and the compiler's lists (relocated by ld.so).
 *  Sites come from __mcount_loc / __patchable_function_entries when present, else from the
 *  function starts of the symbol table (.symtab, else .dynsym) and of .eh_frame_hdr.
 *  A site without a symbol is named "0x<hex offset of its function from base>".
 *  @return 0 (m filled; nsites may be 0) or -1 with a one-line message in err. */
int ftr_module_scan(const char *path, uint64_t base, const void *phdr, unsigned phnum,
                    struct ftr_module *m, char *err, size_t errlen);
void ftr_module_free(struct ftr_module *m);

/* ---- elf_got.c: the GOT slots through which a module calls other modules' functions ---- */
struct ftr_gotcall {
    uint64_t slot;       /* file virtual address of the GOT slot (add the load bias) */
    const char *name;    /* the symbol, undefined in the module */
    const char *version; /* the version it requires ("GLIBC_2.2.5"), or NULL */
    uint8_t glob_dat;    /* R_X86_64_GLOB_DAT of a function (-fno-plt calls, or an address
                            taken); 0: R_X86_64_JUMP_SLOT (PLT calls) */
};
struct ftr_gotcalls {
    struct ftr_gotcall *v; /* sorted by slot */
    size_t n;
    char *strs; /* storage of the names */
};
/*! ftr_elf_gotcalls() : the call slots of the module elf (its relocation sections against
 *  .dynsym). @return 0 (out filled, n may be 0) or -1 with a one-line message in err. */
struct Elf;
int ftr_elf_gotcalls(struct Elf *elf, struct ftr_gotcalls *out, char *err, size_t errlen);
void ftr_gotcalls_free(struct ftr_gotcalls *g);

/* ---- x86_64_got.c ---- */
/*! ftr_x86_got_reads() : marks in read[k] each GOT slot slots[k] (runtime addresses, sorted,
 *  n of them) that the code text[0, len) (at runtime address text_addr) may read other than by
 *  `call *slot(%rip)` / `jmp *slot(%rip)`: an address the program takes, which must not be
 *  changed. @return how many were newly marked. */
size_t ftr_x86_got_reads(const uint8_t *text, size_t len, uint64_t text_addr, const uint64_t *slots,
                         size_t n, uint8_t *read);

/* ---- dwarf_args.c: functions whose arguments all travel in registers ---- */
struct Elf; /* libelf's Elf */

/*! ftr_dwarf_regargs() : the entry addresses (DW_AT_low_pc: file virtual addresses, not
 *  relocated) of the functions of elf (an x86-64 ET_EXEC / ET_DYN, or its separate debug file)
 *  that take no argument on the stack under the System V ABI, so that they may be called with
 *  a stack lower than their caller built. Sorted ascending, unique, in a malloc'ed *addrs
 *  (NULL when the count is 0 or -1; free() it).
 *  Conservative (listed wrongly breaks a program, left out wrongly costs speed). Listed: a
 *  concrete DW_TAG_subprogram with a DW_AT_low_pc, in a compile unit of C or C++, prototyped
 *  (or C++), not variadic, of the normal calling convention, whose formal parameters (its own
 *  and those of its abstract origins / specifications: the larger count) take at most 6
 *  INTEGER and 8 SSE registers, counting
 *    - pointers, references, enums, integers of up to 8 bytes: 1 INTEGER; __int128 and
 *      pointers to members: 2 INTEGER (a pointer to member function is 16 bytes);
 *    - float, double, complex float: 1 SSE; complex double: 2 SSE;
 *    - an aggregate of up to 16 bytes: 2 INTEGER and 2 SSE, unless a member is unaligned
 *      (packed) or of an x87 type (long double), which the ABI passes in memory;
 *    - a returned aggregate, long double or unknown type: 1 INTEGER (the hidden pointer);
 *  and anything else (long double, _Float128, vectors, arrays, larger aggregates, types in
 *  type units, unknown types) as not in registers. Not listed either:
 *    - from another producer than GCC (DW_AT_producer "GNU ..."): internal functions (no
 *      DW_AT_external) and functions with a parameter without a location. LLVM's argument
 *      promotion (-O3, LTO) passes the fields a pointer parameter points to instead, keeping
 *      the function's name and DWARF;
 *    - an address also described as not eligible (another copy, folded code), outside the
 *      executable sections, or with a name in elf's .symtab / .dynsym that
 *      ftr_dwarf_name_ok() refuses;
 *    - functions described by DW_AT_ranges (hot and cold parts) rather than DW_AT_low_pc.
 *  Not known from DWARF, so still the caller's: gcc's ms_abi functions (only clang marks them).
 *  Reads .debug_info (DWARF 2 to 5; type units and split-DWARF skeletons give nothing),
 *  .debug_abbrev, .debug_str, .debug_line_str, .debug_str_offsets and .debug_addr, and
 *  decompresses SHF_COMPRESSED and .zdebug sections in place (elf_compress). Malformed DWARF
 *  is never an error: a unit or function that cannot be read is left out.
 *  @return the count (0 when there is no DWARF), or -1 on allocation failure (err filled). */
long ftr_dwarf_regargs(struct Elf *elf, uint64_t **addrs, char *err, size_t errlen);

/*! ftr_dwarf_name_ok() : @return 0 when a function so named may not take the parameters its
 *  DWARF shows: a name with a '.' before any '@VERSION' (gcc's .isra / .constprop / .part
 *  clones, whose signature IPA changed while their DWARF shows the original; .cold parts;
 *  LLVM's .llvm.N) or a vector variant (_ZGV...). ftr_dwarf_regargs() applies it to elf's own
 *  symbol tables; a caller that names functions from elsewhere (another file's symbols) must
 *  apply it to every name of an entry address too. */
int ftr_dwarf_name_ok(const char *name);

/* ---- text_poke.c: rewrite sites ---- */
struct ftr_poke {
    uint64_t addr;
    uint8_t len;
    uint8_t expect[FTR_SITE_LEN_MAX]; /* bytes that must be there now */
    uint8_t bytes[FTR_SITE_LEN_MAX];  /* bytes to write */
};
/*! ftr_text_poke() : applies n pokes (any order) when NO other thread can execute the text
 *  meanwhile (the caller is the only thread, or every other one is parked inside the kernel or
 *  a handler that runs no patched code). Writes go through /proc/thread-self/mem, the pages
 *  keeping PROT_READ|PROT_EXEC; where the kernel refuses, pages are made RW (not X), written
 *  and made RX again. The caller's own signals are blocked meanwhile, so that none of its
 *  handlers can run a half-written site. Every write is read back. Pokes whose live bytes
 *  differ from expect (a missing page counts as differing), or whose len is not 1..6, are not
 *  written and are reported through bad[] (ascending index list, up to badcap) and the return
 *  value. @return the number of pokes refused, or -1 (errno). */
long ftr_text_poke(const struct ftr_poke *p, size_t n, size_t *bad, size_t badcap);

/* What one live batch did (ftr_text_poke_live) */
struct ftr_poke_stats {
    uint64_t ns;     /* time the batch took, from the first int3 to the last sync */
    uint64_t traps;  /* threads that met an int3 of this batch and were sent on */
    unsigned writes; /* pwrite()s of text */
    unsigned syncs;  /* membarrier(SYNC_CORE) calls */
};
/*! ftr_text_poke_live() : applies n pokes of 5 or 6 bytes, whose bytes are a state of
 *  ftr_x86_emulation(), while other threads may execute them, with the kernel's text_poke_bp
 *  protocol: int3 on the first byte of every site of the batch, serialise every core, the tail
 *  bytes, serialise, the first bytes, serialise. A thread that reaches a site meanwhile traps
 *  (ftr_bp_trap(), from the process's SIGTRAP handler) and is sent on as the new bytes would.
 *  A thread already inside a site's bytes (between the 1-byte NOPs of 5 x 90) is NOT covered:
 *  the caller parks those first (stw.c). Needs ftr_bp_init() and /proc/thread-self/mem (no
 *  mprotect fallback: a page that is not executable would fault every thread running it).
 *  No allocation but mmap; async-signal-safe apart from that. Pokes are verified as by
 *  ftr_text_poke(). @return the number refused, or -1 (errno: ENOSYS no membarrier SYNC_CORE,
 *  EPERM /proc writes refused, or the write's error). */
long ftr_text_poke_live(const struct ftr_poke *p, size_t n, size_t *bad, size_t badcap,
                        struct ftr_poke_stats *st);

/*! ftr_bp_init() : registers this process for membarrier(SYNC_CORE), which live batches need.
 *  Call once, early (registering is cheapest while the process has one thread).
 *  @return 0, or -1 (message in err): live batches then fail with ENOSYS. */
int ftr_bp_init(char *err, size_t errlen);
/*! ftr_bp_sync() : every thread of the process serialises its instruction stream before it runs
 *  user code again (membarrier SYNC_CORE, and cpuid here). @return 0 or -1 (not registered). */
int ftr_bp_sync(void);
/*! ftr_bp_trap() : to be called first by the process's SIGTRAP handler (SA_SIGINFO, SA_NODEFER).
 *  @return 1 when the trap was one of ours (the thread's context is changed to go on as the new
 *  instruction would, or to run the now finished site again), 0 when it is not ours: the caller
 *  hands it to the program's handler or its default action. Async-signal-safe. */
int ftr_bp_trap(const void *siginfo, void *ucontext);
/*! ftr_bp_traps() : traps handled so far (every batch, every thread). */
uint64_t ftr_bp_traps(void);

/* ---- stw.c: stop the world ---- */
/* Signal used to park threads: SIGRTMIN+7 by default (override: FTRACE_SIGNAL). Chosen because
 * programs rarely use real-time signals this high and glibc reserves only the first two. */
struct ftr_stw_stats {
    unsigned threads;   /* other threads parked */
    unsigned asleep;    /* threads left blocked in a system call instead (not signalled) */
    unsigned woke;      /* of those, threads that ran while the text was being written */
    unsigned moved_ips; /* threads moved out of a half-rewritten site */
    uint64_t ns;        /* time the world was stopped */
};
/* Called with every other thread parked. May inspect and change each parked thread's saved
 * instruction pointer through the ip_fixup callback registered below. */
typedef int (*ftr_stw_fn)(void *arg);
/* ip fixup: called in each parked thread after fn ran; returns the ip to resume at. */
typedef uint64_t (*ftr_stw_ip_fn)(void *arg, uint64_t ip);

/*! ftr_stw_init() : installs the handshake signal's handler, through install (NULL: the C
 *  library's sigaction(); the preload passes its signal guard's). @return 0 or -1 (err). */
int ftr_stw_init(int signo, int (*install)(int sig, const struct sigaction *sa), char *err,
                 size_t errlen);
/*! ftr_stw_ignore() : never signal this thread (e.g. the tracer's own writer, which blocks
 *  every signal and never runs patched code). */
void ftr_stw_ignore(int tid);
/*! ftr_stw_others() : @return the number of threads of this process that may run its code
 *  now: all but the caller, the ignored ones and zombies (-1 when /proc cannot be read). */
int ftr_stw_others(void);
/*! ftr_stw_others_listed() : the same from dfd, an open /proc/<pid>/task read again from its
 *  start (no other descriptor is opened: it works after a chroot(), and makes no descriptor
 *  that a program thread could close or dup2() onto meanwhile), leaving out the leader (a
 *  zombie once the main thread has ended) too; a thread that is ending is still counted.
 *  @return the number, or -1 when the list cannot be read whole. */
int ftr_stw_others_listed(int dfd, pid_t leader);
/*! ftr_stw_blocking_running() : @return a thread (not the caller, an ignored one or a zombie)
 *  that runs with sig blocked, not asleep in a system call; 0 when there is none. */
int ftr_stw_blocking_running(int sig);
/*! ftr_stw_forget_ignored() : in a fork child, the ignored threads are gone. */
void ftr_stw_forget_ignored(void);
/*! ftr_stw_run() : parks every other thread, runs fn(arg), makes every thread serialise its
 *  instruction stream, lets each parked thread fix its ip with ipfn, releases them.
 *  Threads that do not acknowledge within timeout_ms make the call give up before fn runs:
 *  @return fn's return value, or -1 (message in err) when the world could not be stopped. */
int ftr_stw_run(ftr_stw_fn fn, ftr_stw_ip_fn ipfn, void *arg, unsigned timeout_ms,
                struct ftr_stw_stats *st, char *err, size_t errlen);

/* ---- dwarf_params.c: where each parameter and the return value are, for --auto-args ---- */
#define FTR_DW_MAX_PARAMS 16 /* parameters described per function; more are dropped */

/* What a parameter (or return value) is. Typedefs and qualifiers (const, volatile, restrict,
 * _Atomic) are looked through. */
enum ftr_pclass {
    FTR_PC_NONE = 0, /* void return, or a type not described here (long double, _Float128,
                        _Float16, vectors, unknown): print "?" */
    FTR_PC_SINT,     /* signed integers (wchar_t, __int128 in two parts); pointers to data
                        members (an offset, -1 for null) */
    FTR_PC_UINT,     /* unsigned integers, char8/16/32_t */
    FTR_PC_BOOL,
    FTR_PC_CHAR,   /* char, signed char, unsigned char */
    FTR_PC_ENUM,   /* an enumeration: enum_id says which */
    FTR_PC_PTR,    /* pointers, C++ references, decltype(nullptr), and a C++ class passed by
                      invisible reference (its address) */
    FTR_PC_STR,    /* a pointer to a (qualified) FTR_PC_CHAR type */
    FTR_PC_FLOAT,  /* float (size 4), double (8) */
    FTR_PC_STRUCT, /* an aggregate by value (struct, class, union), _Complex float / double,
                      a pointer to member function: see parts */
};

/* Where it is at the function's first instruction (the caller put it there: System V) */
enum ftr_ploc {
    FTR_PL_NONE = 0, /* not known (print "?"): see ftr_dwarf_params() */
    FTR_PL_INT,      /* integer register #n of rdi rsi rdx rcx r8 r9 (0..5);
                        a return value: rax (0), rdx (1) */
    FTR_PL_SSE,      /* xmm#n (0..7); a return value: xmm0 (0), xmm1 (1) */
    FTR_PL_STACK     /* in memory at rsp + n at the entry: n = 8 is the first stack argument */
};

/* One eightbyte of a value that takes two (an aggregate of 9..16 bytes, __int128), or the one
 * of an aggregate of up to 8 bytes: where it is and how many of its bytes are the value's */
struct ftr_dw_part {
    uint8_t loc, n, size;
};

struct ftr_dw_param {
    char name[24];  /* truncated, NUL-terminated; "" if unnamed */
    uint8_t cls;    /* enum ftr_pclass */
    uint8_t size;   /* bytes: 1, 2, 4, 8, 16 (__int128, _Float128, long double), an aggregate's
                       size (0 when above 255) */
    uint8_t loc, n; /* enum ftr_ploc and its number: of the first part when there are parts */
    uint8_t nparts; /* an aggregate of up to 16 bytes classified INTEGER / SSE (in registers,
                       or on the stack for want of them), and __int128: its eightbytes (1 or
                       2), each in parts[]; else 0 */
    struct ftr_dw_part parts[2];
    uint32_t enum_id; /* FTR_PC_ENUM: index into the result's enums (else 0) */
};

/* An enumeration type, once per DIE (another compile unit's copy is another entry) */
struct ftr_dw_enum {
    const char *name; /* "" if anonymous */
    uint8_t size;     /* bytes */
    uint8_t sign;     /* of a signed underlying type: values are signed (else unsigned, as
                         int64_t bits) */
    uint32_t n;       /* enumerators (at most 4096 kept), in the order of the source */
    const int64_t *values;
    const char *const *names;
};

struct ftr_dw_func {
    uint64_t addr;    /* DW_AT_low_pc: a file virtual address (as ftr_dwarf_regargs() gives) */
    const char *name; /* DW_AT_linkage_name when there is one, else DW_AT_name ("" if none) */
    uint8_t nparams;  /* described in params[] (at most FTR_DW_MAX_PARAMS) */
    uint8_t variadic; /* ... follows them (DW_TAG_unspecified_parameters) */
    uint8_t has_this; /* params[0] is C++ `this` (artificial) */
    const struct ftr_dw_param *params; /* nparams of them (in the result's storage) */
    struct ftr_dw_param ret;           /* cls FTR_PC_NONE, size 0 for void */
};

struct ftr_dw_params {
    size_t nfuncs;
    struct ftr_dw_func *funcs; /* sorted by addr, unique */
    size_t nenums;
    struct ftr_dw_enum *enums;
    /* storage of the above: ftr_dwarf_params_free() */
    struct ftr_dw_param *params_;
    char *strings_;
    int64_t *values_;
    const char **names_;
};

/*! ftr_dwarf_params() : a descriptor of each concrete, out-of-line function of elf (an x86-64
 *  ET_EXEC / ET_DYN, or its separate debug file) with a DW_AT_low_pc, in a compile unit of C or
 *  C++: its name, its parameters and return value, each with its class and where the x86-64
 *  System V ABI puts it at the entry, computed here from the types (names and types followed
 *  through DW_AT_abstract_origin / DW_AT_specification; the function's own parameter list):
 *    - integers, bool, char, enums, pointers, references: the next integer register;
 *      float, double: the next SSE register; __int128: two integer registers;
 *    - an aggregate of up to 16 bytes, classified eightbyte by eightbyte (INTEGER wins over
 *      SSE), in the registers of its classes when all of them are left, else on the stack;
 *      an aggregate with an unaligned member (packed) or larger than 16 bytes, long double and
 *      _Complex long double: on the stack (8-byte slots; 16-byte aligned types at 16);
 *    - C++ classes: DW_AT_calling_convention says by value or by invisible reference (clang);
 *      without it (gcc) a class with a virtual table or base, or with a user-provided copy or
 *      move constructor or destructor (not defaulted in the class, directly or in a base or a
 *      member) goes by reference; a deleted one: not known;
 *    - a return of INTEGER class in rax (rdx), SSE in xmm0 (xmm1); an aggregate returned in
 *      memory takes rdi before every parameter (`this` included) and is FTR_PL_NONE, and so
 *      are the x87 returns (st0);
 *    - a K&R (unprototyped) C function's float parameter arrives as a double (size 8).
 *  FTR_PL_NONE: a parameter whose type is not understood (a class known only by a declaration
 *  in the unit: clang describes a class where a constructor is emitted, gcc a dynamic one where
 *  its virtual table is), and every one after it (their places depend on it); a stack offset
 *  above 255; every parameter of a function whose parameter list disagrees with its abstract
 *  origin's or specification's (in the count of parameters not artificial); from another
 *  producer than GCC, every parameter of an internal function, and of another one, from its
 *  first parameter without a location on, those whose location at the entry is not the
 *  register computed (all of them when one is another); LLVM may drop or promote parameters
 *  (-O3, LTO), keeping the DWARF, and such a parameter has no location. Left out: functions of
 *  units of other languages, -g1 or -mabi=ms units, declarations, artificial subprograms
 *  (thunks), other calling conventions (DW_AT_calling_convention), functions described by
 *  DW_AT_ranges alone, addresses outside executable sections or at a symbol that
 *  ftr_dwarf_name_ok() refuses (clones), and addresses described twice differently.
 *  Not known from DWARF: gcc's ms_abi functions (their places are System V's here).
 *  Malformed DWARF is never an error: what cannot be read is left out or FTR_PL_NONE.
 *  Plain C, malloc/free only (the preload's constructor and dlopen).
 *  @return 0 with *out filled (empty without DWARF or for another kind of file; free it with
 *  ftr_dwarf_params_free()), or -1 with a one-line message in err (out of memory; *out empty). */
int ftr_dwarf_params(struct Elf *elf, struct ftr_dw_params *out, char *err, size_t errlen);
void ftr_dwarf_params_free(struct ftr_dw_params *p);

/*! ftr_dwarf_params_find() : @return the function whose addr is addr (binary search), or NULL */
const struct ftr_dw_func *ftr_dwarf_params_find(const struct ftr_dw_params *p, uint64_t addr);

#ifdef __cplusplus
}
#endif
#endif /* FTR_PATCHER_H */
