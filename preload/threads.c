/*
 * threads.c - per-thread tracing state, the chunk pool, and the hand-off of chunks to the writer.
 *
 * Everything here is slow path: it runs once per thread, once per full chunk (thousands of
 * events), or on the writer thread. Hooks reach it through ftr_call_saving(), so it may use libc.
 *
 * One mutex (reg_lock) guards the thread registry, the pool's free list and the full queue. A
 * chunk is owned by its thread until it is queued as full; the writer may read the records of a
 * thread's current chunk up to the thread's write position (partial flush), taking only
 * records whose head is non-zero (filled).
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "tracer.h"

__thread struct ftr_tls ftr_tls __attribute__((tls_model("initial-exec")));

static pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER;
static struct ftr_thread *threads;                            /* registry */
static struct ftr_chunk *free_chunks;                         /* pool */
static struct ftr_chunk *full_head, **full_tail = &full_head; /* FIFO to the writer */
static size_t chunks_allocated;
static pthread_key_t thread_key;
static uint64_t lost_ended, overruns_ended; /* of threads that ended (under reg_lock) */

#define POOL_MAX_BYTES (256u << 20) /* past this, events are dropped while the writer is behind */

static size_t chunk_size(void)
{
    return sizeof(struct ftr_chunk) + ftr_cfg.chunk_bytes;
}

/* Must hold reg_lock. Returns a zeroed chunk, or NULL when the pool is exhausted and the writer
 * did not free one in time (the caller then loses events). */
static struct ftr_chunk *chunk_get_locked(void)
{
    for (;;) {
        if (free_chunks) {
            struct ftr_chunk *c = free_chunks;
            free_chunks = c->next;
            c->next = NULL;
            return c;
        }
        /* Beyond the cap, wait only while the writer is behind (full chunks queued): chunks
         * held by many live threads are not a backlog. */
        if (chunks_allocated * chunk_size() < POOL_MAX_BYTES || !full_head) {
            struct ftr_chunk *c = mmap(NULL, chunk_size(), PROT_READ | PROT_WRITE,
                                       MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
            if (c == MAP_FAILED) return NULL;
            c->nrec = ftr_cfg.chunk_bytes / sizeof(struct ftr_rec);
            chunks_allocated++;
            return c;
        }
        /* The writer is behind. The kernel's ring buffer never blocks the traced code, and
         * neither do we: the events are dropped and counted (a LOST event marks the gap). Only
         * in lossless mode (FTRACE_LOSSLESS) does the thread wait for the writer. */
        if (!ftr_cfg.lossless) {
            ftr_wake_writer();
            return NULL;
        }
        ftr_wake_writer();
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        ts.tv_nsec += 50 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000;
        }
        pthread_cond_timedwait(&pool_cond, &reg_lock, &ts);
    }
}

static void set_window(struct ftr_tls *t, struct ftr_chunk *c)
{
    if (c) {
        c->tid = t->thr->tid;
        c->flushed = 0;
        c->seq0 = t->thr->next_seq;
        t->thr->next_seq += c->nrec;
        t->pos = c->rec;
        t->end = c->rec + c->nrec;
    } else {
        t->pos = t->end = NULL; /* every reservation fails: events are counted as lost */
    }
    t->thr->cur = c;
}

/* Must hold reg_lock. */
static void queue_full_locked(struct ftr_chunk *c)
{
    c->next = NULL;
    *full_tail = c;
    full_tail = &c->next;
}

static void thread_destructor(void *arg)
{
    struct ftr_thread *thr = arg;
    struct ftr_tls *t = &ftr_tls;
    if (t->thr != thr) return;
    ftr_close_all_frames(); /* left by pthread_exit() or cancellation: they end with the thread */
    pthread_getname_np(pthread_self(), thr->name, sizeof thr->name); /* its final name */
    t->in_slow = 1;
    t->state = FTR_T_OFF;
    pthread_mutex_lock(&reg_lock);
    if (thr->held) queue_full_locked(thr->held);
    thr->held = NULL;
    if (thr->cur) queue_full_locked(thr->cur);
    thr->cur = NULL;
    if (thr->spare) { /* never written: back to the pool as it is */
        thr->spare->next = free_chunks;
        free_chunks = thr->spare;
        thr->spare = NULL;
    }
    thr->ended = 1;
    lost_ended += t->lost;
    overruns_ended += t->overruns;
    t->pos = t->end = NULL;
    pthread_mutex_unlock(&reg_lock);
    /* No hooked frame of this thread can return any more: its start routine has returned or
     * it is inside pthread_exit; hooks from later destructors see FTR_T_OFF. */
    munmap(t->shadow_base, (size_t)((char *)t->shadow_end - (char *)t->shadow_base));
    t->shadow_base = t->shadow_end = t->top = NULL;
    free(t->grave);
    t->grave = NULL;
    ftr_slow_area_free();
    ftr_wake_writer();
}

