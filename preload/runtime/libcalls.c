/*
 * libcalls.c - library calls: a traced module's calls of other modules' functions, hooked in
 * its GOT (libcalls.h; docs/design.md, "Library calls").
 *
 * The slots come from the module's file (patcher/elf_got.c): PLT calls (JUMP_SLOT) and -fno-plt
 * ones (GLOB_DAT of a function whose slot the text only calls through: patcher/x86_64_got.c).
 * Each hooked slot gets a site index, like a function, and a stub (`movl $index, -128(%rsp);
 * jmp *ftr_tramp_libcall`): the trampoline records the entry, hooks the return address and goes
 * on to the function, whose address it reads from ftr_site_body[index]. A slot changes with
 * one aligned 8-byte store (never seen torn: the only atomicity rule), so no thread is ever
 * stopped: a call that read the old value makes one more (or one less) untraced call.
 *
 * Where the slot goes: where ld.so bound it (BIND_NOW, GLOB_DAT, a lazy slot already
 * resolved), or for a lazy slot that still points into the module's own PLT, the definition
 * the loader's own lookup would give (dlvsym with the version the module requires, in the
 * global scope, then in the module's own tree). One that may not outlive the module (found in
 * an object loaded later than the start, outside the module's dependencies) or is not found is
 * left alone: the loader binds it when it is first called, untraced.
 *
 * Never hooked (excluded() below, each group with its reason): what looks at its return address
 * to find its caller (dlsym(RTLD_NEXT), dlopen's RUNPATH and $ORIGIN: through a stub the caller
 * would be our return hook), what must not gain a frame (setjmp & co return twice, vfork's child
 * returns on the parent's stack, the context switches and clone), what unwinds the stack from
 * its own frame (the C++ ABI's throws, _Unwind_*: unwind.c covers the program's frames), the
 * hooks' own entry points (mcount, __fentry__), the stack walkers (backtrace, libunwind: unwind.c
 * corrects them for the program's frames), the start of the program, and calls of a function in
 * a traced module (it has its own sites). Nor a sanitizer's runtime (libasan, liblsan, or linked
 * into the executable by clang), whether called or calling: its interceptors (malloc, free,
 * memcpy, printf...) record their caller's stack for their reports, reading return addresses,
 * and would name our return hook as the caller; and its own calls are its internals (locks,
 * thread registry, leak check).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <gelf.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "ftr_env.h"
#include "ftr_patcher.h"
#include "libcalls.h"
#include "tracer.h"

#define HEAD 16 /* the stub area's jump slot: ftr_tramp_libcall */

static int enabled = 1;
static uint64_t initial[512]; /* load biases of the objects loaded before main() */
static size_t ninitial;

static int note_initial(struct dl_phdr_info *info, size_t size, void *arg)
{
    (void)size, (void)arg;
    if (ninitial < sizeof initial / sizeof *initial) initial[ninitial++] = info->dlpi_addr;
    return 0;
}

int ftr_libcalls_init(void)
{
    const char *e = getenv(ftr_env_name(FTR_ENV_LIBCALL));
    enabled = !(e && (!strcmp(e, "0") || !strcmp(e, "off") || !strcmp(e, "no")));
    ninitial = 0;
    dl_iterate_phdr(note_initial, NULL);
    return enabled;
}

int ftr_libcalls_enabled(void)
{
    return enabled;
}

void ftr_libcalls_enable(int on)
{
    enabled = on;
}

/* Functions whose calls are never hooked, by group, each with its reason (docs/design.md,
 * "Library calls"). Everything else is traced as a leaf whose return is hooked: the rest of
 * the C++ ABI (__cxa_atexit, __cxa_guard_*, __cxa_begin_catch, whose wrapper in unwind.c
 * leaves its own hooked frame open, __cxa_end_catch, __cxa_allocate_exception,
 * __cxa_finalize, __cxa_thread_atexit...) and gprof's runtime (__monstartup, which gcrt1 calls
 * before main from the executable's _init, after our constructor - unless a library's _init,
 * run before it, calls the exported __gmon_start__ first; _mcleanup; moncontrol): none looks
 * at its return address or unwinds from its own frame, and a callback that throws through one
 * is walked as through any hooked frame (the pseudo-frame of tramp_x86_64.S). */
