/*
 * recorder.c - the recorder process: writes the trace of every traced image of a session
 * (recorder.h says how it is started and talked to).
 *
 * It is a process of ours, not the program's: it may block, allocate and lock as it likes.
 * One thread accepts the images' HELLOs and watches each process through a pidfd; each live
 * image has a worker thread (kept a while for the next image: a thread costs more than a short
 * fork child's image) that sleeps on its region's wake word (a futex in the shared header:
 * a chunk filled, the image ended, or the process is gone), drains the region (drain.c) every
 * flush period, copies the new part of the region's metadata log, and writes to the file under
 * a lock, whole chunks at a time. An image ends when its process says so in the region's
 * header (the END's fields are there) or when its pidfd says the process is gone: then every
 * record left is taken, since the pages outlive the process, and the END is written from what
 * the process wrote or, if it never could (SIGKILL, a seccomp kill), from its exit status
 * while it is a zombie.
 *
 * The file's lock (formats/ftr_lock.c) is held for a process from its HELLO (for the first
 * one, from before it started the recorder) until its END is written and every child it forked
 * meanwhile has said HELLO (bounded): there is no moment when a process of the session is
 * running and none is held. Only the session's first process waits for its END (recorder.h);
 * it hears of it once every other process that has ended is written too. The recorder ends
 * when no process of the session is left.
 */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "drain.h"
#include "recorder.h"

#define HELLO_MAX (16u << 20) /* a larger HELLO is a broken peer */
#define HOLD_FIRST_MS 10000   /* the first process's lock, should its HELLO never come */
#define CHILDREN_MS 2000      /* a parent's lock waits this long for its children's HELLOs */

static uint64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

static uint64_t raw_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC_RAW, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* ---- the file and its locks ---- */

static int out_fd;
static pthread_mutex_t out_lock = PTHREAD_MUTEX_INITIALIZER;
static int out_failed; /* errno of the first failed write: nothing more is written */

struct hold {
    uint32_t pid, n;
};
static struct hold *holds; /* under g_lock, as everything below that is shared */
static size_t nholds, holds_cap;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;

static void hold(uint32_t pid)
{
    for (size_t i = 0; i < nholds; i++)
        if (holds[i].pid == pid) {
            holds[i].n++;
            return;
        }
    if (nholds == holds_cap) {
        size_t cap = holds_cap ? holds_cap * 2 : 16;
        struct hold *h = realloc(holds, cap * sizeof *h);
        if (!h) return;
        holds = h, holds_cap = cap;
    }
    holds[nholds++] = (struct hold){pid, 1};
    ftr_lock_writer(out_fd, pid);
}

static void unhold(uint32_t pid)
{
    for (size_t i = 0; i < nholds; i++)
        if (holds[i].pid == pid) {
            if (--holds[i].n) return;
            holds[i] = holds[--nholds];
            ftr_lock_release(out_fd, pid);
            return;
        }
}

/* b written whole (one write() per call: appended as a unit to the O_APPEND file) */
static uint64_t write_out(struct ftr_buf *b, uint64_t *dropped, int *failed)
{
    size_t off = 0;
    pthread_mutex_lock(&out_lock);
    while (!out_failed && off < b->len) {
        ssize_t n = write(out_fd, b->data + off, b->len - off);
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) out_failed = n < 0 ? errno : ENOSPC;
        if (n > 0) off += (size_t)n;
    }
    if (out_failed) *failed = out_failed;
    pthread_mutex_unlock(&out_lock);
    *dropped += b->len - off;
    b->len = 0;
    return off;
}

/* ---- images ---- */

struct image {
    struct image *next;       /* g_images */
    struct image *queue_next; /* waiting for a worker (dispatch) */
    struct ftr_msg_hello h;
    char *strings; /* argv, then exe */
    int memfd, pidfd;
    int wake_fd;          /* a fork child's: written once the image begins (its parked server) */
    uint32_t refs;        /* the thread's, and the watcher's while it polls the pidfd */
    struct image *before; /* the previous image of the same pid: it ends first */
    atomic_int gone;      /* the process is gone (pidfd) */
    atomic_int done;      /* the thread wrote the END (or nothing) */
    atomic_int released;  /* and then let its lock go */
    atomic_int awaiting;  /* in between: waits for its fork children's HELLOs */
    atomic_uint children; /* fork children that said HELLO */
    struct ftr_buf first; /* chunks to write before the log's: a fork child's modules */
    uint64_t meta_read;   /* how far the metadata log is written out */
    struct ftr_region_hdr *hdr;
    void **segs; /* segs_cap of the nsegs the region can have; grown as they are mapped */
    size_t nsegs, segs_cap, seg_bytes;
};
static struct image *g_images;
static uint64_t hz_known;     /* ticks per second, once measured */
static uint64_t linger_until; /* an image ended by exec: its next one connects soon */
static uint32_t first_pid;    /* the lock the middle process took, until its HELLO */
static uint64_t first_until;

