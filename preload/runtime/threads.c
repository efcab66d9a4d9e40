/*
 * threads.c - per-thread tracing state, the chunk pool, and the hand-off of chunks to the writer.
 *
 * Nothing here takes a lock or calls the program's allocator: a thread's first hook, and a full
 * chunk, may come inside a signal handler that interrupted malloc() or any lock of the program.
 * Memory is the tracer's own (mmap, and the region's shared pages); every shared structure is
 * lock-free:
 *
 *  - the chunk pool is a stack of chunk indices in the region's header whose head carries a tag
 *    (no ABA): threads pop, the reader pushes (chunk.h); a dry pool maps a new chunk (up to a
 *    cap, then events are dropped);
 *  - a full chunk goes to the reader by its state (FULL), which the reader finds by scanning
 *    the region (drain.c); it reads a thread's current chunk up to its first unfilled slot;
 *  - a thread has a slot in the region's header (its tid and name, for the reader) and a record
 *    here (its TLS, its chunks, its shadow stack): records are never unlinked from their list,
 *    a thread claims a free one (or maps a new one) and frees it at its end.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "forkpage.h"
#include "region.h"
#include "retaddr.h"
#include "stacks.h"
#include "tracer.h"

enum { REC_FREE = 0, REC_CLAIMED, REC_LIVE, REC_ENDED };

#define CHUNKS_MAX (1u << 20)
#define POOL_MAX_BYTES (256u << 20) /* past this, events are dropped while the writer is behind */
#define KEY_DIRECT 32               /* glibc: keys below this are set without allocating */

static struct ftr_thread *_Atomic threads; /* every record ever made (push-only) */
static struct ftr_chunk **chunk_table;     /* index -> chunk (NORESERVE) */
static struct ftr_region_hdr *rh;          /* the region's header: the pool, the slots */
static atomic_uint chunks_allocated FTR_FORK_PAGE;
static pthread_key_t thread_key;
static int key_direct; /* thread_key may be set from any context */
static _Atomic uint64_t lost_ended, lost_calls_ended, overruns_ended; /* of threads that ended */

static size_t chunk_size(void)
{
    return sizeof(struct ftr_chunk) + ftr_cfg.chunk_bytes;
}
static size_t shadow_bytes(void)
{
    return ftr_cfg.shadow_entries * sizeof(struct ftr_shadow);
}

/* ---- the pool ---- */

/* A chunk of the pool, now the caller's (OWNED), or NULL */
static struct ftr_chunk *pool_pop(void)
{
    uint64_t h = atomic_load(&rh->pool_head);
    while ((uint32_t)h) {
        struct ftr_chunk *c = chunk_table[(uint32_t)h - 1]; /* chunk_new() made every one */
        /* c may be taken (and its next_free rewritten) meanwhile: the tag makes the CAS fail */
        uint32_t nx = __atomic_load_n(&c->next_free, __ATOMIC_RELAXED);
        if (atomic_compare_exchange_weak(&rh->pool_head, &h, ((h >> 32) + 1) << 32 | nx)) {
            atomic_store_explicit(&c->state, FTR_CHUNK_OWNED, memory_order_release);
            return c;
        }
    }
    return NULL;
}

/* A new chunk, in the process's region (region.c: memory a reader outside the process may
 * share). An index whose memory cannot be had is spent: the region's chunks are at fixed
 * places, and a later one may be had. */
static struct ftr_chunk *chunk_new(void)
{
    unsigned i = atomic_fetch_add(&chunks_allocated, 1);
    if (i >= CHUNKS_MAX) return NULL;
    struct ftr_chunk *c = ftr_region_chunk(i);
    if (!c) return NULL;
    c->nrec = ftr_cfg.chunk_bytes / sizeof(struct ftr_rec);
    c->index = i;
    atomic_store_explicit(&c->state, FTR_CHUNK_OWNED, memory_order_release); /* nrec with it */
    chunk_table[i] = c;
    return c;
}

/* A zeroed chunk, or NULL: the pool is dry and the writer behind (the caller then loses
 * events, counted; the kernel's ring buffer never blocks the traced code either). Only in
 * lossless mode (FTRACE_LOSSLESS, documented as such) does the thread wait for the writer. */
