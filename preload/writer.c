/*
 * writer.c - the writer thread: turns chunks of hot-path records into compressed EVENTS chunks
 * (formats/) and appends them, with the metadata chunks, to the trace file.
 *
 * It wakes when a chunk fills (ftr_wake_writer) and every flush period, when it also takes the
 * filled part of every thread's current chunk, so that a killed process loses at most one
 * period. It never traces (its thread state is FTR_T_OFF), blocks every signal, and owns the
 * file descriptor: on a write error it stops writing, counts what it could not write, and the
 * program carries on.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "sigguard.h"
#include "tracer.h"

uint32_t ftr_writer_tid;

static pthread_t writer_thread;
static pthread_mutex_t w_lock = PTHREAD_MUTEX_INITIALIZER; /* w_meta */
/* Wake-ups: bumped, then FUTEX_WAKE. Lock-free and async-signal-safe, so that a traced thread
 * whose chunk is full, a signal handler or _exit() can wake the writer from anywhere. */
static atomic_uint w_seq;
static int w_running;
static atomic_int w_stop;     /* read outside w_lock too */
static atomic_int w_sigstop;  /* a fatal signal asks for the final flush (no locks there) */
static atomic_int w_done;     /* the END chunk is written */
static struct ftr_buf w_meta; /* pre-encoded metadata chunks waiting to be written */
static const struct ftr_end_info *w_end; /* set by ftr_writer_stop */

static struct ftr_enc *enc;
static struct ftr_buf out;      /* encoded chunks waiting for write() */
static struct ftr_rec *scratch; /* copy of a partial chunk, encoded outside reg_lock */
static size_t scratch_n;
static int write_failed;
static uint64_t bytes_written, bytes_dropped;
static _Atomic uint64_t events_total, calls_total;
static int process_written;
static uint64_t passes;

static uint64_t end_lost, end_lost_calls; /* events and calls lost, as the END chunk says */

uint64_t ftr_writer_end_lost(void)
{
    return end_lost;
}

uint64_t ftr_writer_end_lost_calls(void)
{
    return end_lost_calls;
}

uint64_t ftr_writer_passes(void)
{
    return __atomic_load_n(&passes, __ATOMIC_ACQUIRE);
}

uint64_t ftr_writer_bytes(void)
{
    return bytes_written;
}
uint64_t ftr_writer_events(void)
{
    return events_total;
}
uint64_t ftr_writer_calls(void)
{
    return calls_total;
}
int ftr_writer_failed(void)
{
    return write_failed;
}