static uint64_t ticks(const struct image *im)
{
    return ftr_drain_ticks((int)im->h.clock_mono);
}

static void image_unref(struct image *im)
{
    pthread_mutex_lock(&g_lock);
    int last = --im->refs == 0;
    for (struct image **p = &g_images; last && *p; p = &(*p)->next)
        if (*p == im) {
            *p = im->next;
            break;
        }
    for (struct image *o = g_images; last && o; o = o->next)
        if (o->before == im) o->before = NULL;
    pthread_mutex_unlock(&g_lock);
    if (!last) return;
    for (size_t k = 0; k < im->segs_cap; k++)
        if (im->segs[k]) munmap(im->segs[k], im->seg_bytes);
    free(im->segs);
    if (im->hdr) munmap(im->hdr, FTR_REGION_HDR);
    if (im->memfd >= 0) close(im->memfd);
    if (im->pidfd >= 0) close(im->pidfd);
    if (im->wake_fd >= 0) close(im->wake_fd);
    ftr_buf_free(&im->first);
    free(im->strings);
    free(im);
}

static struct ftr_chunk *map_chunk(struct ftr_drain *d, uint32_t index)
{
    struct image *im = d->ctx;
    size_t k = index / im->hdr->seg;
    if (k >= im->nsegs) return NULL;
    if (k >= im->segs_cap) {
        size_t cap = k + 1 > 2 * im->segs_cap ? k + 1 : 2 * im->segs_cap;
        void **s = realloc(im->segs, cap * sizeof *s);
        if (!s) return NULL;
        memset(s + im->segs_cap, 0, (cap - im->segs_cap) * sizeof *s);
        im->segs = s, im->segs_cap = cap;
    }
    if (!im->segs[k]) {
        void *p = mmap(NULL, im->seg_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, im->memfd,
                       (off_t)(FTR_REGION_HDR + k * im->seg_bytes));
        if (p == MAP_FAILED) return NULL;
        im->segs[k] = p;
    }
    return (struct ftr_chunk *)((char *)im->segs[k] + (index % im->hdr->seg) * im->hdr->stride);
}

/* bytes [from, to) of im's metadata log appended to out */
static void read_log(const struct image *im, uint64_t from, uint64_t to, struct ftr_buf *out)
{
    if (to <= from || to - from > im->hdr->meta_cap) return;
    size_t n = (size_t)(to - from);
    if (ftr_buf_reserve(out, n) != FTR_OK) return;
    ssize_t k = pread(im->memfd, out->data + out->len, n, (off_t)(im->hdr->meta_off + from));
    if (k == (ssize_t)n) out->len += n;
}

/* How the process ended, when it could not say: its exit status while it is a zombie (field
 * 52 of /proc/PID/stat), else unseen. */
static void end_unseen(const struct image *im, struct ftr_end_info *end)
{
    char path[64], buf[2048];
    snprintf(path, sizeof path, "/proc/%u/stat", im->h.pid);
    end->how = FTR_END_VANISHED;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
    if (fd >= 0) close(fd);
    if (n <= 0) return;
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    if (!p || p[1] != ' ' || (p[2] != 'Z' && p[2] != 'X')) return;
    int field = 2;
    for (; *p && field < 52; p++)
        if (*p == ' ') field++;
    if (field != 52) return;
    long st = strtol(p, NULL, 10);
    if (st & 0x7f) {
        end->how = FTR_END_SIGNAL;
        end->code = (int32_t)(st & 0x7f);
    } else {
        end->how = FTR_END_EXIT;
        end->code = (int32_t)((st >> 8) & 0xff);
    }
}

/* The PROCESS chunk. The TSC's rate is measured against CLOCK_MONOTONIC_RAW from the image's
 * calibration base (its start; a fork child's parent's) over 2 ms at least, or less if the
 * image ends first; once measured, every later image takes it (one machine, one TSC). */
