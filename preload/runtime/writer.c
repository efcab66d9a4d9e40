/*
 * writer.c - the writer thread: drains the process's region (drain.c) into compressed EVENTS
 * chunks (formats/) and appends them, with the metadata chunks, to the trace file.
 *
 * It wakes when a chunk fills (ftr_wake_writer) and every flush period, when it also takes the
 * filled part of every thread's current chunk, so that a killed process loses at most one
 * period. It never traces (its thread state is FTR_T_OFF), blocks every signal, and owns the
 * file descriptor: on a write error it stops writing, counts what it could not write, and the
 * program carries on.
 *
 * The thread is the way a process writes its trace when it has no recorder (recorder.h: the
 * session's recorder process does all of this outside the program, and is tried first). The
 * functions here stand for both: with a recorder, metadata goes to it, the end is told to it
 * through the region, and the counts are those it keeps in the region's header.
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

#include "forkpage.h"
#include "drain.h"
#include "recorder.h"
#include "region.h"
#include "sigguard.h"
#include "tracer.h"

uint32_t ftr_writer_tid;
uint32_t ftr_writer_gen;            /* moves at every start of the writer (thread or recorder) */
static int w_rec FTR_FORK_PAGE;     /* this image's records go to the recorder */
static int w_decided FTR_FORK_PAGE; /* the constructor chose (the thread or the recorder) */
static int w_forked FTR_FORK_PAGE;  /* the next start is a fork child's */

static pthread_t writer_thread;
static pthread_mutex_t w_lock FTR_FORK_PAGE = PTHREAD_MUTEX_INITIALIZER; /* w_meta */
/* Wake-ups: the region's wake word (chunk.h), bumped, then FUTEX_WAKE. Lock-free and
 * async-signal-safe, so that a traced thread whose chunk is full, a signal handler or _exit()
 * can wake the writer from anywhere. */
static struct ftr_region_hdr *rh;
static int w_running FTR_FORK_PAGE;
static atomic_int w_stop FTR_FORK_PAGE; /* read outside w_lock too */
static atomic_int w_sigstop
    FTR_FORK_PAGE; /* a fatal signal asks for the final flush (no locks there) */
static atomic_int w_done FTR_FORK_PAGE;     /* the END chunk is written */
static struct ftr_buf w_meta FTR_FORK_PAGE; /* pre-encoded metadata chunks waiting to be written */
static const struct ftr_end_info *w_end;    /* set by ftr_writer_stop */

static struct ftr_enc *enc FTR_FORK_PAGE;
static struct ftr_buf out FTR_FORK_PAGE; /* encoded chunks waiting for write() */
static struct ftr_drain dr FTR_FORK_PAGE;
static int write_failed FTR_FORK_PAGE;
static uint64_t bytes_written FTR_FORK_PAGE, bytes_dropped FTR_FORK_PAGE;
static int process_written FTR_FORK_PAGE;

static uint64_t end_lost FTR_FORK_PAGE,
    end_lost_calls FTR_FORK_PAGE; /* events and calls lost, as the END chunk says */

uint64_t ftr_writer_end_lost(void)
{
    return end_lost;
}

/* a count the recorder keeps in the region's header */
#define REC_COUNT(field) (rh ? (uint64_t)atomic_load(&rh->field) : 0)

uint64_t ftr_writer_end_lost_calls(void)
{
    return end_lost_calls;
}

uint64_t ftr_writer_passes(void)
{
    return rh ? atomic_load(&rh->passes) : 0;
}

uint64_t ftr_writer_bytes(void)
{
    return w_rec ? REC_COUNT(written) : bytes_written;
}
uint64_t ftr_writer_events(void)
{
    return w_rec ? REC_COUNT(events) : dr.events;
}
uint64_t ftr_writer_calls(void)
{
    return w_rec ? REC_COUNT(calls) : dr.calls;
}
int ftr_writer_failed(void)
{
    return w_rec ? (int)REC_COUNT(failed) : write_failed;
}

