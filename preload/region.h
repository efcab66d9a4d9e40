/*
 * region.h - the memory a process's records are written in.
 *
 * Chunks live in a memfd of the process's own, mapped MAP_SHARED: records stored there outlive
 * the process (any death, SIGKILL included) for whoever holds the memfd, and another process
 * can read them while they are written (docs/design.md, "Where the machinery lives"). The file
 * is a header page, then chunk after chunk at fixed offsets (chunk i at FTR_REGION_HDR +
 * i * stride); it is mapped in segments of a few chunks, each when its first chunk is wanted.
 * Where no memfd can be made (a kernel or sandbox without memfd_create), the segments are
 * anonymous memory: tracing goes on as before, only the records die with the process.
 */
#ifndef FTR_REGION_H
#define FTR_REGION_H

#include <stddef.h>
#include <stdint.h>

#define FTR_REGION_MAGIC 0x31474552525446ull /* "FTRREG1" little-endian, in the header page */
#define FTR_REGION_HDR 4096u                 /* the header page: struct ftr_region_hdr */

/* The region's first page. Written once by the process that made the region; every field a
 * reader needs to find the chunks. */
struct ftr_region_hdr {
    uint64_t magic;   /* FTR_REGION_MAGIC */
    uint32_t pid;     /* the process the region belongs to */
    uint32_t seg;     /* chunks per segment */
    uint64_t stride;  /* bytes from a chunk to the next (a whole number of pages) */
    uint64_t bytes;   /* a chunk's size: struct ftr_chunk and its records */
    uint32_t nchunks; /* chunks made so far (atomic; only grows) */
    uint32_t anon;    /* 1: the segments are anonymous memory, not the memfd's */
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

/* The region's memfd, or -1 (anonymous segments) */
int ftr_region_fd(void) __attribute__((visibility("hidden")));

#endif