static void process_chunk(struct image *im, struct ftr_enc *enc, struct ftr_buf *out, int ending)
{
    uint64_t hz = im->h.tsc_hz ? im->h.tsc_hz : hz_known;
    if (!hz) {
        uint64_t ns = raw_ns();
        while (ns - im->h.cal_raw_ns < 2000000 && !ending) {
            struct timespec d = {0, (long)(2000000 - (ns - im->h.cal_raw_ns))};
            nanosleep(&d, NULL);
            ns = raw_ns();
        }
        uint64_t t = ticks(im);
        if (ns > im->h.cal_raw_ns)
            hz = (uint64_t)((double)(t - im->h.cal_tsc) * 1e9 / (double)(ns - im->h.cal_raw_ns));
        if (!im->h.clock_mono && ns - im->h.cal_raw_ns >= 2000000) hz_known = hz;
    }
    static const char *argv[4096];
    uint32_t argc = 0;
    const char *s = im->strings;
    for (; argc < im->h.argc && argc < 4096; argc++, s += strlen(s) + 1)
        argv[argc] = s;
    struct ftr_process_info pi = {.pid = im->h.pid,
                                  .ppid = im->h.ppid,
                                  .session_id = im->h.session_id,
                                  .start_realtime_ns = im->h.start_realtime_ns,
                                  .start_tsc = im->h.start_tsc,
                                  .tsc_hz = hz,
                                  .tsc_calibration = im->h.tsc_calibration,
                                  .clock_check = im->h.clock_check,
                                  .argc = argc,
                                  .argv = argv,
                                  .exe = s};
    ftr_enc_process(enc, &pi, out);
}

/* what the image's thread has written, for its flushes (drain.h's callback has no argument) */
struct progress {
    struct image *im;
    struct ftr_buf *out;
    uint64_t written, dropped;
    int failed;
};
static __thread struct progress *progress;

static void flush(struct ftr_drain *d)
{
    (void)d;
    struct progress *p = progress;
    p->written += write_out(p->out, &p->dropped, &p->failed);
    atomic_store(&p->im->hdr->written, p->written);
    atomic_store(&p->im->hdr->dropped, p->dropped);
    atomic_store(&p->im->hdr->failed, p->failed);
}

static void write_end(struct image *im, struct ftr_drain *dr)
{
    struct ftr_region_hdr *h = im->hdr;
    struct ftr_end_info end = {0};
    if (atomic_load(&h->end_state) == FTR_REGION_ENDING) {
        end.tsc = h->end_tsc;
        end.how = h->end_how;
        end.code = h->end_code;
        end.lost = h->end_lost;
        end.lost_calls = h->end_lost_calls;
        end.overruns = h->end_overruns;
        end.sites = h->sites;
        end.patched = h->patched;
        end.skipped = h->skipped;
        end.through = h->through;
    } else {
        end.tsc = ticks(im);
        end_unseen(im, &end);
    }
    end.events = dr->events;
    end.calls = dr->calls;
    ftr_enc_end(dr->enc, im->h.pid, &end, dr->out);
}

/* Has im's process ended (said so, or gone)? Under g_lock. */
static int ended(struct image *im)
{
    if (atomic_load(&im->gone) || atomic_load(&im->hdr->end_state) != FTR_REGION_RUNNING) return 1;
    struct pollfd p = {.fd = im->pidfd, .events = POLLIN};
    return im->pidfd >= 0 && poll(&p, 1, 0) == 1;
}

/* The session's first process (it prints the run's line, and ftrace-run returns when it ends)
 * hears of its END once every other process that has ended is written too, and its lock let
 * go: a fork child does not wait for its own (recorder_client.c), so that a report right after
 * the run finds each process that ended written whole, and no writer. (Waiting for the END
 * only left the moment between it and the lock's release, in which the report said "still
 * being written".) Not for a process that waits for its fork children's HELLOs: a child
 * killed before its HELLO never says it, and that wait is bounded by CHILDREN_MS of its own
 * (the report then says "still being written" for that moment, as before). Bounded:
 * CHILDREN_MS without one of them finishing. */
