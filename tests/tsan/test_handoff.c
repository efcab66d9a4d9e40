/*
 * test_handoff.c - the hand-off of records from traced threads to the writer thread, under
 * ThreadSanitizer (tests/tsan/CMakeLists.txt builds it with -fsanitize=thread).
 *
 * Built from the preload's own hooks.c, threads.c and writer.c and from formats/ftr_format.c;
 * this file stands in for the rest of libftrace.so: init.c's globals and its end sequence, the
 * trampolines (the hooks are called directly, with fake return-address slots on the calling
 * thread's stack; ftr_call_saving() is a plain call) and the descriptor guard's lock.
 *
 * Chunks are small (4 KiB: 256 records) and the writer flushes every millisecond, so that full
 * chunks handed off, partial flushes of the chunk being filled, chunks zeroed and reused, and
 * threads ending (with calls still open) all overlap with the writer. Then the trace file is
 * decoded with the format's reader and every thread's events are compared with what it did:
 *   workers     exactly their events, in order; the calls they left open closed as unwound
 *   main        exactly its events; two calls still open at the end (like an exit from inside)
 *   spinners    threads still recording while the writer stops: a well-nested prefix
 * Now and then (and last of all in main), a burst of calls runs as a signal handler would that
 * interrupted a record: the chunk it fills is held (threads.c) until the thread's next switch,
 * or to the end, where the writer must take it all the same.
 *
 * usage: test_handoff [--threshold] [--scale N]
 *   --threshold  a --threshold run (short calls are taken back: hooks.c rewind_short(), and the
 *                writer leaves young records alone); events are then checked for nesting only
 *   --scale N    N times the work (soak runs)
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "tracer.h"
#include "values.h"

/* ---- what the rest of libftrace.so provides to hooks.c, threads.c and writer.c (the
 * global state: state.c) ---- */
struct ftr_process_info ftr_process;
uint64_t ftr_start_raw_ns, ftr_start_cal_tsc;
/* values.h: no site records values here */
const struct ftr_valprog *ftr_valprogs;
uint16_t *ftr_site_prog;
size_t ftr_capture_args(const struct ftr_valprog *p, const uintptr_t *regs, const uintptr_t *slot,
                        uint8_t *buf)
{
    (void)p, (void)regs, (void)slot, (void)buf;
    abort();
}
size_t ftr_capture_ret(const struct ftr_valprog *p, const uintptr_t *ret, uint8_t *buf)
{
    (void)p, (void)ret, (void)buf;
    abort();
}
uint32_t ftr_xsave_size;
void ftr_slow_area_free(void) {}
int ftr_create_own_thread(pthread_t *th, int detached, void *(*fn)(void *), void *arg)
{
    int rc = pthread_create(th, NULL, fn, arg);
    if (!rc && detached) pthread_detach(*th);
    return rc;
}
__thread uint32_t ftr_slow_busy;

void ftr_tramp_return(void)
{
    abort();
} /* only its address is used */
void ftr_tramp_sigret(void)
{
    abort();
} /* only its address is used */
__thread void *ftr_slow_area;
void ftr_slow_nothing(void *arg)
{
    (void)arg;
}
void ftr_call_saving(void (*fn)(void *), void *arg)
{
    fn(arg);
}

