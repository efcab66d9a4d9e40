/*
 * retaddr.c - the book of real return addresses (retaddr.h): mapped once, before any site is
 * patched; a fork child keeps its copy (its stacks are at the same addresses).
 */
#include <sys/mman.h>

#include "retaddr.h"

struct ftr_retaddr *ftr_ret_book;
_Atomic uint64_t ftr_ret_full;
_Atomic uint64_t ftr_ret_held;

void ftr_retaddr_init(void)
{
    if (ftr_ret_book) return;
    void *p = mmap(NULL, (size_t)FTR_RET_N * sizeof(struct ftr_retaddr), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    /* without it no return is hooked: every call that needs the return hook runs unhooked */
    if (p != MAP_FAILED) ftr_ret_book = p;
}