void ftr_wake_writer(void)
{
    struct ftr_region_hdr *h = ftr_region_header();
    if (h) ftr_region_wake(h);
}

/* Waits for a wake-up after seq (at most ns nanoseconds, 0: no limit) */
static void wait_wake(unsigned seq, uint64_t ns)
{
    struct timespec ts = {(time_t)(ns / 1000000000u), (long)(ns % 1000000000u)};
    syscall(SYS_futex, &rh->wake, FUTEX_WAIT, seq, ns ? &ts : NULL, NULL, 0);
}

void ftr_writer_drop_meta(void)
{
    pthread_mutex_lock(&w_lock);
    w_meta.len = 0;
    pthread_mutex_unlock(&w_lock);
}

void ftr_writer_add_meta(const struct ftr_buf *chunks)
{
    if (w_rec) {
        ftr_recorder_meta(chunks);
        return;
    }
    pthread_mutex_lock(&w_lock);
    ftr_buf_append(&w_meta, chunks->data, chunks->len);
    pthread_mutex_unlock(&w_lock);
    ftr_wake_writer();
}

/* A MARK chunk, from the control thread (never from a hook): encoded with an encoder of its
 * own (the writer's is the writer thread's), queued with the metadata. */
static struct ftr_enc *mark_enc FTR_FORK_PAGE;

