/*
 * region.c - the memory a process's records are written in (region.h says what and why).
 *
 * Chunk i lies at FTR_REGION_HDR + i * stride in the memfd. The file is sized once, for every
 * chunk the process may ever have: a sparse file costs nothing until its pages are written,
 * and a file that never grows needs no ftruncate() on a hook's path (where RLIMIT_FSIZE
 * would answer it with SIGXFSZ). It is mapped in segments of `seg` chunks, each at the first
 * call for one of its chunks: a segment mapped twice by a race keeps the first mapping.
 *
 * The memfd's number is the tracer's, kept out of the program's way by fdguard.c (above 512;
 * close() spares it; dup2() onto it first moves it). A hook that maps a segment reads the
 * number without the guard's lock (it may run inside a handler that interrupted the holder),
 * so the guard counts its moves (ftr_fd_moves, odd while one is under way) and a mapping made
 * while the count moved is dropped: it may be of the program's file now at that number.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "forkpage.h"
#include "region.h"
#include "tracer.h"

#define SEGS_MAX 16384 /* segments; so at most SEGS_MAX * seg chunks */
#define SEG_BYTES                                                                                  \
    (2 * (260u << 10)) /* a segment: two chunks of the default size (256 KiB                       \
                        * and a page for their headers) */

#define META_MAX (64u << 20) /* the metadata log's room: chunks of MODULE, SITES, MARK */

#define LOG_WIN (1u << 20) /* the log is mapped in windows of this */
#define LOG_WINS (META_MAX / LOG_WIN)

static int region_fd FTR_FORK_PAGE = -1;
static uint64_t meta_cap;
static void *_Atomic logwin[LOG_WINS] FTR_FORK_PAGE;
static void *log_window(size_t k);
static struct ftr_region_hdr *hdr FTR_FORK_PAGE; /* the header page (anonymous: a stand-in) */
static size_t chunk_bytes, stride, seg, max_chunks FTR_FORK_PAGE;
static void *_Atomic segs[SEGS_MAX];
static atomic_size_t segs_used FTR_FORK_PAGE; /* 1 + the highest segment mapped */

static size_t page_round(size_t n)
{
    return (n + 4095) & ~(size_t)4095;
}

/* A memfd for max_chunks chunks and the metadata log after them, or -1 (anonymous segments
 * then). The size stays within RLIMIT_FSIZE: beyond it the kernel sends SIGXFSZ. */
static int make_memfd(void)
{
    int fd = (int)syscall(SYS_memfd_create, "ftrace-chunks", MFD_CLOEXEC);
    if (fd < 0) return -1;
    struct rlimit fs;
    meta_cap = META_MAX;
    uint64_t want = FTR_REGION_HDR + (uint64_t)max_chunks * stride + meta_cap;
    if (getrlimit(RLIMIT_FSIZE, &fs) == 0 && fs.rlim_cur != RLIM_INFINITY && fs.rlim_cur < want) {
        uint64_t room = fs.rlim_cur > FTR_REGION_HDR ? fs.rlim_cur - FTR_REGION_HDR : 0;
        meta_cap = (room / 8) & ~(uint64_t)4095;
        if (meta_cap > META_MAX) meta_cap = META_MAX;
        room = (room - meta_cap) / stride;
        if (room < 4) { /* not even a thread's two chunks and a few more */
            syscall(SYS_close, fd);
            return -1;
        }
        if (room < max_chunks) max_chunks = room;
        want = FTR_REGION_HDR + (uint64_t)max_chunks * stride + meta_cap;
    }
    if (ftruncate(fd, (off_t)want) != 0) {
        syscall(SYS_close, fd);
        return -1;
    }
    return ftr_fd_high(fd);
}