static void wait_ended_others(struct image *me)
{
    size_t last = SIZE_MAX;
    for (uint64_t until = mono_ms() + CHILDREN_MS; mono_ms() < until;) {
        size_t pending = 0;
        int newer = 1; /* g_images is newest first; an image of my pid after an exec of mine
                        * waits for me here, so I do not wait for it */
        pthread_mutex_lock(&g_lock);
        for (struct image *o = g_images; o; o = o->next) {
            if (o == me)
                newer = 0;
            else if (!(newer && o->h.pid == me->h.pid))
                pending += !atomic_load(&o->released) && !atomic_load(&o->awaiting) && ended(o);
        }
        pthread_mutex_unlock(&g_lock);
        if (!pending) return;
        if (pending != last) until = mono_ms() + CHILDREN_MS, last = pending;
        struct timespec d = {0, 1000000};
        nanosleep(&d, NULL);
    }
}

/* An image, from its HELLO to its END, on a worker thread. */
static void run_image(struct image *im)
{
    struct ftr_region_hdr *h = im->hdr;
    for (struct image *b; (b = __atomic_load_n(&im->before, __ATOMIC_ACQUIRE));) {
        if (atomic_load(&b->done)) break; /* the previous image of this pid writes first */
        atomic_store(&b->gone, 1);        /* replaced (an exec not seen): it is over */
        ftr_region_wake(b->hdr);
        struct timespec d = {0, 1000000};
        nanosleep(&d, NULL);
    }
    struct ftr_buf out = {0};
    struct ftr_drain dr = {.hdr = h,
                           .chunk = map_chunk,
                           .ctx = im,
                           .pid = im->h.pid,
                           .clock_mono = (int)im->h.clock_mono,
                           .wake_pool = (int)im->h.lossless,
                           .out = &out};
    struct progress pg = {.im = im, .out = &out};
    progress = &pg;
    int ok = ftr_drain_init(&dr, im->h.chunk_nrec) == 0, begun = 0;
    unsigned flush_ms = im->h.flush_ms ? im->h.flush_ms : 50;
    uint64_t next_flush = mono_ms() + flush_ms;
    for (;;) {
        unsigned seq = atomic_load(&h->wake);
        int ending = atomic_load(&h->end_state) == FTR_REGION_ENDING;
        int over = ending || atomic_load(&im->gone);
        uint64_t now = mono_ms();
        int partial = over || now >= next_flush;
        if (partial) next_flush = now + flush_ms;
        if (ok && !begun && ftr_drain_news(&dr)) { /* a lazy fork child: its first news */
            if (!(dr.enc = ftr_enc_new((int)im->h.zstd_level))) ok = 0;
            if (ok) {
                process_chunk(im, dr.enc, &out, over);
                ftr_buf_append(&out, im->first.data, im->first.len);
                begun = 1;
                atomic_store(&h->news, 1);
                syscall(SYS_futex, &h->news, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
                uint64_t one = 1;
                if (im->wake_fd >= 0 && write(im->wake_fd, &one, sizeof one) < 0) {
                } /* a full counter (it cannot be) or a closed eventfd: the futex said it */
            }
        }
        if (begun) {
            uint64_t logged = atomic_load_explicit(&h->meta_len, memory_order_acquire);
            read_log(im, im->meta_read, logged, &out);
            im->meta_read = logged;
            ftr_drain_pass(&dr, partial, over, flush);
            flush(&dr);
            atomic_store(&h->events, dr.events);
            atomic_store(&h->calls, dr.calls);
        }
        if (over) break;
        uint64_t ms = next_flush > now ? next_flush - now : 1;
        struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000};
        syscall(SYS_futex, &h->wake, FUTEX_WAIT, seq, &ts, NULL, 0);
    }
    if (begun) {
        ftr_drain_name_live(&dr);
        write_end(im, &dr);
        flush(&dr);
    }
    uint32_t how = h->end_how;
    int told = atomic_load(&h->end_state) == FTR_REGION_ENDING;
    atomic_store(&im->done, 1);
    ftr_enc_free(dr.enc);
    ftr_drain_free(&dr);
    ftr_buf_free(&out);
    /* The process's lock goes once the children it forked have said HELLO (bounded: a fork
     * that failed has none; each child holds its own from then on), and before the process
     * hears that its END is written: a report right after the process ends finds it free. */
    /* not waited for by the first process meanwhile (only while there is such a wait) */
    atomic_store(&im->awaiting, atomic_load(&im->children) < atomic_load(&h->forking));
    for (uint64_t until = mono_ms() + CHILDREN_MS;
         atomic_load(&im->children) < atomic_load(&h->forking) && mono_ms() < until;) {
        struct timespec d = {0, 1000000};
        nanosleep(&d, NULL);
    }
    atomic_store(&im->awaiting, 0);
    if ((uint32_t)im->h.session_id == im->h.pid) wait_ended_others(im);
    pthread_mutex_lock(&g_lock);
    unhold(im->h.pid);
    atomic_store(&im->released, 1);
    if (told && how == FTR_END_EXEC) linger_until = mono_ms() + 2000;
    pthread_mutex_unlock(&g_lock);
    atomic_store(&h->end_state, FTR_REGION_ENDED);
    syscall(SYS_futex, &h->end_state, FUTEX_WAKE, INT32_MAX, NULL, NULL, 0);
    image_unref(im);
}