static int excluded(const char *n)
{
    static const char *const exact[] = {
        /* They return twice (or on another stack): the second return would find its hook
         * consumed by the first. setjmp & co and getcontext; the other ucontext functions;
         * vfork (the child returns on the parent's stack, then the parent); clone (the child
         * starts on a stack of its own); syscall (a raw clone or vfork) */
        "setjmp", "_setjmp", "__setjmp", "sigsetjmp", "__sigsetjmp", "savectx", "getcontext",
        "setcontext", "swapcontext", "makecontext", "vfork", "__vfork", "clone", "__clone",
        "clone3", "__clone3", "syscall",
        /* The start of the program: our wrapper calls main, the call never returns */
        "__libc_start_main", "__libc_start_call_main",
        /* The instrumentation's own entry points (our hooks; -finstrument-functions') */
        "mcount", "_mcount", "__fentry__", "__cyg_profile_func_enter", "__cyg_profile_func_exit",
        /* A library's every general-dynamic thread-local access: run-time support, not a call
         * of the program's */
        "__tls_get_addr",
        /* Start-up code's, called through a pointer it tests first (crti's _init, crtstuff):
         * that read of the slot keeps it unhooked anyway */
        "__gmon_start__", "_ITM_registerTMCloneTable", "_ITM_deregisterTMCloneTable",
        "__register_frame_info", "__deregister_frame_info",
        /* It never returns: it reports that the caller found its own frame overwritten, and
         * aborts */
        "__stack_chk_fail",
        /* Personality routines: the unwinder's, called for the frames it walks */
        "__gxx_personality_v0", "__gcc_personality_v0",
        /* The C++ ABI's throws: they never return; the exception unwinds from their frame
         * through the caller's, so their frame would end where the unwinding leaves it, not
         * at a return of theirs. uftrace leaves __cxa_throw and __cxa_rethrow out
         * too. A choice, not a need: the pseudo-frame would lead the walk through their hooked
         * return as through a traced library function that throws (std::__throw_out_of_range_fmt,
         * reported "unwound"). */
        "__cxa_throw", "__cxa_rethrow", "__cxa_call_unexpected", "__cxa_bad_cast",
        "__cxa_bad_typeid", "__cxa_throw_bad_array_new_length", "__cxa_rethrow_primary_exception",
        /* They look at their caller, which through a stub would be our return hook */
        "dlsym", "dlvsym", "dlopen", "dlmopen", "__libc_dlopen_mode", "__libc_dlsym"};
    static const char *const prefix[] = {
        /* The unwinder's entry points (_Unwind_RaiseException, _Unwind_Resume,
         * _Unwind_Backtrace...) start their walk at their caller's frame with their own return
         * address as its pc (libgcc's uw_init_context): hooked, that would be our trampoline */
        "_Unwind_",
        /* The loader's internals (_dl_find_object: libgcc's FDE lookup, mid-walk) */
        "_dl_",
        /* The sanitizers' entry points (their runtimes are never hooked: see below) and
         * compiler-rt's (profile, XRay) */
        "__asan", "__ubsan", "__tsan", "__msan", "__lsan", "__hwasan", "__sanitizer", "__llvm_",
        "__xray",
        /* Stack walkers, which read return addresses: the libunwind project's (_U..., unw_)
         * and backtrace(); unwind.c and unwind_libunwind.c correct their walks */
        "_U", "unw_", "backtrace"};
    for (size_t i = 0; i < sizeof exact / sizeof *exact; i++)
        if (!strcmp(n, exact[i])) return 1;
    for (size_t i = 0; i < sizeof prefix / sizeof *prefix; i++)
        if (!strncmp(n, prefix[i], strlen(prefix[i]))) return 1;
    return 0;
}

/* A sanitizer's runtime, or an object that carries one: every one exports this */
static int is_sanitizer_runtime(const struct link_map *lm)
{
    return lm && ftr_dynsym(lm, "__sanitizer_print_stack_trace");
}

/* The object at addr (NULL: none), its file name into *di */
static struct link_map *object_at(uint64_t addr, Dl_info *di)
{
    struct link_map *lm = NULL;
    if (!dladdr1((void *)(uintptr_t)addr, di, (void **)&lm, RTLD_DL_LINKMAP)) return NULL;
    return lm;
}

static int is_initial(const void *addr)
{
    Dl_info di;
    struct link_map *lm = NULL;
    if (!dladdr1(addr, &di, (void **)&lm, RTLD_DL_LINKMAP) || !lm) return 0;
    for (size_t i = 0; i < ninitial; i++)
        if (lm->l_addr == initial[i]) return 1;
    return 0;
}

static const void *object_of(const void *addr)
{
    Dl_info di;
    return dladdr(addr, &di) ? di.dli_fbase : NULL;
}