/* The header page, from the memfd when there is one. @return 0, or -1 (no memory at all) */
static int make_header(uint32_t pid)
{
    void *p = region_fd >= 0
                  ? mmap(NULL, FTR_REGION_HDR, PROT_READ | PROT_WRITE, MAP_SHARED, region_fd, 0)
                  : MAP_FAILED;
    if (p == MAP_FAILED && region_fd >= 0) { /* unusable: anonymous, all of it */
        syscall(SYS_close, region_fd);
        region_fd = -1;
    }
    if (p == MAP_FAILED)
        p = mmap(NULL, FTR_REGION_HDR, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) return -1;
    hdr = p; /* zero: a new file's pages, or new anonymous memory */
    hdr->pid = pid;
    hdr->seg = (uint32_t)seg;
    hdr->stride = stride;
    hdr->bytes = chunk_bytes;
    hdr->anon = region_fd < 0;
    hdr->meta_off = FTR_REGION_HDR + (uint64_t)max_chunks * stride;
    hdr->meta_cap = region_fd < 0 ? 0 : meta_cap;
    atomic_store((_Atomic uint32_t *)&hdr->nchunks, 0);
    __atomic_store_n(&hdr->magic, FTR_REGION_MAGIC, __ATOMIC_RELEASE);
    return 0;
}

int ftr_region_init(size_t bytes)
{
    chunk_bytes = bytes;
    stride = page_round(bytes);
    seg = stride >= SEG_BYTES ? 1 : SEG_BYTES / stride;
    max_chunks = (size_t)SEGS_MAX * seg;
    region_fd = make_memfd();
    if (region_fd >= 0) ftr_fd_protect(&region_fd);
    if (make_header((uint32_t)ftr_getpid()) < 0) return -1;
    if (region_fd >= 0) log_window(0);
    return 0;
}

int ftr_region_fd(void)
{
    return region_fd;
}

struct ftr_region_hdr *ftr_region_header(void)
{
    return hdr;
}

/* Segment k mapped: from the memfd, validated against the descriptor guard's moves; or
 * anonymous when the process has no memfd. @return its address, or NULL */
static void *map_segment(size_t k)
{
    size_t len = seg * stride;
    off_t off = (off_t)(FTR_REGION_HDR + k * len);
    if (region_fd < 0) {
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        return p == MAP_FAILED ? NULL : p;
    }
    for (int tries = 0; tries < 2; tries++) {
        unsigned moves = atomic_load(&ftr_fd_moves);
        if (moves & 1) return NULL; /* a move under way, maybe in the code we interrupted */
        int fd = __atomic_load_n(&region_fd, __ATOMIC_ACQUIRE);
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, off);
        if (p == MAP_FAILED) return NULL;
        if (atomic_load(&ftr_fd_moves) == moves) return p;
        munmap(p, len); /* the number may have been the program's file meanwhile */
    }
    return NULL;
}

void *ftr_region_chunk(uint32_t index)
{
    if (!hdr || index >= max_chunks) return NULL;
    size_t k = index / seg;
    void *s = atomic_load_explicit(&segs[k], memory_order_acquire);
    if (!s) {
        void *mine = map_segment(k), *none = NULL;
        if (!mine) return NULL;
        if (atomic_compare_exchange_strong(&segs[k], &none, mine)) {
            s = mine;
            size_t used = atomic_load(&segs_used);
            while (used <= k && !atomic_compare_exchange_weak(&segs_used, &used, k + 1))
                ;
        } else { /* another thread (or a handler) mapped it first */
            munmap(mine, seg * stride);
            s = none;
        }
    }
    /* for a reader of the region: the chunks that exist (they are made in index order, nearly) */
    uint32_t n = atomic_load((_Atomic uint32_t *)&hdr->nchunks);
    while (n <= index &&
           !atomic_compare_exchange_weak((_Atomic uint32_t *)&hdr->nchunks, &n, index + 1))
        ;
    return (char *)s + (index % seg) * stride;
}

/* Window k of the metadata log (LOG_WIN bytes at meta_off + k * LOG_WIN), mapped on first use
 * and kept: the control server appends marks from a descriptor table of its own, where our
 * memfd's number means nothing, so the window it needs is mapped ahead by the others. */