/* ---- the workers: a thread per image at a time, kept a while for the next one ---- */

#define IDLE_MS 2000 /* a worker with no image for this long ends */

static pthread_mutex_t pool_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pool_cond = PTHREAD_COND_INITIALIZER;
static struct image *queue_head, **queue_tail = &queue_head; /* images for idle workers */
static size_t idle, queued;                                  /* queued < idle, or 0 */

static void *worker_main(void *arg)
{
    for (struct image *im = arg; im;) {
        run_image(im);
        im = NULL;
        pthread_mutex_lock(&pool_lock);
        idle++;
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += IDLE_MS / 1000;
        while (!queue_head && pthread_cond_timedwait(&pool_cond, &pool_lock, &until) == 0)
            ;
        idle--;
        if ((im = queue_head)) {
            if (!(queue_head = im->queue_next)) queue_tail = &queue_head;
            queued--;
        }
        pthread_mutex_unlock(&pool_lock);
    }
    return NULL;
}

/* im to an idle worker, or to a new one. A thread's creation costs more than the whole of a
 * short fork child's image (a fork child that _exit()s at once: bench/forkexec.c). @return 0,
 * or pthread_create()'s error. */
static int dispatch(struct image *im)
{
    pthread_mutex_lock(&pool_lock);
    if (idle > queued) {
        im->queue_next = NULL;
        *queue_tail = im;
        queue_tail = &im->queue_next;
        queued++;
        pthread_cond_signal(&pool_cond);
        pthread_mutex_unlock(&pool_lock);
        return 0;
    }
    pthread_mutex_unlock(&pool_lock);
    pthread_t th;
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    pthread_attr_setstacksize(&at, 256 << 10);
    /* glibc's pthread_create() calls calloc() through the PLT: the program's, in this copy of
     * it, which may block for good (live_tests.py hung_start). Rather than wait forever, the
     * recorder dies of SIGALRM after 10 s: a process of ours left behind holds a lock. */
    struct {
        void *handler;
        unsigned long flags;
        void *restorer;
        uint64_t mask;
    } dfl = {SIG_DFL, 0, NULL, 0};
    syscall(SYS_rt_sigaction, SIGALRM, &dfl, NULL, sizeof dfl.mask);
    alarm(10);
    int rc = pthread_create(&th, &at, worker_main, im);
    alarm(0);
    pthread_attr_destroy(&at);
    return rc;
}

