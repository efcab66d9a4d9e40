/* Unit tests of the records' memory (preload/runtime/region.c): chunks in a memfd that another
 * mapping of the file sees, segments mapped once, the size kept within RLIMIT_FSIZE, a fork child's
 * region of its own, and no mapping while the descriptor guard moves a descriptor. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "region.h"
#include "tracer.h"

/* what region.c takes from the rest of the preload */
atomic_uint ftr_fd_moves;
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
    int high = fcntl(fd, F_DUPFD_CLOEXEC, 512);
    close(fd);
    return high;
}

#define BYTES (100u * 1024) /* a chunk: 25 pages, so 5 to a segment */

/* The file's bytes at off, read through a descriptor of our own (as a recorder would) */
static void file_read(int fd, uint64_t off, void *buf, size_t n)
{
    char path[64];
    snprintf(path, sizeof path, "/proc/self/fd/%d", fd);
    int mine = open(path, O_RDONLY);
    cr_assert_geq(mine, 0);
    cr_assert_eq(pread(mine, buf, n, (off_t)off), (ssize_t)n);
    close(mine);
}

Test(region, chunks_are_the_files_pages)
{
    cr_assert_eq(ftr_region_init(BYTES), 0);
    int fd = ftr_region_fd();
    cr_assert_geq(fd, 512, "the memfd is out of the program's numbers: %d", fd);
    uint32_t idx[] = {0, 1, 4, 5, 25, 3000};
    for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++) {
        char *c = ftr_region_chunk(idx[i]);
        cr_assert_not_null(c, "chunk %u", idx[i]);
        cr_assert_eq(c[0], 0, "a new chunk is zero");
        snprintf(c, 32, "chunk %u", idx[i]);
        cr_assert_eq(ftr_region_chunk(idx[i]), c, "the same chunk every time");
    }
    cr_assert_eq((char *)ftr_region_chunk(1) - (char *)ftr_region_chunk(0), 25 * 4096);
    struct ftr_region_hdr h;
    file_read(fd, 0, &h, sizeof h);
    cr_assert_eq(h.magic, FTR_REGION_MAGIC);
    cr_assert_eq(h.pid, (uint32_t)getpid());
    cr_assert_eq(h.stride, 25 * 4096);
    cr_assert_eq(h.bytes, BYTES);
    cr_assert_eq(h.seg, 5);
    cr_assert_eq(h.anon, 0);
    cr_assert_eq(h.nchunks, 3001);
    for (size_t i = 0; i < sizeof idx / sizeof idx[0]; i++) {
        char want[32], got[32];
        snprintf(want, sizeof want, "chunk %u", idx[i]);
        file_read(fd, FTR_REGION_HDR + (uint64_t)idx[i] * h.stride, got, sizeof got);
        cr_assert_str_eq(got, want);
    }
}

/* A segment is not mapped while the guard moves a descriptor (the number may be the
 * program's file a moment later); one mapped before stays usable. */
Test(region, no_mapping_during_a_move)
{
    cr_assert_eq(ftr_region_init(BYTES), 0);
    cr_assert_not_null(ftr_region_chunk(0));
    atomic_store(&ftr_fd_moves, 1);
    cr_assert_not_null(ftr_region_chunk(4), "segment 0 is mapped already");
    cr_assert_null(ftr_region_chunk(5), "segment 1 would be mapped during a move");
    atomic_store(&ftr_fd_moves, 2);
    cr_assert_not_null(ftr_region_chunk(5));
}

/* Beyond RLIMIT_FSIZE, sizing the file would be a SIGXFSZ: the region is capped by it, or
 * anonymous when it would not hold a few chunks. */
Test(region, file_size_limit_capped, .signal = 0)
{
    struct rlimit lim = {10u << 20, RLIM_INFINITY};
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    cr_assert_eq(ftr_region_init(256u * 1024), 0);
    cr_assert_geq(ftr_region_fd(), 0);
    /* 10 MiB less the header (64 KiB), of which an eighth goes to the metadata log: 34 chunks
     * of 256 KiB */
    cr_assert_not_null(ftr_region_chunk(33));
    cr_assert_null(ftr_region_chunk(34));
}

Test(region, file_size_limit_tiny, .signal = 0)
{
    struct rlimit lim = {1u << 20, RLIM_INFINITY};
    cr_assert_eq(setrlimit(RLIMIT_FSIZE, &lim), 0);
    cr_assert_eq(ftr_region_init(256u * 1024), 0);
    cr_assert_eq(ftr_region_fd(), -1, "3 chunks would fit: anonymous instead");
    char *c = ftr_region_chunk(100);
    cr_assert_not_null(c);
    c[0] = 1;
}

/* A fork child's chunks are its own: not the parent's pages, in a file of its own. */
Test(region, fork_child_region_of_its_own)
{
    cr_assert_eq(ftr_region_init(BYTES), 0);
    char *c = ftr_region_chunk(0);
    strcpy(c, "parent");
    struct stat ps;
    cr_assert_eq(fstat(ftr_region_fd(), &ps), 0);
    pid_t pid = fork();
    if (pid == 0) {
        int bad = ftr_region_child_fork() != 0;
        struct stat cs;
        char *cc = ftr_region_chunk(0);
        bad |= !cc || cc[0] != 0 || fstat(ftr_region_fd(), &cs) != 0 || cs.st_ino == ps.st_ino;
        if (!bad) strcpy(cc, "child");
        _exit(bad);
    }
    int st;
    cr_assert_eq(waitpid(pid, &st, 0), pid);
    cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "child status %#x", st);
    cr_assert_str_eq(c, "parent", "the child wrote into the parent's chunk");
}