void ftr_wake_writer(void)
{
    atomic_fetch_add(&w_seq, 1);
    syscall(SYS_futex, &w_seq, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

void ftr_writer_drop_meta(void)
{
    pthread_mutex_lock(&w_lock);
    w_meta.len = 0;
    pthread_mutex_unlock(&w_lock);
}

void ftr_writer_add_meta(const struct ftr_buf *chunks)
{
    pthread_mutex_lock(&w_lock);
    ftr_buf_append(&w_meta, chunks->data, chunks->len);
    pthread_mutex_unlock(&w_lock);
    ftr_wake_writer();
}

/* A MARK chunk, from the control thread (never from a hook): encoded with an encoder of its
 * own (the writer's is the writer thread's), queued with the metadata. */
static struct ftr_enc *mark_enc;

void ftr_writer_mark(unsigned what, uint64_t tsc, uint64_t value, const char *text)
{
    struct ftr_mark_info mi = {.tsc = tsc, .what = what, .value = value, .text = text};
    pthread_mutex_lock(&w_lock);
    if (!mark_enc) mark_enc = ftr_enc_new(ftr_cfg.zstd_level);
    if (mark_enc) ftr_enc_mark(mark_enc, ftr_g.pid, &mi, &w_meta);
    pthread_mutex_unlock(&w_lock);
    ftr_wake_writer();
}

/* The trace file's identity, taken when the writer starts: a raw close_range() or close() system
 * call (fdguard.c sees only libc's) can free our number, and the program's next open() takes it:
 * then we must not write into the program's file. */
static dev_t trace_dev;
static ino_t trace_ino;

static void remember_trace_file(void)
{
    struct stat st;
    if (fstat(ftr_g.fd, &st) == 0) {
        trace_dev = st.st_dev;
        trace_ino = st.st_ino;
    }
}

static int still_ours(void)
{
    struct stat st;
    return fstat(ftr_g.fd, &st) == 0 && st.st_dev == trace_dev && st.st_ino == trace_ino;
}

static void flush_out(void)
{
    size_t off = 0;
    ftr_fd_lock();
    if (!write_failed && out.len && !still_ours()) {
        /* The number is not ours any more: never write there. Open the file again (appending
         * whole chunks, as every process of the session does), out of the program's way. */
        int fd = open(ftr_cfg.output, O_WRONLY | O_APPEND | O_CLOEXEC);
        int high = ftr_fd_high(fd);
        struct stat st;
        if (high >= 0 && fstat(high, &st) == 0 && st.st_dev == trace_dev &&
            st.st_ino == trace_ino) {
            ftr_g.fd = high;
            ftr_output_lock(); /* the lost description's lock went with it */
        } else {
            if (high >= 0) close(high);
            write_failed = EBADF; /* stop, count what is lost */
        }
    }
    while (!write_failed && off < out.len) {
        ssize_t n = write(ftr_g.fd, out.data + off, out.len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) {
            write_failed = n < 0 ? errno : ENOSPC;
            break;
        }
        off += (size_t)n;
        bytes_written += (uint64_t)n;
    }
    ftr_fd_unlock();
    bytes_dropped += out.len - off;
    out.len = 0;
}

/* r[0] is slot seq of the thread's stream: the header's seq orders the thread's pieces for the
 * reader (neither their time nor their place in the file does: a signal handler's records may
 * precede, in the slots, a record whose clock was read before it ran). */
static void encode(uint32_t tid, uint64_t seq, const struct ftr_rec *r, size_t n)
{
    if (!n) return;
    ftr_enc_events_at(enc, ftr_g.pid, tid, seq, r, n, &out);
    uint64_t ev, calls; /* counted by the encoder, in its one pass */
    ftr_enc_last_counts(enc, &ev, &calls);
    events_total += ev;
    calls_total += calls;
}

#define CALIBRATION_NS 2000000 /* 2 ms against CLOCK_MONOTONIC_RAW: about 1e-4 relative error */

static uint64_t raw_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* The PROCESS chunk comes first in every process's (and exec'd image's) stream, so that a
 * reader attributes the chunks after it to this image. The TSC frequency is measured against
 * CLOCK_MONOTONIC_RAW over the time since the calibration base (init.c: the start of the first
 * image of this process; a fork child keeps its parent's), waiting on this thread, not the
 * program's, until that is at least CALIBRATION_NS, or until the image ends (a shorter measure
 * then). A fork child whose parent has measured takes the parent's figure: the same TSC. */
static void write_process_chunk(void)
{
    extern uint64_t ftr_start_raw_ns, ftr_start_cal_tsc;
    extern struct ftr_process_info ftr_process;
    if (!ftr_g.tsc_hz) {
        for (uint64_t elapsed; (elapsed = raw_ns() - ftr_start_raw_ns) < CALIBRATION_NS &&
                               !atomic_load(&w_stop) && !atomic_load(&w_sigstop);) {
            unsigned seq = atomic_load(&w_seq); /* ftr_writer_stop's wake-up ends the wait */
            struct timespec d = {0, (long)(CALIBRATION_NS - elapsed)};
            syscall(SYS_futex, &w_seq, FUTEX_WAIT_PRIVATE, seq, &d, NULL, 0);
        }
        uint64_t now_ns = raw_ns(), now_tsc = ftr_rdtsc();
        if (now_ns > ftr_start_raw_ns)
            ftr_g.tsc_hz = (uint64_t)((double)(now_tsc - ftr_start_cal_tsc) * 1e9 /
                                      (double)(now_ns - ftr_start_raw_ns));
    }
    ftr_process.tsc_hz = ftr_g.tsc_hz;
    ftr_process.tsc_calibration = ftr_hot.clock_mono ? FTR_TSC_CAL_MONOTONIC : FTR_TSC_CAL_MEASURED;
    ftr_enc_process(enc, &ftr_process, &out);
    process_written = 1;
}

/* A fork child's image begins lazily: its PROCESS, MODULE and SITES chunks and its control
 * server wait until it has recorded something of its own beyond the frames it re-entered at
 * the fork (ftr_reopen_frames); a child that never does (it execs, or _exits, at once) writes
 * nothing at all. Those frames filled its forking thread's chunk up to quiet_pos. */
static int w_lazy;
static void (*lazy_describe)(struct ftr_buf *out); /* MODULE and SITES chunks of every module */
static uint32_t quiet_tid;
static struct ftr_chunk *quiet_chunk;
static struct ftr_rec *quiet_pos;

void ftr_writer_lazy_child(void (*describe)(struct ftr_buf *out))
{
    struct ftr_tls *t = &ftr_tls;
    w_lazy = 1;
    lazy_describe = describe;
    quiet_tid = t->thr ? t->thr->tid : 0;
    quiet_chunk = t->thr ? t->thr->cur : NULL;
    quiet_pos = t->pos;
}

static void look_for_news(struct ftr_thread *thr, void *arg)
{
    int *news = arg;
    if (thr->ended || thr->tid != quiet_tid || thr->cur != quiet_chunk || thr->held ||
        __atomic_load_n(&thr->tls->pos, __ATOMIC_ACQUIRE) != quiet_pos)
        *news = 1;
}

/* Writes the PROCESS chunk, when this image has anything to say. @return whether it has. */
static int begin_image(void)
{
    if (process_written) return 1;
    int news = !w_lazy;
    if (!news) ftr_for_each_thread(look_for_news, &news);
    if (!news) return 0;
    if (!enc && !(enc = ftr_enc_new(ftr_cfg.zstd_level))) {
        write_failed = ENOMEM; /* nothing will be written: the summary says so */
        return 0;
    }
    write_process_chunk();
    if (w_lazy && lazy_describe) {
        struct ftr_buf meta = {0};
        lazy_describe(&meta);
        ftr_buf_append(&out, meta.data, meta.len);
        ftr_buf_free(&meta);
    }
    flush_out();
    ftr_control_poll(); /* a fork child's server starts here */
    return 1;
}

/* Takes the records of chunk c the writer has not taken yet, up to limit, in slot order: up to
 * the first slot not filled (a record being written: what follows waits for it), or, past such
 * slots, every filled one (skip_holes: the last pass, when nothing later could take them; the
 * encoder skips a hole). */
static void take_records(struct ftr_chunk *c, struct ftr_rec *limit, int skip_holes)
{
    /* With a threshold, a short call's entry may still be taken back: leave records younger
     * than twice the threshold to the thread (hooks.c, rewind_short). */
    uint64_t hold = __atomic_load_n(&ftr_g.holdback_ticks, __ATOMIC_ACQUIRE);
    uint64_t young = hold && !atomic_load(&w_stop) ? ftr_rdtsc() - 2 * hold : UINT64_MAX;
    size_t from = c->flushed, i = from, n = 0;
    while (c->rec + i < limit && n < scratch_n) {
        struct ftr_rec *r = &c->rec[i];
        uint32_t head = __atomic_load_n(&r->head, __ATOMIC_ACQUIRE);
        if (head == 0 && !skip_holes) break;
        uint64_t tsc = __atomic_load_n(&r->tsc, __ATOMIC_RELAXED);
        if (head && tsc >= young) break;
        uint32_t arg = __atomic_load_n(&r->arg, __ATOMIC_RELAXED);
        if (head == ftr_rec_head(FTR_SP_VALUES, FTR_EV_SPECIAL)) {
            /* a value list is taken whole: its payload slots (head 0) with it */
            size_t ns = ftr_values_slots(arg);
            if (c->rec + i + 1 + ns > limit || n + 1 + ns > scratch_n) break;
            scratch[n++] = (struct ftr_rec){tsc, head, arg};
            for (size_t k = 1; k <= ns; k++)
                scratch[n++] =
                    (struct ftr_rec){__atomic_load_n(&c->rec[i + k].tsc, __ATOMIC_RELAXED), 0,
                                     __atomic_load_n(&c->rec[i + k].arg, __ATOMIC_RELAXED)};
            i += 1 + ns;
            continue;
        }
        scratch[n++] = (struct ftr_rec){tsc, head, arg};
        i++;
    }
    /* Claim, then check that no entry among them was taken back meanwhile (hooks.c,
     * rewind_short: the other half of the protocol). A slot taken back and written again
     * shows as a different head or time. */
    __atomic_store_n(&c->flushed, i, __ATOMIC_SEQ_CST);
    if (hold) {
        for (size_t k = from; k < i; k++) {
            const struct ftr_rec *r = &c->rec[k];
            if (scratch[k - from].head &&
                (__atomic_load_n(&r->head, __ATOMIC_SEQ_CST) != scratch[k - from].head ||
                 __atomic_load_n(&r->tsc, __ATOMIC_RELAXED) != scratch[k - from].tsc)) {
                n = k - from;
                __atomic_store_n(&c->flushed, k, __ATOMIC_SEQ_CST);
                break;
            }
        }
    }
    /* encoded right away: under reg_lock, but a partial flush is once per period */
    encode(c->tid, c->seq0 + from, scratch, n);
}

/* A live thread's chunks, as far as they are filled: the one it holds back (full, but for a
 * record a signal handler interrupted: it goes to the writer at the thread's next switch,
 * which may never come), then its current one, up to its write position. In the last pass
 * (final), the records past a hole are taken too, in both: its record never comes (the
 * handler ended the process, or jumped out of the hook and left the slot unfilled for good:
 * hostile-jmpprof), or comes too late for any pass. */
static void take_partial(struct ftr_thread *thr, void *arg)
{
    int final = *(const int *)arg;
    if (__atomic_load_n(&thr->ended, __ATOMIC_ACQUIRE)) return;
    /* threads.c clears these before it queues the chunk: a chunk read here is not released */
    struct ftr_chunk *held = __atomic_load_n(&thr->held, __ATOMIC_ACQUIRE);
    struct ftr_chunk *c = __atomic_load_n(&thr->cur, __ATOMIC_ACQUIRE);
    for (; held; held = __atomic_load_n(&held->held_next, __ATOMIC_RELAXED))
        if (held != c) take_records(held, held->rec + held->nrec, final);
    if (!c) return;
    struct ftr_rec *limit = ftr_thread_pos(thr);
    if (!limit) return; /* it ended meanwhile: its chunks are queued */
    struct ftr_rec *end = c->rec + c->nrec;
    if (limit > end || limit < c->rec) limit = end;
    take_records(c, limit, final);
}

/* THREAD chunks name the threads: when one has ended (its final name), and at the end for
 * those still running (the name of their first traced call: see thread_alive). */
static void thread_chunk(uint32_t tid, uint32_t what, const char *name)
{
    struct ftr_thread_info ti = {.tid = tid, .what = what, .tsc = ftr_rdtsc(), .name = name};
    ftr_enc_thread(enc, ftr_g.pid, &ti, &out);
}

static void thread_ended(const struct ftr_thread *thr)
{
    thread_chunk(thr->tid, 2, thr->name);
}

/* A thread still running is named as it was at its first traced call: reading its name now
 * would open /proc/self/task/TID/comm, a descriptor that takes the lowest free number while
 * the program's other threads may be about to dup2() onto it (see ftr_program_watch). */
static void thread_alive(struct ftr_thread *thr, void *arg)
{
    (void)arg;
    if (__atomic_load_n(&thr->ended, __ATOMIC_ACQUIRE)) return;
    thread_chunk(thr->tid, 1, thr->name);
}

static void write_pending(int partial, int final)
{
    pthread_mutex_lock(&w_lock);
    if (w_meta.len) {
        ftr_buf_append(&out, w_meta.data, w_meta.len);
        w_meta.len = 0;
    }
    pthread_mutex_unlock(&w_lock);
    for (struct ftr_chunk *c = ftr_take_full_chunks(), *next; c; c = next) {
        next = c->next;
        if (c->used > c->flushed)
            encode(c->tid, c->seq0 + c->flushed, c->rec + c->flushed, c->used - c->flushed);
        ftr_release_chunk(c);
        if (out.len > (1u << 20)) flush_out();
    }
    if (partial) {
        ftr_for_each_thread(take_partial, &final);
        __atomic_fetch_add(&passes, 1, __ATOMIC_RELEASE);
    }
    ftr_reap_threads(thread_ended);
    flush_out();
}

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static void *writer_main(void *arg)
{
    (void)arg;
    ftr_thread_off();
    __atomic_store_n(&ftr_writer_tid, (uint32_t)syscall(SYS_gettid), __ATOMIC_RELEASE);
    syscall(SYS_futex, &ftr_writer_tid, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
    remember_trace_file();
    begin_image();
    uint64_t next_flush = mono_ms() + ftr_cfg.flush_ms;
    int leader_gone = 0, orphaned = 0;
    unsigned seq = atomic_load(&w_seq);
    for (;;) {
        while (!atomic_load(&w_stop) && !atomic_load(&w_sigstop) && atomic_load(&w_seq) == seq) {
            uint64_t now = mono_ms();
            if (now >= next_flush) break;
            /* the main thread is gone: look for the end of the last one often */
            uint64_t until = leader_gone && next_flush > now + 5 ? now + 5 : next_flush;
            struct timespec ts = {(time_t)((until - now) / 1000),
                                  (long)((until - now) % 1000) * 1000000};
            syscall(SYS_futex, &w_seq, FUTEX_WAIT_PRIVATE, seq, &ts, NULL, 0);
            if (leader_gone) break;
        }
        seq = atomic_load(&w_seq); /* wake-ups from here on are for the next pass */
        int stop = atomic_load(&w_stop) || atomic_load(&w_sigstop);

        uint64_t now = mono_ms();
        int partial = stop || now >= next_flush;
        if (partial) next_flush = now + ftr_cfg.flush_ms;
        int begun = begin_image();
        if (begun) write_pending(partial, 0);
        if (stop) break;
        if (begun) ftr_control_poll(); /* the control server is to be started (again) */
        /* Every thread of the program has ended, and only ours keep the process alive (glibc
         * would have called exit(0) after the last one, but it counts ours too). */
        if (!atomic_load(&w_stop) && ftr_program_gone(&leader_gone)) {
            orphaned = 1;
            w_end = ftr_end_orphaned();
            break;
        }
    }
    /* Final: the threads still running keep recording into their chunks until exit; take what
     * they have filled once more, name them, then the END chunk. An image with nothing to say
     * says nothing. */
    if (begin_image()) {
        write_pending(1, 1);
        ftr_for_each_thread(thread_alive, NULL);
        struct ftr_end_info end = *w_end;
        end.events = events_total;
        end.calls = calls_total;
        end.lost = ftr_lost_events();
        end.lost_calls = ftr_lost_calls();
        end.overruns = ftr_overrun_calls();
        end_lost = end.lost;
        end_lost_calls = end.lost_calls;
        ftr_enc_end(enc, ftr_g.pid, &end, &out);
        flush_out();
    }
    if (w_end->how != FTR_END_EXEC) ftr_output_release(); /* an exec drops it (output.c) */
    atomic_store(&w_done, 1);
    syscall(SYS_futex, &w_done, FUTEX_WAKE_PRIVATE, 0x7fffffff, NULL, NULL, 0);
    if (orphaned) ftr_orphan_exit(); /* exit(0) from here, as glibc's last thread would */
    return NULL;
}

/* Forgets the state of a writer thread that no longer exists (in a fork child, or after the
 * final flush before an exec that failed), so that ftr_writer_start() can run again. */
void ftr_writer_reset(int after_fork)
{
    if (after_fork) {
        pthread_mutex_init(&w_lock, NULL);
        enc = NULL; /* the parent's writer may have been inside it: start afresh (leaked) */
        mark_enc = NULL;
    }
    w_running = 0;
    w_lazy = 0;
    atomic_store(&w_stop, 0);
    atomic_store(&w_sigstop, 0);
    atomic_store(&w_done, 0);
    w_meta.len = 0;
    out.len = 0;
    process_written = 0;
    write_failed = 0;
    bytes_written = bytes_dropped = 0;
    events_total = calls_total = 0;
    ftr_writer_tid = 0;
}

int ftr_writer_start(char *err, size_t errlen)
{
    ftr_program_watch(); /* alone: the constructor, a fork child's handler (after an exec that
                          * failed it keeps the one it has) */
    if (!enc && !w_lazy) enc = ftr_enc_new(ftr_cfg.zstd_level); /* lazy: begin_image makes it */
    scratch_n = ftr_cfg.chunk_bytes / sizeof(struct ftr_rec);
    if (!scratch) scratch = malloc(scratch_n * sizeof *scratch);
    if ((!enc && !w_lazy) || !scratch) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    int rc = ftr_create_own_thread(&writer_thread, 0, writer_main, NULL);
    if (rc) {
        snprintf(err, errlen, "cannot start the writer thread: %s", strerror(rc));
        return -1;
    }
    w_running = 1;
    while (!__atomic_load_n(&ftr_writer_tid,
                            __ATOMIC_ACQUIRE)) /* not counted as running patched code */
        syscall(SYS_futex, &ftr_writer_tid, FUTEX_WAIT_PRIVATE, 0, NULL, NULL, 0);
    return 0;
}

void ftr_writer_stop(const struct ftr_end_info *end)
{
    if (!w_running) return;
    w_end = end;
    atomic_store(&w_stop, 1);
    ftr_wake_writer();
    pthread_join(writer_thread, NULL);
    w_running = 0;
}

/* From a fatal signal handler: only async-signal-safe steps. The writer notices the flag at
 * its next wake-up (at most one flush period away) and does the final flush; we wait for it
 * with a bounded futex wait so that a wedged writer cannot hang the dying process. */
void ftr_writer_stop_from_signal(const struct ftr_end_info *end)
{
    if (!w_running) return;
    w_end = end;
    atomic_store(&w_sigstop, 1);
    ftr_wake_writer();
    for (int i = 0; i < 40 && !atomic_load(&w_done); i++) {
        struct timespec ts = {0, 50 * 1000 * 1000};
        syscall(SYS_futex, &w_done, FUTEX_WAIT_PRIVATE, 0, &ts, NULL, 0);
    }
}

uint64_t ftr_writer_dropped(void)
{
    return bytes_dropped;
}

void ftr_writer_lock(int how)
{
    if (how > 0)
        pthread_mutex_lock(&w_lock);
    else if (how == 0)
        pthread_mutex_unlock(&w_lock);
    else
        pthread_mutex_init(&w_lock, NULL);
}
