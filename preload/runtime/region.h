/*
 * region.h - the memory a process's records are written in.
 *
 * Chunks live in a memfd of the process's own, mapped MAP_SHARED: records stored there outlive
 * the process (any death, SIGKILL included) for whoever holds the memfd, and another process
 * can read them while they are written (docs/design.md, "Where the machinery lives"). The file
 * is a header (struct ftr_region_hdr, then the thread slots), then chunk after chunk at fixed
 * offsets (chunk i at FTR_REGION_HDR + i * stride), then the metadata log (the process's
 * MODULE, SITES and MARK chunks, for the recorder); chunks are mapped in segments of a few,
 * each when its first chunk is wanted. Where no memfd can be made (a kernel or sandbox without
 * memfd_create), the segments are anonymous memory: the process's own writer thread reads
 * them, and the records die with the process.
 */
#ifndef FTR_REGION_H
#define FTR_REGION_H

#include <stddef.h>
#include <stdint.h>

#define FTR_REGION_MAGIC 0x32474552525446ull /* "FTRREG2" little-endian, in the header */
#define FTR_REGION_HDR (64u << 10)           /* the header: struct ftr_region_hdr, thread slots */
#define FTR_REGION_SLOT0 4096u               /* offset of the first thread slot */

/* A thread of the process, as a reader outside it sees it: claimed at the thread's setup,
 * ENDED once every chunk of the thread is FULL (threads.c), FREE again when the reader has
 * written them and named the thread (drain.c). */
enum { FTR_SLOT_FREE = 0, FTR_SLOT_LIVE, FTR_SLOT_ENDED };
struct ftr_region_thread {
    _Atomic uint32_t state;
    uint32_t tid;
    char name[16]; /* as the thread was named last (names.c) */
    uint64_t spare;
};
#define FTR_REGION_SLOTS ((FTR_REGION_HDR - FTR_REGION_SLOT0) / sizeof(struct ftr_region_thread))

/* How far an image's end is: the process stores its end (the END chunk's fields) and says
 * ENDING; whoever drains the region writes the END chunk and says ENDED, with its counts. */
enum { FTR_REGION_RUNNING = 0, FTR_REGION_ENDING, FTR_REGION_ENDED };

/* The region's header. Its first fields are written once by the process that made the region;
 * the rest are shared words (atomics; the futex words are woken without FUTEX_PRIVATE, so that
 * a waiter in another process that maps the file is woken). */
struct ftr_region_hdr {
    uint64_t magic;   /* FTR_REGION_MAGIC */
    uint32_t pid;     /* the process the region belongs to */
    uint32_t seg;     /* chunks per segment */
    uint64_t stride;  /* bytes from a chunk to the next (a whole number of pages) */
    uint64_t bytes;   /* a chunk's size: struct ftr_chunk and its records */
    uint32_t nchunks; /* chunks made so far (atomic; only grows) */
    uint32_t anon;    /* 1: the segments are anonymous memory, not the memfd's */
    /* the pool of free chunks (threads.c): a stack of chunk indices whose head carries a tag */
    _Atomic uint64_t pool_head; /* tag << 32 | (index + 1); 0 index: empty */
    _Atomic uint32_t pool_gen;  /* futex: moves at every release (FTRACE_LOSSLESS waits on it) */
    _Atomic uint32_t full;      /* chunks FULL and not yet taken by the reader */
    _Atomic uint32_t wake;      /* futex: moves when a chunk fills or the image ends */
    _Atomic uint32_t nslots;    /* thread slots ever claimed (1 + the highest index) */
    _Atomic uint64_t holdback_ticks; /* leave records younger than twice this (--threshold) */
    /* the end (enum above): end_state is a futex word */
    _Atomic uint32_t end_state;
    uint32_t end_how; /* enum ftr_end_how */
    int32_t end_code; /* exit status or signal */
    uint32_t pad0;
    uint64_t end_tsc;                                /* when it ended */
    uint64_t end_lost, end_lost_calls, end_overruns; /* the process's counts, at its end */
    uint64_t sites, patched, skipped, through;       /* of its text, at its end */
    /* the reader's counts, final once end_state is ENDED */
    _Atomic uint64_t events, calls, written, dropped;
    _Atomic uint32_t passes; /* partial passes done (ftrace-ctl threshold waits for two) */
    _Atomic int32_t failed;  /* the reader's write error (errno), 0 */
    /* a fork child's image begins when it records more than the frames it re-entered at the
     * fork: quiet_slots records in chunk quiet_chunk (drain.c, news); then news is set */
    uint32_t lazy, quiet_chunk, quiet_slots;
    _Atomic uint32_t news; /* futex: the image has begun (its control server then starts) */
    /* the metadata log: pre-encoded chunks (MODULE, SITES, MARK) the process appends, at
     * meta_off in the file, meta_len bytes of it written (atomic, release) */
    uint64_t meta_off, meta_cap;
    _Atomic uint64_t meta_len;
    _Atomic uint32_t forking; /* forks begun (prepare handler): their children say HELLO */
};

/* Makes this process's region for chunks of bytes each (the constructor: no other thread of
 * the program runs). @return 0, or -1 with errno (no memory at all: not even anonymous). */
int ftr_region_init(size_t bytes) __attribute__((visibility("hidden")));

/* Chunk index's memory (mapped on first use, zero-filled when new), or NULL: beyond the
 * region's cap, or no memory. Any context: mmap only, no lock (a hook's slow path). */
void *ftr_region_chunk(uint32_t index) __attribute__((visibility("hidden")));

/* A fork child: a region of its own, empty; the parent's chunks stay the parent's (the child
 * never writes to them: they are shared with the parent). Runs while the child is one thread.
 * @return 0, or -1 (the child then has anonymous segments). */
int ftr_region_child_fork(void) __attribute__((visibility("hidden")));
/* In a fork child, its parent's header (still shared with the parent) until forget is 1, which
 * unmaps it: what the parent counted of this fork is settled through it (recorder_client.c).
 * @return it, or NULL */
struct ftr_region_hdr *ftr_region_parent(int forget) __attribute__((visibility("hidden")));

/* The region's memfd, or -1 (anonymous segments) */
int ftr_region_fd(void) __attribute__((visibility("hidden")));

/* Appends whole pre-encoded chunks to the region's metadata log (one caller at a time; not
 * from a hook). @return 0, or -1: no memfd, or the log is full */
int ftr_region_meta_append(const void *p, size_t n) __attribute__((visibility("hidden")));

/* The region's header (NULL before ftr_region_init) */
struct ftr_region_hdr *ftr_region_header(void) __attribute__((visibility("hidden")));

#endif
