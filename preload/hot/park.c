/*
 * park.c - parked shadow entries (park.h): a pool of blocks of 7 entries, mapped on first use
 * (programs without coroutines pay nothing), linked into parks, reused through a free list
 * whose head carries a tag (no ABA between threads).
 */
#include <stdatomic.h>
#include <sys/mman.h>

#include "park.h"
#include "retaddr.h"
#include "stacks.h"

#define PER_BLOCK 7u
#define BLOCKS_MAX (1u << 20) /* 7 Mi parked entries; 240 MiB of address space, NORESERVE */

struct block {
    uint32_t next; /* the park's next block, or the free list's (1-based; 0: none) */
    uint32_t n;    /* entries used */
    uint64_t pad;
    struct ftr_shadow e[PER_BLOCK];
};

static struct block *_Atomic pool;
static atomic_uint bumped;        /* blocks handed out of the pool so far */
static _Atomic uint64_t free_top; /* tag << 32 | 1-based block number */

static uint32_t next_of(const struct block *p, uint32_t b)
{
    return __atomic_load_n(&p[b - 1].next, __ATOMIC_RELAXED);
}

static struct block *pool_get(void)
{
    struct block *p = atomic_load_explicit(&pool, memory_order_acquire);
    if (p) return p;
    void *m = mmap(NULL, (size_t)BLOCKS_MAX * sizeof(struct block), PROT_READ | PROT_WRITE,
                   MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return NULL;
    struct block *none = NULL;
    if (!atomic_compare_exchange_strong(&pool, &none, (struct block *)m)) {
        munmap(m, (size_t)BLOCKS_MAX * sizeof(struct block)); /* another thread's won */
        return none;
    }
    return m;
}

static uint32_t block_new(void)
{
    struct block *p = pool_get();
    if (!p) return 0;
    uint64_t top = atomic_load(&free_top);
    while ((uint32_t)top) {
        uint32_t next = __atomic_load_n(&p[(uint32_t)top - 1].next, __ATOMIC_RELAXED);
        uint64_t want = ((top >> 32) + 1) << 32 | next;
        if (atomic_compare_exchange_weak(&free_top, &top, want)) {
            __atomic_store_n(&p[(uint32_t)top - 1].next, 0, __ATOMIC_RELAXED);
            p[(uint32_t)top - 1].n = 0;
            return (uint32_t)top;
        }
    }
    uint32_t b = atomic_fetch_add(&bumped, 1);
    if (b >= BLOCKS_MAX) {
        atomic_fetch_sub(&bumped, 1);
        return 0;
    }
    __atomic_store_n(&p[b].next, 0, __ATOMIC_RELAXED);
    p[b].n = 0;
    return b + 1;
}

/* A chain of blocks, from b, back to the free list. */
static void blocks_free(uint32_t b)
{
    struct block *p = atomic_load_explicit(&pool, memory_order_acquire);
    while (b && p) {
        uint32_t next = __atomic_load_n(&p[b - 1].next, __ATOMIC_RELAXED);
        uint64_t top = atomic_load(&free_top);
        do
            __atomic_store_n(&p[b - 1].next, (uint32_t)top, __ATOMIC_RELAXED);
        while (!atomic_compare_exchange_weak(&free_top, &top, ((top >> 32) + 1) << 32 | b));
        b = next;
    }
}

int ftr_park_add(struct ftr_park_build *b, const struct ftr_shadow *e)
{
    struct block *p = pool_get();
    if (!p) return -1;
    if (!b->tail || p[b->tail - 1].n == PER_BLOCK) {
        uint32_t nb = block_new();
        if (!nb) return -1;
        if (b->tail)
            __atomic_store_n(&p[b->tail - 1].next, nb, __ATOMIC_RELAXED);
        else
            b->head = nb;
        b->tail = nb;
    }
    struct block *t = &p[b->tail - 1];
    t->e[t->n++] = *e;
    return 0;
}

static _Atomic uint32_t *park_of(uint32_t cls)
{
    if (!ftr_stack_ranges || cls == FTR_STACK_OWN || cls == FTR_STACK_UNKNOWN ||
        cls > FTR_STACK_RANGES_MAX)
        return NULL;
    return &ftr_stack_ranges[cls - 1].parked;
}

void ftr_park_publish(const struct ftr_park_build *b)
{
    _Atomic uint32_t *at = park_of(b->cls);
    if (!b->head) return;
    if (!at) {
        blocks_free(b->head);
        return;
    }
    blocks_free(atomic_exchange(at, b->head));
}

uint32_t ftr_unpark(uint32_t cls, struct ftr_shadow *out, uint32_t room)
{
    _Atomic uint32_t *at = park_of(cls);
    struct block *p = atomic_load_explicit(&pool, memory_order_acquire);
    if (!at || !p || !atomic_load_explicit(at, memory_order_relaxed)) return 0;
    uint32_t head = atomic_exchange(at, 0), n = 0;
    for (uint32_t b = head; b; b = next_of(p, b))
        n += p[b - 1].n;
    if (n > room) n = 0;
    for (uint32_t b = head, k = 0; b && n; b = next_of(p, b))
        for (uint32_t i = 0; i < p[b - 1].n; i++)
            out[k++] = p[b - 1].e[i];
    blocks_free(head);
    return n;
}

void ftr_park_drop(uint32_t cls)
{
    _Atomic uint32_t *at = park_of(cls);
    struct block *p = atomic_load_explicit(&pool, memory_order_acquire);
    if (!at || !p || !atomic_load_explicit(at, memory_order_relaxed)) return;
    uint32_t head = atomic_exchange(at, 0);
    for (uint32_t b = head; b; b = next_of(p, b)) /* their frames are gone with the coroutine */
        for (uint32_t i = 0; i < p[b - 1].n; i++)
            ftr_ret_gone(&p[b - 1].e[i]);
    blocks_free(head);
}