static pthread_mutex_t fd_lock = PTHREAD_MUTEX_INITIALIZER;
void ftr_fd_lock(void)
{
    pthread_mutex_lock(&fd_lock);
}
void ftr_fd_unlock(void)
{
    pthread_mutex_unlock(&fd_lock);
}
atomic_uint ftr_fd_moves;
void ftr_name_at_setup(struct ftr_thread *r)
{
    (void)r;
}
void ftr_fd_protect(int *fd)
{
    (void)fd;
}
void ftr_fd_unprotect(int *fd)
{
    (void)fd;
}
int ftr_fd_high(int fd)
{
    return fd;
}
void ftr_control_poll(void) {}
/* no recorder process here: the writer thread writes (recorder.h) */
int ftr_recorder_join(int fd)
{
    (void)fd;
    return -1;
}
void ftr_recorder_meta(const struct ftr_buf *b)
{
    (void)b;
}
int ftr_recorder_end(const struct ftr_end_info *e, int from_signal)
{
    (void)e, (void)from_signal;
    return 0;
}
int ftr_recorder_child_fork(void)
{
    return -1;
}
int ftr_recorder_resume(void)
{
    return -1;
}
const char *ftr_recorder_error(void)
{
    return "no recorder in this test";
}
void ftr_output_lock(void) {}
void ftr_output_release(void) {}
void ftr_program_watch(int open_it)
{
    (void)open_it;
}
int ftr_program_gone(int *leader_gone)
{
    *leader_gone = 0;
    return 0;
}
const struct ftr_end_info *ftr_end_orphaned(void)
{
    abort();
}
void ftr_orphan_exit(void)
{
    abort();
}
int ftr_sigguard_real_sigmask(int how, const sigset_t *set, sigset_t *old)
{
    return pthread_sigmask(how, set, old);
}

/* ---- the test ---- */
#define NWORKERS 6
#define NSPINNERS 2
#define SITES 8     /* sites per thread */
#define MAXD 10     /* call depth of the workers' trees */
#define OPEN_MAIN 2 /* calls main leaves open at the end */

static int threshold_mode;
static int scale = 1;
static int failures;

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        fprintf(stderr, "test_handoff: FAIL: " __VA_ARGS__);                                       \
        fputc('\n', stderr);                                                                       \
        if (++failures > 20) exit(1);                                                              \
    } while (0)

struct ctx {
    int idx; /* 0 = main, then workers, then spinners */
    int spinner;
    int rounds;      /* call trees to run */
    int open_at_end; /* calls left open when the thread ends */
    uint32_t tid;
    uint32_t site_base;
    uint64_t rng;
    uintptr_t *slots; /* fake return-address slots, on the thread's own stack */
    uint32_t *want;   /* the heads it recorded, in order */
    size_t nwant, capwant;
};

static struct ctx ctxs[1 + NWORKERS + NSPINNERS];
static atomic_int spinners_stop, spinners_running;

static uint32_t rnd(struct ctx *x)
{
    x->rng ^= x->rng << 13;
    x->rng ^= x->rng >> 7;
    x->rng ^= x->rng << 17;
    return (uint32_t)(x->rng >> 11);
}

static void expect(struct ctx *x, uint32_t site, unsigned kind)
{
    if (x->nwant == x->capwant) {
        x->capwant = x->capwant ? 2 * x->capwant : 4096;
        x->want = realloc(x->want, x->capwant * sizeof *x->want);
        if (!x->want) abort();
    }
    x->want[x->nwant++] = ftr_rec_head(site, kind);
}

/* A traced function's entry at call depth d, as a trampoline would run it. Deeper calls have
 * their slots lower on the stack, like real frames. */
static uintptr_t *enter(struct ctx *x, int d, uint32_t site)
{
    uintptr_t *slot = &x->slots[MAXD + 2 - d];
    *slot = 0x10000u + ((uintptr_t)x->idx << 8) + (uintptr_t)d; /* the "return address" */
    ftr_hook_entry(site, slot, NULL);
    if (*slot != (uintptr_t)ftr_tramp_return) {
        /* not hooked: only once recording stopped, when the hooks leave new calls alone */
        if (!x->spinner) FAIL("thread %d: entry at depth %d not hooked", x->idx, d);
        return slot;
    }
    expect(x, site, FTR_EV_ENTRY);
    return slot;
}

static void leave(struct ctx *x, int d, uintptr_t *slot, uint32_t site)
{
    if (*slot != (uintptr_t)ftr_tramp_return)
        return; /* the "function" returns straight to its caller */
    uintptr_t ret = ftr_hook_exit((uintptr_t)slot + sizeof *slot, NULL);
    if (ret != 0x10000u + ((uintptr_t)x->idx << 8) + (uintptr_t)d)
        FAIL("thread %d: exit at depth %d returned %#lx", x->idx, d, (unsigned long)ret);
    expect(x, site, FTR_EV_EXIT);
}

