/*
 * text_io.c - the only code that reads and writes live text (see text_io.h).
 *
 * Only system calls and plain loops: this runs while other threads may be parked holding libc
 * locks, and with the mprotect fallback while a page is not executable, so no libc code that
 * could live on such a page may run meanwhile (mprotect is a raw system call).
 */
#define _GNU_SOURCE
#include "text_io.h"

#include <errno.h>
#include <stdatomic.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TEXT_PROT (PROT_READ | PROT_EXEC) /* what the loader mapped text with; restored */

int ftr_textio_open(void)
{
    int fd = open("/proc/thread-self/mem", O_RDWR | O_CLOEXEC);
    if (fd < 0) fd = open("/proc/self/mem", O_RDWR | O_CLOEXEC); /* kernels before 3.17 */
    return fd;
}

void ftr_textio_close(int fd)
{
    if (fd >= 0) close(fd);
}

int ftr_textio_read(int fd, uint64_t addr, void *buf, size_t len)
{
    if (fd < 0) {
        const volatile uint8_t *src = (const volatile uint8_t *)(uintptr_t)addr;
        uint8_t *dst = buf;
        for (size_t k = 0; k < len; k++)
            dst[k] = src[k];
        return 0;
    }
    size_t done = 0;
    while (done < len) {
        ssize_t r = pread(fd, (uint8_t *)buf + done, len - done, (off_t)(addr + done));
        if (r <= 0) {
            if (r < 0 && errno == EINTR) continue;
            if (r == 0) errno = EIO;
            return -1;
        }
        done += (size_t)r;
    }
    return 0;
}

int ftr_textio_pwrite(int fd, uint64_t addr, const void *buf, size_t len)
{
    ssize_t w;
    do
        w = pwrite(fd, buf, len, (off_t)addr);
    while (w < 0 && errno == EINTR);
    if (w == (ssize_t)len) return 1;
    if (w < 0 && (errno == EPERM || errno == EACCES || errno == EIO)) return 0;
    if (w >= 0) errno = EIO;
    return -1;
}

static long raw_mprotect(uint64_t addr, uint64_t len, long prot)
{
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"((long)SYS_mprotect), "D"(addr), "S"(len), "d"(prot)
                     : "rcx", "r11", "memory");
    return ret; /* -errno on failure */
}

int ftr_textio_write_mprotect(const struct ftr_piece *pc, size_t n)
{
    long ps = sysconf(_SC_PAGESIZE);
    const uint64_t page = ps > 0 ? (uint64_t)ps : 4096, mask = ~(page - 1);
    size_t i = 0;
    while (i < n) {
        /* a group: pieces whose pages touch, so that every page of [lo, hi) holds text */
        uint64_t lo = pc[i].addr & mask, hi = ((pc[i].addr + pc[i].len - 1) & mask) + page;
        size_t j = i + 1;
        for (; j < n && (pc[j].addr & mask) <= hi; j++)
            hi = ((pc[j].addr + pc[j].len - 1) & mask) + page;
        long r = raw_mprotect(lo, hi - lo, PROT_READ | PROT_WRITE);
        if (r < 0) {
            errno = (int)-r;
            return -1;
        }
        int same = 1;
        for (size_t m = i; m < j; m++) {
            volatile uint8_t *dst = (volatile uint8_t *)(uintptr_t)pc[m].addr;
            for (unsigned k = 0; k < pc[m].len; k++)
                dst[k] = pc[m].bytes[k];
            for (unsigned k = 0; k < pc[m].len; k++)
                same &= dst[k] == pc[m].bytes[k];
        }
        r = raw_mprotect(lo, hi - lo, TEXT_PROT);
        if (r < 0) {
            errno = (int)-r;
            return -1;
        }
        if (!same) {
            errno = EIO;
            return -1;
        }
        i = j;
    }
    return 0;
}

/* One mapping is kept from batch to batch (rewrites are serialised by their callers; a second
 * one at the same time gets its own): its pages stay faulted in. */
static void *cache;
static size_t cache_len;
static atomic_flag cache_busy = ATOMIC_FLAG_INIT;

void *ftr_textio_scratch(size_t bytes)
{
    if (!bytes) bytes = 1;
    if (!atomic_flag_test_and_set(&cache_busy)) {
        if (cache && cache_len >= bytes) return cache;
        if (cache) munmap(cache, cache_len);
        cache_len = (bytes + 0xffff) & ~(size_t)0xffff;
        cache = mmap(NULL, cache_len, PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (cache != MAP_FAILED) return cache;
        cache = NULL;
        cache_len = 0;
        atomic_flag_clear(&cache_busy);
        return NULL;
    }
    void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE,
                   -1, 0);
    return p == MAP_FAILED ? NULL : p;
}

void ftr_textio_scratch_free(void *p, size_t bytes)
{
    if (!p) return;
    if (p == cache) {
        atomic_flag_clear(&cache_busy);
        return;
    }
    munmap(p, bytes ? bytes : 1);
}

void ftr_textio_scratch_keep(void *p)
{
    if (p == cache) { /* it stays someone's for good: the next batch maps a new one */
        cache = NULL;
        cache_len = 0;
        atomic_flag_clear(&cache_busy);
    }
}