static struct ftr_chunk *chunk_get(void)
{
    for (;;) {
        unsigned gen = atomic_load(&rh->pool_gen);
        struct ftr_chunk *c = pool_pop();
        if (c) return c;
        /* Beyond the cap, map more only while the reader is not behind (nothing FULL):
         * chunks held by many live threads are not a backlog. */
        if ((size_t)atomic_load(&chunks_allocated) * chunk_size() < POOL_MAX_BYTES ||
            !atomic_load(&rh->full))
            return chunk_new();
        ftr_wake_writer();
        if (!ftr_cfg.lossless) return NULL;
        struct timespec ts = {0, 50 * 1000 * 1000};
        syscall(SYS_futex, &rh->pool_gen, FUTEX_WAIT, gen, &ts, NULL, 0);
    }
}

/* To the reader: every record of c is in (a release: used and the records are seen by it) */
static void queue_full(struct ftr_chunk *c)
{
    atomic_fetch_add(&rh->full, 1);
    atomic_store_explicit(&c->state, FTR_CHUNK_FULL, memory_order_release);
}

/* Hands the chunk a thread record points to (its cur or held) to the reader, the pointer
 * cleared first: once the reader has taken it, it may be another thread's. */
static void queue_from(struct ftr_chunk **where)
{
    struct ftr_chunk *c = *where;
    if (!c) return;
    __atomic_store_n(where, NULL, __ATOMIC_RELEASE);
    queue_full(c);
}

/* The held chain of r to the reader, but for skip (a chunk also r's cur). Newest first: the
 * reader orders a thread's pieces by their seq0. Each link is cleared as its chunk goes: no
 * stale link can make a cycle with a later chain. */
static void queue_held(struct ftr_thread *r, const struct ftr_chunk *skip)
{
    struct ftr_chunk *h = r->held;
    if (!h) return;
    __atomic_store_n(&r->held, NULL, __ATOMIC_RELEASE);
    for (struct ftr_chunk *n; h; h = n) {
        n = __atomic_load_n(&h->held_next, __ATOMIC_RELAXED);
        __atomic_store_n(&h->held_next, NULL, __ATOMIC_RELAXED);
        if (h != skip) queue_full(h);
    }
}

/* The held chain of r back to the pool unwritten (one of our own threads'), but for skip. */
static void release_held(struct ftr_thread *r, const struct ftr_chunk *skip)
{
    for (struct ftr_chunk *h = r->held, *n; h; h = n) {
        n = h->held_next;
        h->held_next = NULL;
        if (h != skip) ftr_release_chunk(h);
    }
    r->held = NULL;
}

/* ---- thread slots (the reader's view of a thread) ---- */

static struct ftr_region_thread *slot_at(int32_t i)
{
    return (struct ftr_region_thread *)((char *)rh + FTR_REGION_SLOT0) + i;
}

/* A free slot for thread tid, or -1: every slot is a live thread's, or one whose chunks the
 * reader has still to write (the thread is traced; the trace does not name it). */
static int32_t slot_claim(uint32_t tid)
{
    for (uint32_t i = 0; i < FTR_REGION_SLOTS; i++) {
        struct ftr_region_thread *sl = slot_at((int32_t)i);
        uint32_t free_state = FTR_SLOT_FREE;
        if (atomic_load_explicit(&sl->state, memory_order_relaxed) != FTR_SLOT_FREE ||
            !atomic_compare_exchange_strong(&sl->state, &free_state, FTR_SLOT_LIVE))
            continue;
        sl->tid = tid;
        uint32_t n = atomic_load(&rh->nslots);
        while (n <= i && !atomic_compare_exchange_weak(&rh->nslots, &n, i + 1))
            ;
        return (int32_t)i;
    }
    return -1;
}

void ftr_thread_name_publish(struct ftr_thread *r)
{
    if (r->slot < 0 || !rh) return;
    struct ftr_region_thread *sl = slot_at(r->slot);
    for (int i = 0; i < 2; i++)
        __atomic_store_n((uint64_t *)sl->name + i,
                         __atomic_load_n((uint64_t *)r->name + i, __ATOMIC_RELAXED),
                         __ATOMIC_RELAXED);
}

/* The thread's chunks are all FULL (or free): the reader may write them and name it. */
static void slot_end(struct ftr_thread *r)
{
    if (r->slot < 0) return;
    atomic_store_explicit(&slot_at(r->slot)->state, FTR_SLOT_ENDED, memory_order_release);
    r->slot = -1;
}

/* One of our own threads: it never recorded, nothing to write. */
static void slot_free(struct ftr_thread *r)
{
    if (r->slot < 0) return;
    atomic_store_explicit(&slot_at(r->slot)->state, FTR_SLOT_FREE, memory_order_release);
    r->slot = -1;
}

