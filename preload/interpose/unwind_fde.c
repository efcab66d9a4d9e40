/*
 * unwind_fde.c - libgcc's unwinder walks through the code we generate.
 *
 * Stubs and the sled mirror (modules.c) are in memory no ELF object describes, so libgcc's
 * _Unwind_Find_FDE() finds nothing for them, and a walk started there (a signal handler's
 * backtrace(), asynchronous cancellation) ended at that frame. Registering an FDE
 * (__register_frame_info) would make every lookup of the process take libgcc's global mutex
 * (GCC 12), where it is lock-free without: a handler that unwinds while its thread is inside a
 * lookup would deadlock. Instead libgcc_s's own calls to _Unwind_Find_FDE() (through its PLT)
 * reach this definition first: an address in generated code gets the FDE of
 * unwind_fde_x86_64.S; any other goes on to the definition the calling object binds to.
 *
 * Everything here is async-signal-safe: the ranges are single words, published with release
 * stores, and the next definition is found without the loader's lock (_dl_find_object(),
 * ftr_dynsym()). A copy of libgcc linked into a module statically calls its own lookup; it still
 * stops at generated code, but reaches our _dl_find_object() (below).
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <link.h>
#include <stdatomic.h>
#include <stdint.h>

#include "tracer.h"

#define EXPORT __attribute__((visibility("default")))

/* libgcc's unwind-dw2-fde.h */
struct dwarf_eh_bases {
    void *tbase, *dbase, *func;
};
typedef const void *(*find_fde_fn)(void *, struct dwarf_eh_bases *);

extern const char ftr_generated_fde[] FTR_HIDDEN;

/* A range of generated code, page-granular, in one word: page number << 20 | pages (0: free). */
#define MAX_RANGES 1024
#define PAGES_BITS 20
static _Atomic uint64_t ranges[MAX_RANGES];
static _Atomic unsigned nranges; /* slots ever used */

static uint64_t pack(uintptr_t lo, size_t len)
{
    size_t pages = (len + 4095) >> 12;
    if (pages == 0 || pages >= ((size_t)1 << PAGES_BITS)) return 0;
    return (uint64_t)(lo >> 12) << PAGES_BITS | pages;
}

void ftr_unwind_code_add(const void *lo, size_t len)
{
    uint64_t w = pack((uintptr_t)lo, len);
    if (!w || ((uintptr_t)lo & 4095)) return;
    unsigned n = atomic_load_explicit(&nranges, memory_order_relaxed);
    for (unsigned i = 0; i < n; i++) { /* a freed slot first */
        uint64_t zero = 0;
        if (atomic_compare_exchange_strong(&ranges[i], &zero, w)) return;
    }
    if (n == MAX_RANGES) return; /* no unwind information for it: a walk stops there */
    atomic_store_explicit(&ranges[n], w, memory_order_release);
    atomic_store_explicit(&nranges, n + 1, memory_order_release);
}

void ftr_unwind_code_remove(const void *lo)
{
    unsigned n = atomic_load_explicit(&nranges, memory_order_acquire);
    for (unsigned i = 0; i < n; i++) {
        uint64_t w = atomic_load_explicit(&ranges[i], memory_order_relaxed);
        if (w && (w >> PAGES_BITS) == (uintptr_t)lo >> 12) atomic_store(&ranges[i], 0);
    }
}

static int generated(uintptr_t pc)
{
    uint64_t page = pc >> 12;
    unsigned n = atomic_load_explicit(&nranges, memory_order_acquire);
    for (unsigned i = 0; i < n; i++) {
        uint64_t w = atomic_load_explicit(&ranges[i], memory_order_acquire);
        uint64_t first = w >> PAGES_BITS, pages = w & (((uint64_t)1 << PAGES_BITS) - 1);
        if (page - first < pages) return 1;
    }
    return 0;
}

/* The next definition, as the calling object would have bound to without us: the first after
 * us in the global scope (dlsym RTLD_NEXT: a program's, a preloaded or a JIT library's own
 * definition comes before libgcc_s's, and forwards in turn). When there is none there (libgcc_s
 * loaded RTLD_LOCAL, as glibc's backtrace() does), the calling object's own: libgcc_s calls
 * its definition through its PLT. Never ours: the address of the exported name may be a
 * program's definition, so ours is compared through its hidden alias. */
static _Atomic(find_fde_fn) next_global;
static struct {
    uintptr_t lo, hi;
    _Atomic(find_fde_fn) fn; /* stored last: the entry is whole once it is set */
} callers[4];
static _Atomic unsigned nclaimed;

const void *ftr_find_fde(void *pc, struct dwarf_eh_bases *bases) FTR_HIDDEN;

#if __GLIBC_PREREQ(2, 35)
typedef int (*dlfo_fn)(void *, struct dl_find_object *);
static _Atomic(dlfo_fn) real_dlfo; /* the dynamic linker's */
#endif

static atomic_int resolved; /* ftr_unwind_fde_resolve() has run */

