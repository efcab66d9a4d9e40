/*
 * ftr_patcher.h - find function-entry hook sites and rewrite them.
 *
 * The patcher knows instructions, ELF files and live text; it knows nothing of trace records.
 * Its parts, one concern each:
 *   x86_64_insn.c  decide and generate: recognise site shapes in byte buffers, build the bytes of
 *                  a call / NOP / per-site stub. Pure functions, unit-tested on plain buffers.
 *   elf_sites.c    find the sites of one loaded module: __mcount_loc, __patchable_function_entries,
 *                  else the symbol table; name each site's function; read the build-id.
 *   text_poke.c    the only code that writes live text: verify, mprotect RW, write, read back,
 *                  restore RX (never writable and executable at once).
 *   stw.c          stop-the-world: park every other thread of the process in a signal handler,
 *                  run a callback, serialise every core, release.
 *
 * Life of a site: ORIGINAL bytes (whatever the compiler emitted) -> NOP state or CALL state,
 * and back and forth between those two. Both states keep an instruction boundary at +5:
 *   NOP  state: 0f 1f 44 00 00        [90 when the site is 6 bytes long]
 *   CALL state: e8 <rel32 to stub>    [90 when the site is 6 bytes long]
 * so a return address site+5 (a thread inside the trampoline) stays valid in both states, and a
 * thread parked strictly inside (site, site+5) is moved to site+5 before it resumes
 * (ftr_site_fixup_ip()).
 */
#ifndef FTR_PATCHER_H
#define FTR_PATCHER_H

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
 *  (or of a __fentry__ call at the very start), or -1. *shape and *len describe it.
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

/*! ftr_x86_gen_nop() / ftr_x86_gen_call() : the NOP and CALL states of a site of len 5 or 6
 *  bytes (see above). gen_call @return 0, or -1 when target is out of rel32 reach. */
void ftr_x86_gen_nop(uint8_t *out, unsigned len);
int ftr_x86_gen_call(uint8_t *out, unsigned len, uint64_t site, uint64_t target);

/* Per-site stub: pushes the site index and jumps to the common trampoline through an absolute
 * address kept in the stub page:
 *     68 <imm32 index>          push $index
 *     ff 25 <rel32>             jmp *slot(%rip)
 *     cc ... (padding to FTR_STUB_SIZE)                                                        */
#define FTR_STUB_SIZE 16
/*! ftr_x86_gen_stub() : writes a stub at out (runtime address at) for index, jumping through
 *  the 8-byte slot at runtime address slot. @return 0, or -1 when slot is out of reach. */
int ftr_x86_gen_stub(uint8_t *out, uint64_t at, uint32_t index, uint64_t slot);

/*! ftr_site_fixup_ip() : a thread stopped at ip: if ip lies strictly inside the first five bytes
 *  of the site, @return site+5 (the boundary that every state keeps), else ip. */
static inline uint64_t ftr_site_fixup_ip(const struct ftr_site *s, uint64_t ip)
{
    return (ip > s->addr && ip < s->addr + 5) ? s->addr + 5 : ip;
}

/* ---- elf_sites.c: the sites of one loaded module ---- */
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

/* ---- text_poke.c: the only writer of live text ---- */
struct ftr_poke {
    uint64_t addr;
    uint8_t len;
    uint8_t expect[FTR_SITE_LEN_MAX]; /* bytes that must be there now */
    uint8_t bytes[FTR_SITE_LEN_MAX];  /* bytes to write */
};
/*! ftr_text_poke() : applies n pokes, in any order (runs in ascending address order are
 *  written together). Writes go through /proc/self/mem, the pages keeping PROT_READ|PROT_EXEC;
 *  where the kernel refuses, pages are made RW (not X), written and made RX again. Every write
 *  is read back. Pokes whose live bytes differ from expect (or whose len is not 1..6) are not
 *  written and are reported through bad[] (index list, up to badcap) and the return value.
 *  @return the number of pokes refused for mismatching bytes, or -1 (errno). */
long ftr_text_poke(const struct ftr_poke *p, size_t n, size_t *bad, size_t badcap);

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

/*! ftr_stw_init() : installs the handshake signal handler. @return 0 or -1 (message in err). */
int ftr_stw_init(int signo, char *err, size_t errlen);
/*! ftr_stw_ignore() : never signal this thread (e.g. the tracer's own writer, which blocks
 *  every signal and never runs patched code). */
void ftr_stw_ignore(int tid);
/*! ftr_stw_forget_ignored() : in a fork child, the ignored threads are gone. */
void ftr_stw_forget_ignored(void);
/*! ftr_stw_on_request() : signals of the handshake's number queued (sigqueue) with a negative
 *  value are requests from outside (ftrace-ctl): fn(value) runs in the signal handler, so it
 *  must be async-signal-safe. */
void ftr_stw_on_request(void (*fn)(int value));
/*! ftr_stw_run() : parks every other thread, runs fn(arg), makes every thread serialise its
 *  instruction stream, lets each parked thread fix its ip with ipfn, releases them.
 *  Threads that do not acknowledge within timeout_ms make the call give up before fn runs:
 *  @return fn's return value, or -1 (message in err) when the world could not be stopped. */
int ftr_stw_run(ftr_stw_fn fn, ftr_stw_ip_fn ipfn, void *arg, unsigned timeout_ms,
                struct ftr_stw_stats *st, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif
#endif /* FTR_PATCHER_H */