/* ---- thread records ---- */

static struct ftr_thread *record_claim(void)
{
    for (struct ftr_thread *r = atomic_load(&threads); r; r = r->next) {
        int free_state = REC_FREE;
        if (atomic_load(&r->state) == REC_FREE &&
            atomic_compare_exchange_strong(&r->state, &free_state, REC_CLAIMED)) {
            r->pth = 0;
            r->slot = -1;
            return r;
        }
    }
    /* a new one: the record and its shadow stack in one mapping */
    size_t head = (sizeof(struct ftr_thread) + 4095) & ~(size_t)4095;
    uint8_t *m = mmap(NULL, head + shadow_bytes(), PROT_READ | PROT_WRITE,
                      MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (m == MAP_FAILED) return NULL;
    struct ftr_thread *r = (struct ftr_thread *)m;
    r->shadow = (struct ftr_shadow *)(m + head);
    r->slot = -1;
    atomic_store(&r->state, REC_CLAIMED);
    struct ftr_thread *h = atomic_load(&threads);
    do
        r->next = h;
    while (!atomic_compare_exchange_weak(&threads, &h, r));
    return r;
}

/* Back to free, for the next thread (its memory stays mapped; the shadow stack's pages are
 * given back to the kernel, zero when touched again). */
static void record_release(struct ftr_thread *r)
{
    madvise(r->shadow, shadow_bytes(), MADV_DONTNEED);
    r->tls = NULL;
    r->cur = r->spare = r->held = NULL;
    r->slot = -1;
    r->ended = 0;
    r->next_seq = 0;
    r->stack_lo = r->stack_hi = 0;
    r->stack_size = 0;
    r->safe_start = 0;
    r->start_fn = NULL;
    r->start_arg = NULL;
    memset(r->name, 0, sizeof r->name);
    r->pth = 0;
    memset(r->sig, 0, sizeof r->sig); /* as a new thread's TLS held them: zero */
    memset(r->chain, 0, sizeof r->chain);
    atomic_store(&r->state, REC_FREE);
}

/* The thread's lists in its record r (NULL: none; then nothing is kept in them). A signal
 * handler of the thread may run in between: each pointer is there before the count that lets
 * it be used, and gone after it. */
static void lists_at(struct ftr_tls *t, struct ftr_thread *r)
{
    if (r) {
        t->sig = r->sig;
        t->chain = r->chain;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        t->sig_cap = FTR_SIG_NEST;
    } else {
        t->sig_cap = 0;
        t->chain_n = 0;
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        t->sig = NULL;
        t->chain = NULL;
    }
}

struct ftr_thread *ftr_thread_of(pthread_t th)
{
    for (struct ftr_thread *r = atomic_load(&threads); r; r = r->next) {
        int s = atomic_load(&r->state);
        if ((s == REC_CLAIMED || s == REC_LIVE) && r->pth && pthread_equal(r->pth, th)) return r;
    }
    return NULL;
}

struct ftr_thread *ftr_thread_reserve(void)
{
    return ftr_g.ready ? record_claim() : NULL;
}

void ftr_thread_unreserve(struct ftr_thread *r)
{
    if (r) record_release(r);
}

static void set_window(struct ftr_tls *t, struct ftr_chunk *c)
{
    if (c) { /* a reader may look at a spare meanwhile (it finds no record): atomics */
        __atomic_store_n(&c->tid, t->thr->tid, __ATOMIC_RELAXED);
        c->used = c->nrec;
        __atomic_store_n(&c->seq0, t->thr->next_seq, __ATOMIC_RELAXED);
        t->thr->next_seq += c->nrec;
        t->pos = c->rec;
        t->end = c->rec + c->nrec;
    } else {
        t->pos = t->end = NULL; /* every reservation fails: events are counted as lost */
    }
    __atomic_store_n(&t->thr->cur, c, __ATOMIC_RELEASE);
}

/* Sets this thread up on record r (reserved, or NULL: claim one now). Runs in any context: in
 * the thread start wrapper before the program's start routine, or at a hook (maybe inside a
 * signal handler). @return 0, or -1 (the thread stays untraced). */
static int setup(struct ftr_thread *r)
{
    struct ftr_tls *t = &ftr_tls;
    if (!r && !(r = record_claim())) return -1;
    r->tid = (uint32_t)syscall(SYS_gettid);
    r->tls = t;
    r->pth = pthread_self();
    ftr_name_at_setup(r);
    if (r->stack_hi)
        t->stack_lo = r->stack_lo, t->stack_hi = r->stack_hi;
    else
        /* where the thread runs: the hook's slot when this is its slow path, which runs on a
         * private stack (ftr_call_saving); else here (the start wrapper) */
        ftr_stack_bounds_here(r->stack_size, t->slow_sp, &t->stack_lo, &t->stack_hi);
    t->thr = r;
    lists_at(t, r);
    r->slot = slot_claim(r->tid);
    ftr_thread_name_publish(r);
    t->shadow_base = t->top = r->shadow;
    t->shadow_end = r->shadow + ftr_cfg.shadow_entries;
    set_window(t, chunk_get());
    r->spare = chunk_get();
    /* the destructor: from a safe context always; elsewhere only where glibc sets the key
     * without allocating (else the writer sees the thread gone by its tid) */
    if (r->safe_start || key_direct) pthread_setspecific(thread_key, r);
    atomic_store(&r->state, REC_LIVE);
    t->state = FTR_T_ACTIVE;
    return 0;
}

void ftr_thread_init_slow(void *reserved)
{
    struct ftr_tls *t = &ftr_tls;
    if (t->state != FTR_T_NEW || !ftr_g.ready) return;
    int saved_errno = errno; /* the program's, live across the call being entered */
    t->in_slow = 1;
    t->state = FTR_T_OFF; /* until everything below succeeded */
    if (setup(reserved) < 0 && reserved) record_release(reserved);
    t->in_slow = 0;
    errno = saved_errno;
}

/* Another thread reads a thread's counters in its TLS block, which goes away with the thread:
 * the thread's end (thread_end) waits while one is inside such a read. */
static int tls_enter(struct ftr_thread *r)
{
    atomic_fetch_add(&r->reading, 1); /* a count: readers may overlap */
    if (atomic_load(&r->state) == REC_LIVE && r->tls) return 1;
    atomic_fetch_sub(&r->reading, 1);
    return 0;
}
static void tls_leave(struct ftr_thread *r)
{
    atomic_fetch_sub(&r->reading, 1);
}

/* This thread stops tracing for good: its chunks go to the reader, its slot with them (the
 * reader names the thread once it has written them), its record back to free. */
static void thread_end(struct ftr_thread *r)
{
    struct ftr_tls *t = &ftr_tls;
    t->in_slow = 1;
    t->state = FTR_T_OFF;
    queue_held(r, r->cur);
    struct ftr_chunk *c = r->cur;
    if (c && t->pos >= c->rec && t->pos <= c->rec + c->nrec)
        c->used = (size_t)(t->pos - c->rec); /* a short thread's chunk: the reader reads less */
    queue_from(&r->cur);
    if (r->spare) { /* never written: back to the pool as it is */
        ftr_pool_put(rh, r->spare);
        r->spare = NULL;
    }
    atomic_fetch_add(&lost_ended, t->lost);
    atomic_fetch_add(&lost_calls_ended, t->lost_calls);
    atomic_fetch_add(&overruns_ended, t->overruns);
    slot_end(r);
    __atomic_store_n(&r->ended, 1, __ATOMIC_RELEASE);
    atomic_store(&r->state, REC_ENDED);
    while (atomic_load(&r->reading)) /* a reader of our TLS's counters: a few instructions */
        sched_yield();
    t->pos = t->end = NULL;
    t->shadow_base = t->shadow_end = t->top = NULL;
    lists_at(t, NULL);
    t->thr = NULL;
    ftr_slow_area_free();
    record_release(r);
    ftr_wake_writer();
}

static void thread_destructor(void *arg)
{
    struct ftr_thread *r = arg;
    if (ftr_tls.thr != r) return;
    /* Ours was made first (the constructor), so it runs before the program's key destructors,
     * which may call traced code: come back for glibc's second round (it makes one while any
     * key is set), and end there. (Not the last round: sanitizers keep that for their own.) */
    if (++ftr_tls.dtor_rounds < 2 && pthread_setspecific(thread_key, r) == 0) return;
    ftr_close_all_frames(); /* left by pthread_exit() or cancellation: they end with the thread */
    thread_end(r);
}

uint32_t ftr_thread_pause(void)
{
    uint32_t state = ftr_tls.state;
    ftr_tls.state = FTR_T_OFF;
    return state;
}

void ftr_thread_unpause(uint32_t state)
{
    ftr_tls.state = state;
}

void ftr_thread_off(void)
{
    struct ftr_tls *t = &ftr_tls;
    t->state = FTR_T_OFF;
    struct ftr_thread *r = t->thr;
    if (!r) return;
    /* One of our own threads (the writer, the control server), set up by the start wrapper
     * and never recording: its chunks go back to the pool unwritten, its record and slot are
     * free again, and the trace never names it. */
    pthread_setspecific(thread_key, NULL);
    t->in_slow = 1;
    struct ftr_chunk *chunks[2] = {r->cur, r->spare};
    __atomic_store_n(&r->cur, NULL, __ATOMIC_RELEASE);
    atomic_store(&r->state, REC_CLAIMED); /* out of the counters' sight */
    slot_free(r);
    while (atomic_load(&r->reading))
        sched_yield();
    t->pos = t->end = NULL;
    release_held(r, chunks[0]);
    for (int i = 0; i < 2; i++)
        if (chunks[i]) ftr_release_chunk(chunks[i]);
    t->shadow_base = t->shadow_end = t->top = NULL;
    lists_at(t, NULL);
    t->thr = NULL;
    ftr_slow_area_free();
    record_release(r);
}

/* Events this thread dropped since it last said so become one LOST event in its stream, where
 * the report shows them (kernel style: a gap is marked, not hidden). */
static void report_lost(struct ftr_tls *t)
{
    uint64_t n = t->lost - t->lost_reported;
    if (!n || !t->pos || t->pos >= t->end) return;
    uint32_t arg = n > UINT32_MAX ? UINT32_MAX : (uint32_t)n;
    t->lost_reported += arg;
    ftr_record_special(FTR_SP_LOST, arg);
}

/* The current chunk is full. The spare takes its place, the full chunk goes to the writer and
 * a new spare is taken, with every signal blocked (two system calls per chunk of records): a
 * handler that siglongjmp()s out of it (a timeout) would abandon it half done, and the full
 * chunk, never queued, would be lost with everything in it. A handler that lands before the
 * block runs a nested switch of its own (nothing is done yet). But SIGTRAP and SIGSYS, as in
 * ftr_call_saving(): blocked, the kernel's would kill, and a thread seen with SIGTRAP blocked
 * makes a live rewrite wait for it, or refuse (8 hot threads on 2 CPUs: some thread always
 * was). No int3 is met here, and one sent is put off by our handler (init.c). The program's
 * errno is kept. */
void ftr_chunk_full_slow(void *unused)
{
    (void)unused;
    int saved_errno = errno;
    uint64_t all = ~(1ull << (SIGTRAP - 1) | 1ull << (SIGSYS - 1)), mask;
    int blocked = syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, &mask, sizeof mask) == 0;
    struct ftr_tls *t = &ftr_tls;
    struct ftr_thread *thr = t->thr;
    t->in_slow = 1;
    struct ftr_chunk *old = thr->cur, *next = thr->spare;
    if (next) {
        thr->spare = NULL;
        __atomic_store_n(&next->tid, thr->tid, __ATOMIC_RELAXED); /* as in set_window */
        next->used = next->nrec;
        __atomic_store_n(&next->seq0, thr->next_seq, __ATOMIC_RELAXED);
        thr->next_seq += next->nrec;
        __atomic_store_n(&t->end, NULL, __ATOMIC_RELAXED);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        __atomic_store_n(&t->pos, next->rec, __ATOMIC_RELAXED);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        __atomic_store_n(&t->end, next->rec + next->nrec, __ATOMIC_RELAXED);
        __atomic_store_n(&thr->cur, next, __ATOMIC_RELEASE);
    }
    if (t->filling <= 1) queue_held(thr, NULL); /* the interrupted records are written by now */
    if (old && t->filling > 1) {
        /* a signal handler filled it while a record of ours was in flight: it waits for that
         * record, then goes at the next switch, or at the end (the writer takes what it has).
         * Onto the chain: a chunk held before may still wait too (the next switch came in
         * another handler that interrupted a record: queued at once, that record was lost,
         * signal-big-handler under load, 1 run in 15). */
        __atomic_store_n(&old->held_next, thr->held, __ATOMIC_RELAXED);
        __atomic_store_n(&thr->held, old, __ATOMIC_RELEASE);
    } else if (old) {
        if (thr->cur == old) __atomic_store_n(&thr->cur, NULL, __ATOMIC_RELEASE); /* no spare */
        queue_full(old);
    }
    if (next)
        thr->spare = chunk_get();
    else
        set_window(t, chunk_get());
    ftr_wake_writer();
    report_lost(t);
    t->in_slow = 0;
    if (blocked) syscall(SYS_rt_sigprocmask, SIG_SETMASK, &mask, NULL, sizeof mask);
    errno = saved_errno;
}