/* As the loader binds a reference to name (of version ver, or none) in handle's scope: the first
 * object that defines it, in that version or unversioned. dlvsym() alone would skip an
 * unversioned definition that comes first (an interposer: ours, a malloc preload). */
static void *lookup(void *handle, const char *name, const char *ver)
{
    void *any = dlsym(handle, name); /* the first default or unversioned definition */
    if (!ver) return any;
    void *exact = dlvsym(handle, name, ver);
    if (!any || any == exact || object_of(any) == object_of(exact)) return exact;
    Dl_info di;
    struct link_map *lm = NULL;
    if (!dladdr1(any, &di, (void **)&lm, RTLD_DL_LINKMAP) || !lm) return exact;
    int v = ftr_dynsym_version(lm, name);
    return v == -1 || v == 0 || v == 1 ? any : exact; /* unversioned: the loader takes it */
}

/* Where a lazy slot of m will go when the loader binds it (0: not known for sure) */
static uint64_t resolve(const struct ftr_module *m, int is_main, const char *name, const char *ver)
{
    void *t = lookup(RTLD_DEFAULT, name, ver);
    /* loaded at start: its scope is the global one */
    if (is_main || is_initial((void *)(uintptr_t)m->lo)) return (uintptr_t)t;
    /* dlopen()ed: the global scope, then its own tree (the real dlopen, not our wrapper) */
    static void *(*real_dlopen)(const char *, int);
    static int (*real_dlclose)(void *);
    if (!real_dlopen) real_dlopen = (void *(*)(const char *, int))dlsym(RTLD_NEXT, "dlopen");
    if (!real_dlclose) real_dlclose = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose");
    void *h = real_dlopen && real_dlclose ? real_dlopen(m->path, RTLD_LAZY | RTLD_NOLOAD) : NULL;
    if (!h) return 0;
    void *own = lookup(h, name, ver);
    real_dlclose(h);
    if (!t) return (uintptr_t)own; /* only in its local scope (RTLD_LOCAL) */
    if (t == own || is_initial(t)) return (uintptr_t)t;
    return 0;
}

/* The segments of the module, from its file: read-only-after-relocation pages, executable
 * ones (for the -fno-plt check) */
struct segs {
    uint64_t ro_lo, ro_hi;
    uint64_t x_lo[8], x_len[8];
    unsigned nx;
};

static void segments(Elf *elf, uint64_t base, struct segs *sg)
{
    size_t n = 0, page = (size_t)sysconf(_SC_PAGESIZE);
    memset(sg, 0, sizeof *sg);
    if (elf_getphdrnum(elf, &n) != 0) return;
    for (size_t i = 0; i < n; i++) {
        GElf_Phdr ph;
        if (!gelf_getphdr(elf, (int)i, &ph)) continue;
        if (ph.p_type == PT_GNU_RELRO) {
            sg->ro_lo = (base + ph.p_vaddr) & ~(uint64_t)(page - 1);
            sg->ro_hi = (base + ph.p_vaddr + ph.p_memsz) & ~(uint64_t)(page - 1);
        } else if (ph.p_type == PT_LOAD && (ph.p_flags & PF_X) && sg->nx < 8) {
            sg->x_lo[sg->nx] = base + ph.p_vaddr;
            sg->x_len[sg->nx++] = ph.p_filesz;
        }
    }
}

/* GLOB_DAT slots whose address the text takes: marked in bad[] (by index into g->v) */
static void glob_dat_reads(const struct ftr_gotcalls *g, uint64_t base, const struct segs *sg,
                           uint8_t *bad)
{
    size_t n = 0;
    for (size_t i = 0; i < g->n; i++)
        n += g->v[i].glob_dat;
    if (!n) return;
    uint64_t *slots = malloc(n * sizeof *slots);
    size_t *which = malloc(n * sizeof *which);
    uint8_t *read = calloc(n, 1);
    if (!slots || !which || !read) { /* cannot tell: none of them */
        for (size_t i = 0; i < g->n; i++)
            bad[i] |= g->v[i].glob_dat;
    } else {
        n = 0;
        for (size_t i = 0; i < g->n; i++) /* g->v is sorted by slot */
            if (g->v[i].glob_dat) which[n] = i, slots[n++] = base + g->v[i].slot;
        for (unsigned s = 0; s < sg->nx; s++)
            ftr_x86_got_reads((const uint8_t *)(uintptr_t)sg->x_lo[s], sg->x_len[s], sg->x_lo[s],
                              slots, n, read);
        for (size_t k = 0; k < n; k++)
            if (read[k]) bad[which[k]] = 1;
    }
    free(slots);
    free(which);
    free(read);
}