void ftr_writer_mark(unsigned what, uint64_t tsc, uint64_t value, const char *text)
{
    struct ftr_mark_info mi = {.tsc = tsc, .what = what, .value = value, .text = text};
    struct ftr_buf chunk = {0};
    pthread_mutex_lock(&w_lock);
    if (!mark_enc) mark_enc = ftr_enc_new(ftr_cfg.zstd_level);
    if (mark_enc) ftr_enc_mark(mark_enc, ftr_g.pid, &mi, w_rec ? &chunk : &w_meta);
    pthread_mutex_unlock(&w_lock);
    if (w_rec) ftr_recorder_meta(&chunk);
    ftr_buf_free(&chunk);
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
            unsigned seq = atomic_load(&rh->wake); /* ftr_writer_stop's wake-up ends the wait */
            wait_wake(seq, CALIBRATION_NS - elapsed);
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
 * nothing at all. Those frames filled its forking thread's chunk up to a slot the region's
 * header keeps (drain.c, ftr_drain_news). */
static int w_lazy FTR_FORK_PAGE;
static void (*lazy_describe)(struct ftr_buf *out); /* MODULE and SITES chunks of every module */

void ftr_writer_lazy_child(void (*describe)(struct ftr_buf *out))
{
    struct ftr_tls *t = &ftr_tls;
    struct ftr_region_hdr *h = ftr_region_header();
    w_lazy = 1;
    lazy_describe = describe;
    if (!h) return;
    struct ftr_chunk *c = t->thr ? t->thr->cur : NULL;
    h->quiet_chunk = c ? c->index : UINT32_MAX;
    h->quiet_slots = c && t->pos >= c->rec ? (uint32_t)(t->pos - c->rec) : 0;
    h->lazy = 1;
}

/* Writes the PROCESS chunk, when this image has anything to say. @return whether it has. */
static int begin_image(void)
{
    if (process_written) return 1;
    if (w_lazy && !ftr_drain_news(&dr)) return 0;
    atomic_store(&rh->news, 1);
    if (!enc && !(enc = ftr_enc_new(ftr_cfg.zstd_level))) {
        write_failed = ENOMEM; /* nothing will be written: the summary says so */
        return 0;
    }
    dr.enc = enc;
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

static void drain_flush(struct ftr_drain *d)
{
    (void)d;
    flush_out();
}

/* the drain's view of the region: this process's own mapping */
static struct ftr_chunk *own_chunk(struct ftr_drain *d, uint32_t index)
{
    (void)d;
    return ftr_region_chunk(index);
}

static void write_pending(int partial, int final)
{
    pthread_mutex_lock(&w_lock);
    if (w_meta.len) {
        ftr_buf_append(&out, w_meta.data, w_meta.len);
        w_meta.len = 0;
    }
    pthread_mutex_unlock(&w_lock);
    ftr_threads_housekeep();
    ftr_drain_pass(&dr, partial, final, drain_flush);
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
    unsigned seq = atomic_load(&rh->wake);
    for (;;) {
        while (!atomic_load(&w_stop) && !atomic_load(&w_sigstop) && atomic_load(&rh->wake) == seq) {
            uint64_t now = mono_ms();
            if (now >= next_flush) break;
            /* the main thread is gone: look for the end of the last one often */
            uint64_t until = leader_gone && next_flush > now + 5 ? now + 5 : next_flush;
            wait_wake(seq, (until - now) * 1000000u);
            if (leader_gone) break;
        }
        seq = atomic_load(&rh->wake); /* wake-ups from here on are for the next pass */
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
        ftr_drain_name_live(&dr);
        struct ftr_end_info end = *w_end;
        end.events = dr.events;
        end.calls = dr.calls;
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
    w_forked = after_fork;
    atomic_store(&w_stop, 0);
    atomic_store(&w_sigstop, 0);
    atomic_store(&w_done, 0);
    w_meta.len = 0;
    out.len = 0;
    process_written = 0;
    write_failed = 0;
    bytes_written = bytes_dropped = 0;
    dr.events = dr.calls = 0;
    ftr_writer_tid = 0;
}

/* The recorder, when this image has one: in the constructor, joined (or started); in a fork
 * child, joined anew; after an exec that failed, told that the image goes on. @return 1 (the
 * recorder writes), 0 (the writer thread does), -1 (nobody can: err says why) */
static int start_recorder(char *err, size_t errlen)
{
    if (!w_decided) {
        w_decided = 1;
        if (ftr_recorder_join(ftr_g.fd) == 0) {
            w_rec = 1;
            ftr_output_release(); /* the recorder writes it, and holds the lock */
            return 1;
        }
        ftr_output_lock(); /* from here on, this process writes the file (output.c) */
        return 0;
    }
    if (!w_rec) return 0;
    if ((w_forked ? ftr_recorder_child_fork() : ftr_recorder_resume()) == 0) return 1;
    snprintf(err, errlen, "%s", ftr_recorder_error());
    return -1;
}

int ftr_writer_start(char *err, size_t errlen)
{
    rh = ftr_region_header();
    ftr_writer_gen++;
    /* alone: the constructor, a fork child's handler (after an exec that failed it keeps the
     * one it has); with a recorder, only the orphan watcher asks, if main calls pthread_exit */
    int rec = start_recorder(err, errlen);
    ftr_program_watch(!rec);
    if (rec) return rec < 0 ? -1 : 0;
    if (!enc && !w_lazy) enc = ftr_enc_new(ftr_cfg.zstd_level); /* lazy: begin_image makes it */
    rh = ftr_region_header();
    dr.hdr = rh;
    dr.chunk = own_chunk;
    dr.pid = ftr_g.pid;
    dr.clock_mono = ftr_hot.clock_mono;
    dr.wake_pool = ftr_cfg.lossless;
    dr.enc = enc;
    dr.out = &out;
    if (!dr.scratch) ftr_drain_init(&dr, ftr_cfg.chunk_bytes / sizeof(struct ftr_rec));
    if ((!enc && !w_lazy) || !dr.scratch || !rh) {
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

/* The END's counts of what was lost, then the recorder told: it writes the END */
static void stop_recorder(const struct ftr_end_info *end, int from_signal)
{
    struct ftr_end_info e = *end;
    e.lost = end_lost = ftr_lost_events();
    e.lost_calls = end_lost_calls = ftr_lost_calls();
    e.overruns = ftr_overrun_calls();
    ftr_recorder_end(&e, from_signal);
}

void ftr_writer_stop(const struct ftr_end_info *end)
{
    if (w_rec) {
        stop_recorder(end, 0);
        return;
    }
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
    if (w_rec) {
        stop_recorder(end, 1);
        return;
    }
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
    return w_rec ? REC_COUNT(dropped) : bytes_dropped;
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
