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
 * stops at generated code.
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
EXPORT const void *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases);

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

/* The next definition: the calling object's own (libgcc_s calls it through its PLT), cached
 * with that object's address range; else the one after us in the global scope. */
static _Atomic(find_fde_fn) next_global;
static struct {
    uintptr_t lo, hi;
    _Atomic(find_fde_fn) fn; /* stored last: the entry is whole once it is set */
} callers[4];
static _Atomic unsigned nclaimed;

static find_fde_fn next_for(uintptr_t caller)
{
    unsigned n = atomic_load_explicit(&nclaimed, memory_order_acquire);
    for (unsigned i = 0; i < n && i < 4; i++) {
        find_fde_fn fn = atomic_load_explicit(&callers[i].fn, memory_order_acquire);
        if (fn && caller - callers[i].lo < callers[i].hi - callers[i].lo) return fn;
    }
#if __GLIBC_PREREQ(2, 35)
    struct dl_find_object fo;
    if (_dl_find_object((void *)caller, &fo) == 0) {
        find_fde_fn fn = (find_fde_fn)ftr_dynsym(fo.dlfo_link_map, "_Unwind_Find_FDE");
        if (fn && fn != _Unwind_Find_FDE) {
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
    return atomic_load_explicit(&next_global, memory_order_acquire);
}

void ftr_unwind_fde_resolve(void)
{
    void *p = dlsym(RTLD_NEXT, "_Unwind_Find_FDE");
    if (p) atomic_store_explicit(&next_global, (find_fde_fn)p, memory_order_release);
}

EXPORT const void *_Unwind_Find_FDE(void *pc, struct dwarf_eh_bases *bases)
{
    if (generated((uintptr_t)pc)) {
        bases->tbase = bases->dbase = NULL;
        bases->func = pc; /* the rules hold from the code's first byte: any start at or below pc */
        return ftr_generated_fde;
    }
    find_fde_fn next = next_for((uintptr_t)__builtin_return_address(0));
    return next ? next(pc, bases) : NULL;
}