/* A HELLO read whole: the image starts, on a worker thread. Under no lock. */
static struct image *start_image(const struct ftr_msg_hello *hh, const uint8_t *strings,
                                 size_t slen, int memfd, int wake_fd)
{
    struct image *im = calloc(1, sizeof *im);
    if (!im) return NULL;
    im->h = *hh;
    im->memfd = memfd;
    im->wake_fd = wake_fd;
    im->pidfd = (int)syscall(SYS_pidfd_open, hh->pid, 0);
    if (im->pidfd < 0 && errno == ESRCH) atomic_store(&im->gone, 1); /* over already */
    im->strings = malloc(slen + 1);
    if (im->strings) memcpy(im->strings, strings, slen), im->strings[slen] = 0;
    struct stat st;
    void *m = memfd >= 0 && fstat(memfd, &st) == 0
                  ? mmap(NULL, FTR_REGION_HDR, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0)
                  : MAP_FAILED;
    im->hdr = m == MAP_FAILED ? NULL : m;
    if (im->hdr && im->hdr->magic == FTR_REGION_MAGIC && im->hdr->seg && im->hdr->stride) {
        im->seg_bytes = (size_t)im->hdr->seg * im->hdr->stride;
        im->nsegs = (size_t)(im->hdr->meta_off - FTR_REGION_HDR) / im->seg_bytes + 1;
    }
    if (!im->nsegs || !im->strings) {
        im->memfd = im->wake_fd = -1; /* still the connection's, which closes them */
        im->refs = 1;
        image_unref(im);
        return NULL;
    }
    pthread_mutex_lock(&g_lock);
    im->refs = 1; /* its thread's (the watcher takes one while it polls) */
    hold(hh->pid);
    for (struct image *o = g_images; o; o = o->next)
        if (o->h.pid == hh->pid && !atomic_load(&o->done)) im->before = o;
    struct image *parent = NULL;
    for (struct image *o = g_images; hh->fork_of && o && !parent; o = o->next)
        if (o->h.pid == hh->fork_of) parent = o; /* the newest image of that pid */
    if (parent) { /* the modules it had at the fork are the child's */
        read_log(parent, 0, hh->fork_meta, &im->first);
        im->first.len = ftr_chunks_retarget(im->first.data, im->first.len, hh->pid,
                                            1u << FTR_CHUNK_MODULE | 1u << FTR_CHUNK_SITES);
        atomic_fetch_add(&parent->children, 1);
    }
    if (first_pid && hh->pid == first_pid) { /* the middle process's hold is this one's */
        first_pid = 0;
        unhold(hh->pid);
    }
    im->next = g_images;
    g_images = im;
    pthread_mutex_unlock(&g_lock);
    int rc = dispatch(im);
    if (rc != 0) {
        atomic_store(&im->hdr->end_state, FTR_REGION_ENDED); /* never waited for */
        atomic_store(&im->done, 1);
        pthread_mutex_lock(&g_lock);
        unhold(hh->pid);
        atomic_store(&im->released, 1);
        pthread_mutex_unlock(&g_lock);
        image_unref(im);
    }
    return im;
}

/* ---- the HELLOs ---- */

struct conn {
    int fd, memfd, wake_fd; /* the HELLO's descriptors: its region, a fork child's eventfd */
    uint64_t since;         /* accepted then: a HELLO not whole within seconds is dropped */
    struct ftr_buf in;      /* the HELLO so far */
};

/* Reads what c has sent. @return 0 (more to come), 1 (done: close it) */
static int on_readable(struct conn *c)
{
    for (;;) {
        uint8_t buf[65536];
        union {
            char b[CMSG_SPACE(4 * sizeof(int))];
            struct cmsghdr align;
        } u;
        struct iovec iov = {buf, sizeof buf};
        struct msghdr mh = {
            .msg_iov = &iov, .msg_iovlen = 1, .msg_control = u.b, .msg_controllen = sizeof u.b};
        ssize_t n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) return errno == EAGAIN ? 0 : 1;
        for (struct cmsghdr *cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
            if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
                int fds[4];
                size_t k = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
                memcpy(fds, CMSG_DATA(cm), k * sizeof(int));
                for (size_t i = 0; i < k; i++) {
                    int *to = i == 0 ? &c->memfd : i == 1 ? &c->wake_fd : NULL;
                    if (to && *to >= 0) close(*to);
                    if (to)
                        *to = fds[i];
                    else
                        close(fds[i]);
                }
            }
        if (n == 0 || ftr_buf_append(&c->in, buf, (size_t)n) != FTR_OK) return 1;
        struct ftr_msg_hello hh;
        if (c->in.len < sizeof hh) continue;
        memcpy(&hh, c->in.data, sizeof hh);
        if (hh.size > HELLO_MAX || hh.size < sizeof hh) return 1;
        if (c->in.len < hh.size) continue;
        if (start_image(&hh, c->in.data + sizeof hh, hh.size - sizeof hh, c->memfd, c->wake_fd))
            c->memfd = c->wake_fd = -1;
        return 1;
    }
}

static void conn_close(struct conn *c)
{
    close(c->fd);
    if (c->memfd >= 0) close(c->memfd);
    if (c->wake_fd >= 0) close(c->wake_fd);
    ftr_buf_free(&c->in);
}

/* The recorder leaves nothing of the program's: no descriptor (a pipe's write end kept open
 * would keep its reader waiting), no terminal, no signal of the program's group. keep[0..n):
 * the descriptors it keeps (-1: none), moved above 2 (their new numbers returned there). */