static void pause_us(unsigned us)
{
    struct timespec ts = {0, (long)us * 1000};
    nanosleep(&ts, NULL);
}

static void call_tree(struct ctx *x, int d)
{
    uint32_t site = x->site_base + rnd(x) % SITES;
    uintptr_t *slot = enter(x, d, site);
    unsigned kids = d < MAXD ? rnd(x) % (d < 2 ? 4 : 3) : 0;
    for (unsigned k = 0; k < kids; k++)
        call_tree(x, d + 1);
    if (rnd(x) % 1024 == 0)
        pause_us(50 + rnd(x) % 400); /* a flush period passes while calls are open */
    leave(x, d, slot, site);
}

/* 150 calls (300 records: more than a chunk holds) as from a signal handler that interrupted a
 * record of this thread being written (hooks.c counts such records in filling): the chunk it
 * fills is held, not handed off, at its switch. */
static void held_burst(struct ctx *x, int d)
{
    ftr_tls.filling++;
    for (int i = 0; i < 150; i++) {
        uint32_t site = x->site_base + (uint32_t)i % SITES;
        leave(x, d, enter(x, d, site), site);
    }
    ftr_tls.filling--;
}

static void *thread_main(void *arg)
{
    struct ctx *x = arg;
    uintptr_t slots[MAXD + 4];
    x->slots = slots;
    x->tid = (uint32_t)syscall(SYS_gettid);
    if (x->spinner) {
        /* still recording while the writer stops; what it records after is not written */
        for (unsigned i = 0; !atomic_load_explicit(&spinners_stop, memory_order_relaxed); i++) {
            uintptr_t *a = enter(x, 0, x->site_base);
            uintptr_t *b = enter(x, 1, x->site_base + 1);
            leave(x, 1, b, x->site_base + 1);
            leave(x, 0, a, x->site_base);
            if (i == 100) atomic_fetch_add(&spinners_running, 1);
        }
        return NULL;
    }
    for (int r = 0; r < x->rounds; r++) {
        call_tree(x, 0);
        if (r % 64 == 0) sched_yield();
        if (rnd(x) % 256 == 0) held_burst(x, 0);
    }
    /* Calls still open when the thread ends: its destructor closes them as unwound. */
    uint32_t open[MAXD];
    for (int d = 0; d < x->open_at_end; d++) {
        open[d] = x->site_base + (uint32_t)d;
        enter(x, d, open[d]);
    }
    for (int d = x->open_at_end - 1; d >= 0; d--)
        expect(x, open[d], FTR_EV_UNWIND);
    return NULL;
}

/* ---- reading the file back ---- */
struct chunk {
    uint32_t tid;
    uint64_t tsc_first, tsc_last;
    size_t order;
    struct ftr_event *ev;
    size_t n;
};

static struct chunk *chunks;
static size_t nchunks;
static uint64_t decoded_events;

static int cmp_chunk(const void *a, const void *b)
{
    const struct chunk *x = a, *y = b;
    if (x->tid != y->tid) return x->tid < y->tid ? -1 : 1;
    if (x->tsc_first != y->tsc_first) return x->tsc_first < y->tsc_first ? -1 : 1;
    return x->order < y->order ? -1 : x->order > y->order;
}