void ftr_thread_init_slow(void *unused)
{
    (void)unused;
    struct ftr_tls *t = &ftr_tls;
    if (t->state != FTR_T_NEW || !ftr_g.ready) return;
    t->in_slow = 1;
    t->state = FTR_T_OFF; /* until everything below succeeded */

    struct ftr_thread *thr = calloc(1, sizeof *thr);
    size_t shadow_bytes = ftr_cfg.shadow_entries * sizeof(struct ftr_shadow);
    void *shadow = mmap(NULL, shadow_bytes, PROT_READ | PROT_WRITE,
                        MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (!thr || shadow == MAP_FAILED) {
        free(thr);
        if (shadow != MAP_FAILED) munmap(shadow, shadow_bytes);
        t->in_slow = 0;
        return;
    }
    thr->tid = (uint32_t)syscall(SYS_gettid);
    thr->tls = t;
    pthread_attr_t attr;
    if (pthread_getattr_np(pthread_self(), &attr) == 0) {
        void *lo;
        size_t size;
        if (pthread_attr_getstack(&attr, &lo, &size) == 0) {
            t->stack_lo = (uintptr_t)lo;
            t->stack_hi = (uintptr_t)lo + size;
        }
        pthread_attr_destroy(&attr);
    }
    t->grave = calloc(FTR_GRAVE_SIZE, sizeof *t->grave);
    pthread_getname_np(pthread_self(), thr->name, sizeof thr->name);
    t->thr = thr;
    t->shadow_base = t->top = shadow;
    t->shadow_end = t->shadow_base + ftr_cfg.shadow_entries;

    pthread_mutex_lock(&reg_lock);
    set_window(t, chunk_get_locked());
    thr->spare = chunk_get_locked();
    thr->next = threads;
    threads = thr;
    pthread_mutex_unlock(&reg_lock);
    pthread_setspecific(thread_key, thr);
    t->state = FTR_T_ACTIVE;
    t->in_slow = 0;
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

/* The current chunk is full. The spare takes its place first, without a lock, so that a
 * signal handler landing anywhere below still records (only the three stores of the switch
 * are a window: end = NULL makes every reservation fail until pos and end agree again). Then,
 * under the lock, the full chunk goes to the writer and a new spare is taken. */
void ftr_chunk_full_slow(void *unused)
{
    (void)unused;
    struct ftr_tls *t = &ftr_tls;
    struct ftr_thread *thr = t->thr;
    t->in_slow = 1;
    struct ftr_chunk *old = thr->cur, *next = thr->spare;
    if (next) {
        next->tid = thr->tid;
        next->flushed = 0;
        next->seq0 = thr->next_seq;
        thr->next_seq += next->nrec;
        __atomic_store_n(&t->end, NULL, __ATOMIC_RELAXED);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        __atomic_store_n(&t->pos, next->rec, __ATOMIC_RELAXED);
        __atomic_signal_fence(__ATOMIC_SEQ_CST);
        __atomic_store_n(&t->end, next->rec + next->nrec, __ATOMIC_RELAXED);
    }
    pthread_mutex_lock(&reg_lock);
    if (thr->held && t->filling <= 1) { /* the interrupted record is written by now */
        queue_full_locked(thr->held);
        thr->held = NULL;
    }
    if (old && t->filling > 1 && !thr->held)
        thr->held = old; /* a signal handler filled it while a record of ours was in flight */
    else if (old)
        queue_full_locked(old);
    if (next) {
        thr->cur = next;
        thr->spare = chunk_get_locked();
    } else {
        set_window(t, chunk_get_locked());
    }
    pthread_mutex_unlock(&reg_lock);
    ftr_wake_writer();
    report_lost(t);
    t->in_slow = 0;
}

void ftr_thread_off(void)
{
    struct ftr_tls *t = &ftr_tls;
    t->state = FTR_T_OFF;
}

int ftr_threads_init(void)
{
    return pthread_key_create(&thread_key, thread_destructor) == 0 ? 0 : -1;
}

struct ftr_chunk *ftr_take_full_chunks(void)
{
    pthread_mutex_lock(&reg_lock);
    struct ftr_chunk *c = full_head;
    full_head = NULL;
    full_tail = &full_head;
    pthread_mutex_unlock(&reg_lock);
    return c;
}

void ftr_release_chunk(struct ftr_chunk *c)
{
    memset(c->rec, 0, c->nrec * sizeof c->rec[0]);
    pthread_mutex_lock(&reg_lock);
    c->next = free_chunks;
    free_chunks = c;
    pthread_cond_broadcast(&pool_cond);
    pthread_mutex_unlock(&reg_lock);
}

void ftr_for_each_thread(void (*fn)(struct ftr_thread *, void *), void *arg)
{
    pthread_mutex_lock(&reg_lock);
    for (struct ftr_thread *thr = threads; thr; thr = thr->next)
        fn(thr, arg);
    pthread_mutex_unlock(&reg_lock);
}

void ftr_reap_threads(void (*ended)(const struct ftr_thread *))
{
    pthread_mutex_lock(&reg_lock);
    for (struct ftr_thread **p = &threads; *p;) {
        struct ftr_thread *thr = *p;
        if (thr->ended && !thr->cur) {
            *p = thr->next;
            if (ended) ended(thr);
            free(thr);
        } else {
            p = &thr->next;
        }
    }
    pthread_mutex_unlock(&reg_lock);
}

/* In a fork child, only the forking thread exists. Its chunk holds records of the parent,
 * which the parent's writer writes: mark them as taken. Every other chunk goes back to the
 * pool. The locks were held across fork (ftr_threads_prepare_fork): make them new. */
void ftr_threads_prepare_fork(void)
{
    pthread_mutex_lock(&reg_lock);
}
void ftr_threads_parent_fork(void)
{
    pthread_mutex_unlock(&reg_lock);
}

void ftr_threads_child_fork(void)
{
    pthread_mutex_init(&reg_lock, NULL);
    pthread_cond_init(&pool_cond, NULL);
    struct ftr_tls *t = &ftr_tls;
    struct ftr_chunk *keep = t->thr ? t->thr->cur : NULL;
    for (struct ftr_chunk *c = full_head, *next; c; c = next) {
        next = c->next;
        memset(c->rec, 0, c->nrec * sizeof c->rec[0]);
        c->next = free_chunks;
        free_chunks = c;
    }
    full_head = NULL;
    full_tail = &full_head;
    for (struct ftr_thread *thr = threads, *next; thr; thr = next) {
        next = thr->next;
        if (thr == t->thr) continue;
        if (thr->cur && thr->cur != keep) {
            memset(thr->cur->rec, 0, thr->cur->nrec * sizeof thr->cur->rec[0]);
            thr->cur->next = free_chunks;
            free_chunks = thr->cur;
        }
        if (thr->spare) {
            thr->spare->next = free_chunks;
            free_chunks = thr->spare;
        }
        if (thr->held) { /* the parent's records: the parent writes them */
            memset(thr->held->rec, 0, thr->held->nrec * sizeof thr->held->rec[0]);
            thr->held->next = free_chunks;
            free_chunks = thr->held;
        }
        free(thr);
    }
    threads = t->thr;
    if (t->thr && t->thr->held) { /* the parent's records: the parent writes them */
        struct ftr_chunk *h = t->thr->held;
        memset(h->rec, 0, h->nrec * sizeof h->rec[0]);
        h->next = free_chunks;
        free_chunks = h;
        t->thr->held = NULL;
    }
    if (t->thr) {
        t->thr->next = NULL;
        t->thr->tid = (uint32_t)syscall(SYS_gettid);
        if (keep) {
            keep->tid = t->thr->tid;
            struct ftr_rec *pos = t->pos;
            if (pos > keep->rec + keep->nrec) pos = keep->rec + keep->nrec;
            keep->flushed = (size_t)(pos - keep->rec);
        }
    }
}

static void sum_live(uint64_t *lost, uint64_t *overruns)
{
    pthread_mutex_lock(&reg_lock);
    *lost = lost_ended;
    *overruns = overruns_ended;
    for (struct ftr_thread *thr = threads; thr; thr = thr->next)
        if (!thr->ended && thr->tls) {
            *lost += thr->tls->lost;
            *overruns += thr->tls->overruns;
        }
    pthread_mutex_unlock(&reg_lock);
}

uint64_t ftr_lost_events(void)
{
    uint64_t l, o;
    sum_live(&l, &o);
    return l;
}

uint64_t ftr_overrun_calls(void)
{
    uint64_t l, o;
    sum_live(&l, &o);
    return o;
}