static uint64_t stub_at(const struct ftr_libcalls *lc, size_t i)
{
    return (uint64_t)(uintptr_t)lc->stubs + HEAD + i * FTR_STUB_SIZE;
}

/* The protections of the pages written in one ftr_libcalls_apply(), as /proc/self/maps said */
struct pages {
    uint64_t page[8];
    int prot[8];
    size_t n;
};

/* PROT_* of the mapping holding addr (-1: not known). A GOT page's protection is the program's
 * to choose: a hooking library makes it writable for good, and must find it so. */
static int page_prot(uint64_t addr)
{
    uintptr_t lo, hi;
    int prot = -1;
    return ftr_mapping_of((uintptr_t)addr, &lo, &hi, &prot) == 0 ? prot : -1;
}

/* Slot i set to value if it holds what the tracer left there: the stub, the function, or for
 * a slot never written, what it held when found (or what ld.so bound it to since). One
 * compare-and-swap, the page made writable for it only when it is not, and put back as it was.
 * @return 0: stored, 1: the program's (changed by it: left alone), -1: cannot be written */
static int store_slot(const struct ftr_libcalls *lc, size_t i, uint64_t value, struct pages *pg)
{
    const struct ftr_site *s = &lc->v[i];
    uint64_t *slot = (uint64_t *)(uintptr_t)s->addr;
    uint64_t was = s->patched == FTR_SITE_CALL ? stub_at(lc, i) : s->func;
    uint64_t cur = __atomic_load_n(slot, __ATOMIC_RELAXED);
    if (cur != was && !(s->patched == FTR_SITE_ORIGINAL && cur == lc->found[i])) return 1;
    size_t size = (size_t)sysconf(_SC_PAGESIZE);
    uint64_t page = s->addr & ~(uint64_t)(size - 1);
    size_t k = 0;
    while (k < pg->n && pg->page[k] != page)
        k++;
    if (k == pg->n) {
        int prot = page_prot(s->addr);
        if (prot < 0) /* as ld.so left it */
            prot = s->addr >= lc->ro_lo && s->addr < lc->ro_hi ? PROT_READ : PROT_READ | PROT_WRITE;
        if (k == sizeof pg->page / sizeof *pg->page)
            k = 0; /* forget the first */
        else
            pg->n++;
        pg->page[k] = page, pg->prot[k] = prot;
    }
    int prot = pg->prot[k];
    void *at = (void *)(uintptr_t)page;
    if (!(prot & PROT_WRITE) && mprotect(at, size, prot | PROT_WRITE) < 0) return -1;
    int stored =
        __atomic_compare_exchange_n(slot, &cur, value, 0, __ATOMIC_RELEASE, __ATOMIC_RELAXED);
    if (!(prot & PROT_WRITE)) mprotect(at, size, prot);
    return stored ? 0 : 1;
}

static int build_stubs(struct ftr_libcalls *lc)
{
    size_t page = (size_t)sysconf(_SC_PAGESIZE);
    size_t len = (HEAD + lc->n * FTR_STUB_SIZE + page - 1) & ~(page - 1);
    uint8_t *p = ftr_mmap_zero(len);
    if (!p) return -1;
    uint64_t tramp = (uint64_t)(uintptr_t)ftr_tramp_libcall;
    memcpy(p, &tramp, sizeof tramp);
    lc->stubs = p;
    lc->stubs_len = len;
    for (size_t i = 0; i < lc->n; i++)
        if (ftr_x86_gen_stub(p + HEAD + i * FTR_STUB_SIZE, stub_at(lc, i), lc->v[i].index,
                             (uint64_t)(uintptr_t)p) < 0)
            return -1;
    if (mprotect(p, len, PROT_READ | PROT_EXEC) < 0) return -1;
    ftr_unwind_code_add(p, len);
    return 0;
}