int ftr_threads_init(void)
{
    if (ftr_region_init(chunk_size()) < 0) return -1;
    rh = ftr_region_header();
    atomic_store(&rh->holdback_ticks, ftr_g.holdback_ticks); /* the reader's copy */
    chunk_table = mmap(NULL, CHUNKS_MAX * sizeof *chunk_table, PROT_READ | PROT_WRITE,
                       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (chunk_table == MAP_FAILED) return -1;
    if (pthread_key_create(&thread_key, thread_destructor) != 0) return -1;
    key_direct = thread_key < KEY_DIRECT;
    ftr_stacks_init();
    ftr_retaddr_init();
    return 0;
}

/* ---- housekeeping ---- */

void ftr_release_chunk(struct ftr_chunk *c)
{
    ftr_chunk_recycle(rh, c, ftr_cfg.lossless);
}

/* A thread that ended without its destructor (a raw exit system call; or set up where its key
 * could not be set): its tid is gone. Its TLS may be gone too: only the record is touched. */
static void adopt_gone(struct ftr_thread *r)
{
    if (syscall(SYS_tgkill, (pid_t)ftr_g.pid, (pid_t)r->tid, 0) == 0 || errno != ESRCH) return;
    int live = REC_LIVE;
    if (!atomic_compare_exchange_strong(&r->state, &live, REC_CLAIMED)) return;
    r->tls = NULL;
    __atomic_store_n(&r->ended, 1, __ATOMIC_RELEASE);
    queue_held(r, r->cur); /* cur too if it died inside a switch without a spare: once */
    queue_from(&r->cur);
    if (r->spare) ftr_pool_put(rh, r->spare);
    r->spare = NULL;
    slot_end(r);
    record_release(r);
    ftr_wake_writer();
}

void ftr_threads_housekeep(void)
{
    for (struct ftr_thread *r = atomic_load(&threads); r; r = r->next)
        if (atomic_load(&r->state) == REC_LIVE && r->tid != ftr_g.pid) adopt_gone(r);
}

/* No locks to hold across fork: the structures are consistent at every instruction. */
void ftr_threads_prepare_fork(void) {}
void ftr_threads_parent_fork(void) {}

/* In a fork child, only the forking thread exists. Every chunk it can see is the parent's,
 * shared with it (region.c): the parent writes them, returns them to its pool and may reuse
 * them, so the child forgets them all, pool and queue included, and takes chunks of its own
 * region. Every other record is free. */
void ftr_threads_child_fork(void)
{
    struct ftr_tls *t = &ftr_tls;
    struct ftr_thread *me = t->thr;
    atomic_store(&chunks_allocated, 0);
    for (struct ftr_thread *r = atomic_load(&threads); r; r = r->next) {
        r->cur = r->spare = r->held = NULL;
        r->slot = -1;
        if (r != me && atomic_load(&r->state) != REC_FREE) record_release(r);
    }
    ftr_region_child_fork();
    rh = ftr_region_header();
    if (rh) atomic_store(&rh->holdback_ticks, ftr_g.holdback_ticks);
    if (!me) return;
    me->tid = (uint32_t)syscall(SYS_gettid);
    me->slot = slot_claim(me->tid);
    ftr_thread_name_publish(me);
    set_window(t, chunk_get());
    me->spare = chunk_get();
}

enum { SUM_LOST, SUM_LOST_CALLS, SUM_OVERRUNS };

static uint64_t sum_live(int what)
{
    uint64_t n = atomic_load(what == SUM_LOST         ? &lost_ended
                             : what == SUM_LOST_CALLS ? &lost_calls_ended
                                                      : &overruns_ended);
    for (struct ftr_thread *r = atomic_load(&threads); r; r = r->next)
        if (tls_enter(r)) {
            n += what == SUM_LOST         ? r->tls->lost
                 : what == SUM_LOST_CALLS ? r->tls->lost_calls
                                          : r->tls->overruns;
            tls_leave(r);
        }
    return n;
}

uint64_t ftr_lost_events(void)
{
    return sum_live(SUM_LOST);
}

uint64_t ftr_lost_calls(void)
{
    return sum_live(SUM_LOST_CALLS);
}

uint64_t ftr_overrun_calls(void)
{
    return sum_live(SUM_OVERRUNS);
}