static find_fde_fn next_for(uintptr_t caller)
{
    find_fde_fn g = atomic_load_explicit(&next_global, memory_order_acquire);
    if (!g && !atomic_load_explicit(&resolved, memory_order_acquire)) {
        /* a walk before our constructor ran: ASan's runtime, loaded ahead of us, unwinds in its
         * own initialisation (ASAN_OPTIONS=fast_unwind_on_malloc=0); the process is starting,
         * single-threaded */
        ftr_unwind_fde_resolve();
        g = atomic_load_explicit(&next_global, memory_order_acquire);
    }
    if (g) return g;
    unsigned n = atomic_load_explicit(&nclaimed, memory_order_acquire);
    for (unsigned i = 0; i < n && i < 4; i++) {
        find_fde_fn fn = atomic_load_explicit(&callers[i].fn, memory_order_acquire);
        if (fn && caller - callers[i].lo < callers[i].hi - callers[i].lo) return fn;
    }
#if __GLIBC_PREREQ(2, 35)
    struct dl_find_object fo;
    dlfo_fn find = atomic_load_explicit(&real_dlfo, memory_order_acquire);
    if (find && !ftr_walk_ours(caller) && find((void *)caller, &fo) == 0) {
        find_fde_fn fn = (find_fde_fn)ftr_dynsym(fo.dlfo_link_map, "_Unwind_Find_FDE");
        if (fn && fn != ftr_find_fde) {
            unsigned slot = atomic_fetch_add(&nclaimed, 1);
            if (slot < 4) {
                callers[slot].lo = (uintptr_t)fo.dlfo_map_start;
                callers[slot].hi = (uintptr_t)fo.dlfo_map_end;
                atomic_store_explicit(&callers[slot].fn, fn, memory_order_release);
            }
            return fn;
        }
    }
#endif
    return NULL;
}

void ftr_unwind_fde_resolve(void)
{
    void *p = ftr_next_sym("_Unwind_Find_FDE"); /* libgcc_s may not be loaded */
    if (p && p != (void *)ftr_find_fde)
        atomic_store_explicit(&next_global, (find_fde_fn)p, memory_order_release);
#if __GLIBC_PREREQ(2, 35)
    if (!atomic_load(&real_dlfo)) {
        p = ftr_next_sym("_dl_find_object");
        if (p) atomic_store_explicit(&real_dlfo, (dlfo_fn)p, memory_order_release);
    }
#endif
    atomic_store_explicit(&resolved, 1, memory_order_release);
}

static int pseudo_frame(uintptr_t a)
{
    return (a >= (uintptr_t)ftr_tramp_hooked && a < (uintptr_t)ftr_tramp_return) ||
           a == (uintptr_t)ftr_tramp_sighooked;
}

/* A walk that calls no personality (_Unwind_Backtrace() of a libgcc we do not wrap: opened
 * RTLD_LOCAL by the program, or linked in statically) reads a hooked return address as
 * ftr_tramp_return, meets the pseudo-frame (tramp_x86_64.S), and reads the same slot again, at
 * the same CFA, forever. A walk through personalities looks the pseudo-frame up once per hooked
 * frame, then the caller's address (the personality put it back). That lookup may not reach us
 * (a JIT's own _Unwind_Find_FDE ahead of ours answers for its code), so lookups of the
 * pseudo-frame may come a few in a row; PSEUDO_RUN_MAX in a row on one thread end the walk. */
#define PSEUDO_RUN_MAX 16
static __thread unsigned fde_pseudo_run;

static int end_of_loop(unsigned *run, uintptr_t a)
{
    if (!pseudo_frame(a)) {
        *run = 0;
        return 0;
    }
    if (++*run < PSEUDO_RUN_MAX) return 0;
    *run = 0;
    return 1;
}

const void *ftr_find_fde(void *pc, struct dwarf_eh_bases *bases)
{
    uintptr_t a = (uintptr_t)pc;
    if (generated(a)) {
        fde_pseudo_run = 0;
        bases->tbase = bases->dbase = NULL;
        bases->func = pc; /* the rules hold from the code's first byte: any start at or below pc */
        return ftr_generated_fde;
    }
    if (end_of_loop(&fde_pseudo_run, a)) return NULL;
    find_fde_fn next = next_for((uintptr_t)__builtin_return_address(0));
    return next ? next(pc, bases) : NULL;
}

EXPORT extern __typeof__(ftr_find_fde) _Unwind_Find_FDE __attribute__((alias("ftr_find_fde")));

#if __GLIBC_PREREQ(2, 35)
/* A copy of libgcc linked in statically (GCC 12 and later) looks every FDE up through
 * _dl_find_object(), through its object's PLT, so it reaches this one: the same rule ends its
 * walks that call no personality at a hooked return (libgcc_s's lookups come here too, after
 * ours; each layer counts its own). Everything else goes to the dynamic
 * linker's, looked up in the constructor (or here, for a lookup before it: the process is
 * starting, single-threaded). */
static __thread unsigned dlfo_pseudo_run;

int ftr_dl_find_object(void *pc, struct dl_find_object *result) FTR_HIDDEN;
int ftr_dl_find_object(void *pc, struct dl_find_object *result)
{
    if (end_of_loop(&dlfo_pseudo_run, (uintptr_t)pc)) return -1;
    dlfo_fn find = atomic_load_explicit(&real_dlfo, memory_order_acquire);
    if (!find) {
        ftr_unwind_fde_resolve();
        if (!(find = atomic_load_explicit(&real_dlfo, memory_order_acquire))) return -1;
    }
    return find(pc, result);
}

EXPORT extern __typeof__(ftr_dl_find_object) _dl_find_object
    __attribute__((alias("ftr_dl_find_object")));
#endif