static void read_trace(const char *path, struct ftr_end_info *end, int *have_end)
{
    struct ftr_reader *r;
    int rc = ftr_reader_open(path, &r);
    if (rc != FTR_OK) {
        FAIL("cannot read %s: %s", path, ftr_strerror(rc));
        exit(1);
    }
    struct ftr_chunk_hdr h;
    struct ftr_buf pl = {0};
    size_t k = 0;
    *have_end = 0;
    while ((rc = ftr_reader_next(r, &h, NULL)) == FTR_OK) {
        if (ftr_reader_payload(r, &pl) != FTR_OK) {
            FAIL("chunk %zu: payload does not decode", k);
            continue;
        }
        if (*have_end) FAIL("chunk %zu (%s) after the END chunk", k, ftr_chunk_type_name(h.type));
        if (k == 0 && h.type != FTR_CHUNK_PROCESS)
            FAIL("first chunk is %s, not process", ftr_chunk_type_name(h.type));
        if (h.pid != ftr_g.pid) FAIL("chunk %zu: pid %u", k, h.pid);
        if (h.type == FTR_CHUNK_END) {
            if (ftr_dec_end(pl.data, pl.len, end) != FTR_OK) FAIL("END chunk does not decode");
            *have_end = 1;
        } else if (h.type == FTR_CHUNK_EVENTS) {
            struct ftr_ev_iter it;
            if (ftr_dec_events_begin(&h, pl.data, pl.len, &it) != FTR_OK) {
                FAIL("chunk %zu: bad events payload", k);
                continue;
            }
            chunks = realloc(chunks, (nchunks + 1) * sizeof *chunks);
            struct chunk *c = &chunks[nchunks++];
            *c = (struct chunk){h.tid, h.tsc_first, h.tsc_last, k, NULL, 0};
            size_t cap = 0;
            struct ftr_event ev;
            int n;
            while ((n = ftr_dec_events_next(&it, &ev)) == 1) {
                if (c->n == cap) {
                    cap = cap ? 2 * cap : 256;
                    c->ev = realloc(c->ev, cap * sizeof *c->ev);
                }
                c->ev[c->n++] = ev;
            }
            if (n < 0) FAIL("chunk %zu: events corrupt", k);
            decoded_events += c->n;
        }
        k++;
    }
    if (rc != FTR_E_EOF) FAIL("reading the trace: %s", ftr_strerror(rc));
    ftr_buf_free(&pl);
    ftr_reader_close(r);
    qsort(chunks, nchunks, sizeof *chunks, cmp_chunk);
}

/* The events of one thread, its chunks in time order (as readers merge them). */
static struct ftr_event *thread_events(uint32_t tid, size_t *n)
{
    size_t total = 0;
    for (size_t i = 0; i < nchunks; i++)
        total += chunks[i].tid == tid ? chunks[i].n : 0;
    struct ftr_event *ev = malloc((total + 1) * sizeof *ev);
    size_t m = 0;
    uint64_t last = 0;
    for (size_t i = 0; i < nchunks; i++) {
        if (chunks[i].tid != tid) continue;
        if (chunks[i].tsc_first < last) FAIL("tid %u: chunks overlap in time", tid);
        last = chunks[i].tsc_last;
        memcpy(ev + m, chunks[i].ev, chunks[i].n * sizeof *ev);
        m += chunks[i].n;
    }
    *n = m;
    return ev;
}

/* Every exit closes the innermost open call; @return the calls left open. */
static size_t check_nesting(const struct ctx *x, const struct ftr_event *ev, size_t n)
{
    uint32_t stack[4 * MAXD];
    size_t depth = 0;
    uint64_t tsc = 0;
    for (size_t i = 0; i < n; i++) {
        if (ev[i].tsc < tsc) FAIL("thread %d: event %zu goes back in time", x->idx, i);
        tsc = ev[i].tsc;
        if (ev[i].site < x->site_base || ev[i].site >= x->site_base + SITES) {
            FAIL("thread %d: event %zu: site %u is not one of its own", x->idx, i, ev[i].site);
            return depth;
        }
        if (ev[i].kind == FTR_EV_ENTRY) {
            if (depth == sizeof stack / sizeof stack[0]) {
                FAIL("thread %d: nesting too deep at event %zu", x->idx, i);
                return depth;
            }
            stack[depth++] = ev[i].site;
        } else if (ev[i].kind == FTR_EV_EXIT || ev[i].kind == FTR_EV_UNWIND) {
            if (!depth || stack[depth - 1] != ev[i].site) {
                FAIL("thread %d: event %zu (%s of site %u) closes no open call", x->idx, i,
                     ftr_event_kind_name(ev[i].kind), ev[i].site);
                return depth;
            }
            depth--;
        } else {
            FAIL("thread %d: event %zu: unexpected %s event", x->idx, i,
                 ftr_event_kind_name(ev[i].kind));
        }
    }
    return depth;
}