static void detach_from_program(int *keep, int n)
{
    for (int i = 0; i < n; i++)
        if (keep[i] >= 0) keep[i] = fcntl(keep[i], F_DUPFD_CLOEXEC, 3);
    int null = open("/dev/null", O_RDWR | O_CLOEXEC);
    for (int i = 0; i < 3 && null >= 0; i++)
        if (null != i) dup3(null, i, 0);
    for (unsigned from = 3;;) { /* every other descriptor, the ranges between the kept ones */
        unsigned next = ~0u;
        for (int i = 0; i < n; i++)
            if (keep[i] >= 0 && (unsigned)keep[i] >= from && (unsigned)keep[i] < next)
                next = (unsigned)keep[i];
        if (next > from) syscall(SYS_close_range, from, next == ~0u ? ~0u : next - 1, 0);
        if (next == ~0u) break;
        from = next + 1;
    }
    struct sigaction ign = {.sa_handler = SIG_IGN};
    for (int s = 1; s < 32; s++)
        if (s != SIGKILL && s != SIGSTOP && s != SIGSEGV && s != SIGBUS && s != SIGFPE &&
            s != SIGILL && s != SIGABRT && s != SIGCHLD)
            sigaction(s, &ign, NULL);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    prctl(PR_SET_NAME, "ftrace-recorder");
    prctl(PR_SET_PDEATHSIG, 0);
    if (chdir("/") != 0) { /* nothing: the file is open already */
    }
}

/* Each live image's pidfd is watched: a process gone wakes its image's thread. @return
 * whether anything of the session is left. */
static int watch(const int *lfds, struct conn *conns, size_t nconns)
{
    pthread_mutex_lock(&g_lock);
    size_t nimg = 0;
    for (struct image *im = g_images; im; im = im->next)
        nimg += im->pidfd >= 0 && !atomic_load(&im->gone);
    struct image **imgs = calloc(nimg + 1, sizeof *imgs);
    struct pollfd *pf = calloc(nimg + nconns + 2, sizeof *pf);
    size_t k = 0;
    for (struct image *im = g_images; im && imgs && pf; im = im->next)
        if (im->pidfd >= 0 && !atomic_load(&im->gone) && k < nimg) {
            im->refs++;
            imgs[k] = im;
            pf[k++] = (struct pollfd){.fd = im->pidfd, .events = POLLIN};
        }
    pthread_mutex_unlock(&g_lock);
    if (!imgs || !pf) _exit(1);
    for (size_t i = 0; i < nconns; i++)
        pf[k + i] = (struct pollfd){.fd = conns[i].fd, .events = POLLIN};
    pf[k + nconns] = (struct pollfd){.fd = lfds[0], .events = POLLIN};
    pf[k + nconns + 1] = (struct pollfd){.fd = lfds[1], .events = POLLIN}; /* -1: none */
    poll(pf, k + nconns + 2, 200);
    for (size_t i = 0; i < k; i++) {
        if (pf[i].revents && !atomic_exchange(&imgs[i]->gone, 1)) ftr_region_wake(imgs[i]->hdr);
        image_unref(imgs[i]);
    }
    free(imgs);
    free(pf);
    uint64_t now = mono_ms();
    pthread_mutex_lock(&g_lock);
    if (first_pid && now > first_until) {
        unhold(first_pid);
        first_pid = 0;
    }
    int left = g_images || first_pid || now < linger_until;
    pthread_mutex_unlock(&g_lock);
    return left;
}

/* Past a pid at n (decimal, no sign, no leading zero). @return what follows it, or NULL */
static const char *past_pid(const char *n)
{
    if (*n < '1' || *n > '9') return NULL;
    while (*n >= '0' && *n <= '9')
        n++;
    return n;
}

/* A name the tracer gives its socket files: "PID.sock" (a control server's) or
 * "ftrace-rec-PID-HEX.sock" (a recorder's). */
static int our_socket_name(const char *n)
{
    int rec = !strncmp(n, "ftrace-rec-", 11);
    if (!(n = past_pid(rec ? n + 11 : n))) return 0;
    if (rec) {
        if (*n++ != '-' || !*n) return 0;
        while ((*n >= '0' && *n <= '9') || (*n >= 'a' && *n <= 'f'))
            n++;
    }
    return !strcmp(n, ".sock");
}