size_t ftr_libcalls_scan(const struct ftr_module *m, int is_main, uint32_t *next_site,
                         int (*traced_at)(uint64_t), struct ftr_libcalls *out)
{
    memset(out, 0, sizeof *out);
    Dl_info di;
    if (!m->path || is_sanitizer_runtime(object_at(m->lo, &di))) return 0;
    out->module = m->path;
    int fd = open(m->path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return 0;
    Elf *elf = elf_version(EV_CURRENT) != EV_NONE ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
    struct ftr_gotcalls g = {0};
    struct segs sg;
    char err[200];
    int ok =
        elf && ftr_module_same_build(elf, m) && ftr_elf_gotcalls(elf, &g, err, sizeof err) == 0;
    if (ok) segments(elf, m->base, &sg);
    if (elf) elf_end(elf);
    close(fd);
    if (!ok || !g.n) {
        ftr_gotcalls_free(&g);
        return 0;
    }
    uint8_t *bad = calloc(g.n, 1);
    out->v = calloc(g.n, sizeof *out->v);
    out->lib = calloc(g.n, sizeof *out->lib);
    out->found = calloc(g.n, sizeof *out->found);
    if (!bad || !out->v || !out->lib || !out->found) goto fail;
    glob_dat_reads(&g, m->base, &sg, bad);
    out->ro_lo = sg.ro_lo, out->ro_hi = sg.ro_hi;
    for (size_t i = 0; i < g.n; i++) {
        const struct ftr_gotcall *c = &g.v[i];
        uint64_t slot = m->base + c->slot;
        if (bad[i] || excluded(c->name) || slot < m->lo || slot + 8 > m->hi) continue;
        if (i && g.v[i - 1].slot == c->slot) continue; /* two relocations, one slot */
        uint64_t cur = *(volatile uint64_t *)(uintptr_t)slot, to = cur;
        if (!cur) continue;              /* an undefined weak function */
        if (cur >= m->lo && cur < m->hi) /* still into the PLT: bound when first called */
            to = c->glob_dat ? 0 : resolve(m, is_main, c->name, c->version);
        if (!to || (to >= m->lo && to < m->hi) || traced_at(to)) continue;
        struct link_map *lm = object_at(to, &di); /* one lookup: the runtime test, the name */
        if (!lm || is_sanitizer_runtime(lm) || !di.dli_fname) continue;
        char *lib = strdup(di.dli_fname[0] ? di.dli_fname : m->path);
        if (!lib) goto fail;
        struct ftr_site *s = &out->v[out->n];
        *s = (struct ftr_site){.addr = slot, .func = to, .name = c->name, .libcall = 1};
        s->patched = FTR_SITE_ORIGINAL;
        s->index = *next_site;
        if (!ftr_site_body_set(s->index, (uintptr_t)to)) {
            free(lib);
            continue;
        }
        (*next_site)++;
        out->found[out->n] = cur;
        out->lib[out->n++] = lib;
    }
    free(bad);
    bad = NULL;
    out->names = g.strs; /* the sites' names point into it */
    g.strs = NULL;
    ftr_gotcalls_free(&g);
    if (out->n && build_stubs(out) < 0) {
        ftr_msg("%s: no memory for the stubs of its library calls; they are not traced", m->path);
        ftr_libcalls_free(out, 1);
        return 0;
    }
    return out->n;
fail:
    free(bad);
    ftr_gotcalls_free(&g);
    ftr_libcalls_free(out, 1);
    return 0;
}

void ftr_libcalls_apply(struct ftr_libcalls *lc)
{
    struct pages pg = {.n = 0};
    for (size_t i = 0; i < lc->n; i++) {
        struct ftr_site *s = &lc->v[i];
        unsigned w = enabled ? ftr_site_wanted(lc->lib[i], 0, s) : FTR_SITE_NOP;
        if (w != FTR_SITE_CALL) w = FTR_SITE_NOP;
        if (s->patched == w || (s->patched == FTR_SITE_ORIGINAL && w == FTR_SITE_NOP)) continue;
        int r = store_slot(lc, i, w == FTR_SITE_CALL ? stub_at(lc, i) : s->func, &pg);
        if (r < 0) {
            ftr_msg("%s: its GOT cannot be written; its library calls are not traced", lc->module);
            return;
        }
        if (r == 0) s->patched = (uint8_t)w; /* else the program's: as the tracer left it */
    }
}

size_t ftr_libcalls_traced(const struct ftr_libcalls *lc)
{
    size_t n = 0;
    for (size_t i = 0; i < lc->n; i++)
        n += lc->v[i].patched == FTR_SITE_CALL;
    return n;
}

void ftr_libcalls_free(struct ftr_libcalls *lc, int text_gone)
{
    if (lc->stubs && text_gone) {
        ftr_unwind_code_remove(lc->stubs);
        munmap(lc->stubs, lc->stubs_len);
    }
    for (size_t i = 0; lc->lib && i < lc->n; i++)
        free(lc->lib[i]);
    free(lc->lib);
    free(lc->found);
    free(lc->v);
    free(lc->names);
    memset(lc, 0, sizeof *lc);
}