static void check_thread(const struct ctx *x)
{
    size_t n;
    struct ftr_event *ev = thread_events(x->tid, &n);
    size_t open = check_nesting(x, ev, n);
    if (n == 0) FAIL("thread %d (tid %u): no events", x->idx, x->tid);
    if (x->spinner || threshold_mode) {
        if (!x->spinner && open != (size_t)(x->idx == 0 ? OPEN_MAIN : 0))
            FAIL("thread %d: %zu calls open at the end", x->idx, open);
        if (n > x->nwant)
            FAIL("thread %d: %zu events, more than the %zu it recorded", x->idx, n, x->nwant);
        free(ev);
        return;
    }
    if (n != x->nwant)
        FAIL("thread %d (tid %u): %zu events in the file, %zu recorded", x->idx, x->tid, n,
             x->nwant);
    for (size_t i = 0; i < n && i < x->nwant; i++)
        if (ftr_rec_head(ev[i].site, ev[i].kind) != x->want[i]) {
            FAIL("thread %d: event %zu is %s of site %u, expected %s of site %u", x->idx, i,
                 ftr_event_kind_name(ev[i].kind), ev[i].site, ftr_event_kind_name(x->want[i] & 3),
                 x->want[i] >> 2);
            break;
        }
    free(ev);
}