/* The socket files nobody listens on any more, in the control directory where the recorder
 * listens (path: its own socket's): a process killed by SIGKILL leaves its control socket, a
 * recorder killed so its own, and the directory would grow with every such death. A pid says
 * nothing here (the recorder's file carries the pid of its session's first process, which may
 * be long gone while the recorder serves a daemon child; a process of another pid namespace
 * may share the directory): a socket is stale when connecting to it is refused. Only socket
 * files (not followed) with a name of ours are looked at; a connection accepted is closed at
 * once (a control server reads an empty request and goes on). From the recorder, never from
 * the program's processes. */
static void sweep_stale(const char *path)
{
    char dir[sizeof((struct sockaddr_un *)0)->sun_path];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (!slash || slash == dir) return;
    *slash = 0;
    DIR *d = opendir(dir);
    if (!d) return;
    for (struct dirent *de; (de = readdir(d));) {
        struct stat st;
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        if (!our_socket_name(de->d_name) ||
            fstatat(dirfd(d), de->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISSOCK(st.st_mode) ||
            snprintf(sa.sun_path, sizeof sa.sun_path, "%s/%s", dir, de->d_name) >=
                (int)sizeof sa.sun_path)
            continue;
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
        if (fd < 0) break;
        if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0 && errno == ECONNREFUSED)
            unlinkat(dirfd(d), de->d_name, 0);
        close(fd);
    }
    closedir(d);
}

void ftr_recorder_main(int lfd, int path_lfd, int trace_fd, uint32_t pid)
{
    int keep[3] = {lfd, path_lfd, trace_fd};
    detach_from_program(keep, 3);
    int lfds[2] = {keep[0], keep[1]};
    struct sockaddr_un path = {0};
    socklen_t plen = sizeof path;
    if (lfds[1] >= 0 && getsockname(lfds[1], (struct sockaddr *)&path, &plen) < 0)
        path.sun_path[0] = 0;
    for (int i = 0; i < 2; i++)
        if (lfds[i] >= 0) fcntl(lfds[i], F_SETFL, O_NONBLOCK);
    if (path.sun_path[0]) sweep_stale(path.sun_path);
    out_fd = keep[2];
    first_pid = pid;
    first_until = mono_ms() + HOLD_FIRST_MS;
    if ((holds = calloc(16, sizeof *holds))) {
        holds_cap = 16;
        holds[nholds++] = (struct hold){pid, 1}; /* the middle process took it */
    }
    struct conn *conns = NULL;
    size_t nconns = 0, cap = 0;
    uid_t me = getuid();
    for (;;) {
        int left = watch(lfds, conns, nconns);
        uint64_t now = mono_ms();
        for (size_t i = nconns; i-- > 0;)
            if (on_readable(&conns[i]) || now - conns[i].since > 5000) {
                conn_close(&conns[i]);
                conns[i] = conns[--nconns];
            }
        for (int w = 0, fd; w < 2; w++)
            while (lfds[w] >= 0 &&
                   (fd = accept4(lfds[w], NULL, NULL, SOCK_CLOEXEC | SOCK_NONBLOCK)) >= 0) {
                struct ucred cr;
                socklen_t cl = sizeof cr;
                if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cr, &cl) < 0 ||
                    (cr.uid != me && cr.uid != 0)) {
                    close(fd);
                    continue;
                }
                struct conn c = {.fd = fd, .memfd = -1, .wake_fd = -1, .since = now};
                /* those that connected before it are read first: a parent's HELLO, still
                 * coming in pieces, is whole before its fork child's (whose modules and lock
                 * are the parent's until then) */
                for (size_t i = nconns; i-- > 0;)
                    if (on_readable(&conns[i])) {
                        conn_close(&conns[i]);
                        conns[i] = conns[--nconns];
                    }
                if (on_readable(&c)) {
                    conn_close(&c);
                    continue;
                }
                if (nconns == cap) {
                    size_t nc = cap ? cap * 2 : 16;
                    struct conn *p = realloc(conns, nc * sizeof *p);
                    if (!p) {
                        conn_close(&c);
                        continue;
                    }
                    conns = p, cap = nc;
                }
                conns[nconns++] = c;
                left = 1;
            }
        if (!left && !nconns) {
            if (path.sun_path[0]) unlink(path.sun_path);
            _exit(0);
        }
    }
}