static void *log_window(size_t k)
{
    if (k >= LOG_WINS || (uint64_t)k * LOG_WIN >= hdr->meta_cap) return NULL;
    void *w = atomic_load(&logwin[k]);
    if (w) return w;
    size_t len = LOG_WIN;
    for (int tries = 0; tries < 2 && !w; tries++) { /* validated as map_segment() is */
        unsigned moves = atomic_load(&ftr_fd_moves);
        if (moves & 1) return NULL;
        int fd = __atomic_load_n(&region_fd, __ATOMIC_ACQUIRE);
        void *m = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd,
                       (off_t)(hdr->meta_off + (uint64_t)k * LOG_WIN));
        if (m == MAP_FAILED) return NULL;
        if (atomic_load(&ftr_fd_moves) != moves) {
            munmap(m, len);
            continue;
        }
        void *none = NULL;
        if (atomic_compare_exchange_strong(&logwin[k], &none, m))
            w = m;
        else {
            munmap(m, len);
            w = none;
        }
    }
    return w;
}

int ftr_region_meta_append(const void *p, size_t n)
{
    if (!hdr || region_fd < 0) return -1;
    uint64_t at = atomic_load(&hdr->meta_len);
    if (n > hdr->meta_cap - at) return -1;
    for (uint64_t k = at / LOG_WIN; k <= (at + n) / LOG_WIN; k++) /* every window, first */
        if (!log_window((size_t)k) && k * LOG_WIN < at + n) return -1;
    for (uint64_t done = 0; done < n;) {
        uint64_t off = at + done, room = LOG_WIN - off % LOG_WIN;
        size_t part = (size_t)(n - done < room ? n - done : room);
        memcpy((char *)logwin[off / LOG_WIN] + off % LOG_WIN, (const char *)p + done, part);
        done += part;
    }
    atomic_store_explicit(&hdr->meta_len, at + n, memory_order_release);
    log_window((size_t)((at + n) / LOG_WIN + 1)); /* ahead, for the control server's marks */
    return 0;
}

static struct ftr_region_hdr *parent_hdr FTR_FORK_PAGE; /* a fork child's, for a moment */

struct ftr_region_hdr *ftr_region_parent(int forget)
{
    struct ftr_region_hdr *h = parent_hdr;
    if (forget && h) {
        munmap(h, FTR_REGION_HDR);
        parent_hdr = h = NULL;
    }
    return h;
}

/* The parent's memory out of the child's address space: its segments are shared with the
 * parent (the parent goes on writing them) and the child has no use for them. */
static void forget_parent(void)
{
    for (size_t k = 0, n = atomic_load(&segs_used); k < n; k++) {
        void *s = atomic_load(&segs[k]);
        if (s) munmap(s, seg * stride);
        atomic_store(&segs[k], NULL);
    }
    atomic_store(&segs_used, 0);
    for (size_t k = 0; k < LOG_WINS; k++) {
        void *w = atomic_exchange(&logwin[k], NULL);
        if (w) munmap(w, LOG_WIN);
    }
    parent_hdr = hdr; /* kept until the child said HELLO, or could not: ftr_region_parent() */
    hdr = NULL;
    if (region_fd >= 0) {
        ftr_fd_unprotect(&region_fd);
        syscall(SYS_close, region_fd);
        region_fd = -1;
    }
}

int ftr_region_child_fork(void)
{
    if (!stride) return 0; /* never made: the process does not trace */
    forget_parent();
    max_chunks = (size_t)SEGS_MAX * seg;
    region_fd = make_memfd();
    if (region_fd >= 0) ftr_fd_protect(&region_fd);
    if (make_header((uint32_t)ftr_getpid()) < 0) return -1;
    if (region_fd >= 0) log_window(0);
    return region_fd >= 0 ? 0 : -1;
}