static uint64_t now_ns(clockid_t clk)
{
    struct timespec ts;
    clock_gettime(clk, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int main(int argc, char **argv)
{
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--threshold"))
            threshold_mode = 1;
        else if (!strcmp(argv[i], "--scale") && i + 1 < argc)
            scale = atoi(argv[++i]);
        else {
            fprintf(stderr, "usage: test_handoff [--threshold] [--scale N]\n");
            return 2;
        }
    }
    if (scale < 1) scale = 1;
    alarm(120 * (unsigned)scale); /* a lost wake-up must fail the test, not hang it */

    char path[] = "/tmp/test_handoff-XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) {
        perror("mkstemp");
        return 1;
    }

    /* init.c's part: configuration (FTRACE_BUFSIZE=4 FTRACE_FLUSH_MS=1), clocks, file header */
    ftr_g.fd = fd;
    ftr_g.pid = (uint32_t)getpid();
    ftr_cfg.chunk_bytes = 4096;
    ftr_cfg.flush_ms = 1;
    ftr_cfg.zstd_level = 1;
    ftr_cfg.shadow_entries = 1024;
    ftr_g.start_tsc = ftr_rdtsc();
    ftr_g.start_ns = now_ns(CLOCK_REALTIME);
    ftr_start_raw_ns = now_ns(CLOCK_MONOTONIC_RAW);
    ftr_start_cal_tsc = ftr_g.start_tsc;
    ftr_process.pid = ftr_g.pid;
    ftr_process.session_id = 1;
    ftr_process.start_realtime_ns = ftr_g.start_ns;
    ftr_process.start_tsc = ftr_g.start_tsc;
    ftr_process.exe = "test_handoff";
    struct ftr_buf hdr = {0};
    if (ftr_enc_file_header(&hdr) != FTR_OK || write(fd, hdr.data, hdr.len) != (ssize_t)hdr.len) {
        perror("writing the file header");
        return 1;
    }
    ftr_buf_free(&hdr);
    if (threshold_mode) /* about a microsecond: many calls are shorter (settings.c) */
        ftr_hot.threshold_ticks = ftr_g.holdback_ticks = 2000;
    char err[256];
    if (ftr_threads_init() < 0 || ftr_writer_start(err, sizeof err) < 0) {
        fprintf(stderr, "test_handoff: cannot start: %s\n", err);
        return 1;
    }
    atomic_store(&ftr_hot.recording, 1);
    ftr_g.ready = 1;

    /* main: two calls that stay open, a few trees */
    struct ctx *m = &ctxs[0];
    uintptr_t main_slots[MAXD + 4];
    m->slots = main_slots;
    m->tid = (uint32_t)syscall(SYS_gettid);
    m->site_base = 1;
    m->rng = 0x9e3779b97f4a7c15u;
    for (int d = 0; d < OPEN_MAIN; d++)
        enter(m, d, m->site_base + (uint32_t)d);

    pthread_t th[NWORKERS + NSPINNERS];
    for (int i = 1; i <= NWORKERS + NSPINNERS; i++) {
        struct ctx *x = &ctxs[i];
        x->idx = i;
        x->spinner = i > NWORKERS;
        x->site_base = 1 + (uint32_t)i * 100;
        x->rng = 0x9e3779b97f4a7c15u * (uint64_t)(i + 1);
        x->rounds = 1500 * scale * (1 + i % 3);
        x->open_at_end = i % 3; /* 0, 1 or 2 calls closed by the thread's destructor */
    }
    /* workers start one after another, while the writer is busy with the others */
    for (int i = 1; i <= NWORKERS; i++) {
        if (pthread_create(&th[i - 1], NULL, thread_main, &ctxs[i])) {
            perror("pthread_create");
            return 1;
        }
        pause_us(300);
    }
    for (int i = 0; i < 50 * scale; i++) {
        /* main's trees run at depth OPEN_MAIN, inside its open calls */
        uint32_t site = m->site_base + 2 + (uint32_t)i % 4;
        uintptr_t *slot = enter(m, OPEN_MAIN, site);
        uintptr_t *inner = enter(m, OPEN_MAIN + 1, site + 1);
        leave(m, OPEN_MAIN + 1, inner, site + 1);
        leave(m, OPEN_MAIN, slot, site);
    }
    held_burst(m, OPEN_MAIN); /* its chunk held at the end: the writer's last pass takes it */
    for (int i = 0; i < NWORKERS; i++)
        pthread_join(th[i], NULL);
    for (int i = NWORKERS; i < NWORKERS + NSPINNERS; i++)
        pthread_create(&th[i], NULL, thread_main, &ctxs[i + 1]);
    while (atomic_load(&spinners_running) < NSPINNERS)
        pause_us(100);
    pause_us(2000);

    /* The end, as init.c's ftr_finish() runs it while other threads still record. */
    atomic_store(&ftr_hot.recording, 0);
    ftr_tls.in_slow = 1;
    struct ftr_end_info end = {.tsc = ftr_rdtsc(), .how = FTR_END_EXIT};
    end.lost = ftr_lost_events();
    end.overruns = ftr_overrun_calls();
    ftr_writer_stop(&end);
    atomic_store(&spinners_stop, 1);
    for (int i = NWORKERS; i < NWORKERS + NSPINNERS; i++)
        pthread_join(th[i], NULL);

    struct ftr_end_info got;
    int have_end;
    read_trace(path, &got, &have_end);
    if (!have_end)
        FAIL("no END chunk");
    else if (got.events != decoded_events || got.lost || got.overruns)
        FAIL("END says %llu events (%llu lost, %llu overruns), the file holds %llu",
             (unsigned long long)got.events, (unsigned long long)got.lost,
             (unsigned long long)got.overruns, (unsigned long long)decoded_events);
    if (ftr_writer_failed()) FAIL("the writer failed: %s", strerror(ftr_writer_failed()));
    for (int i = 0; i <= NWORKERS + NSPINNERS; i++)
        check_thread(&ctxs[i]);
    size_t tids = 0;
    for (size_t i = 0; i < nchunks; i++)
        tids += i == 0 || chunks[i].tid != chunks[i - 1].tid;
    if (tids != 1 + NWORKERS + NSPINNERS)
        FAIL("events of %zu threads in the file, expected %d", tids, 1 + NWORKERS + NSPINNERS);

    unlink(path);
    printf("test_handoff%s: %llu events of %zu threads in %zu EVENTS chunks: %s\n",
           threshold_mode ? " --threshold" : "", (unsigned long long)decoded_events, tids, nchunks,
           failures ? "FAILED" : "ok");
    return failures ? 1 : 0;
}
