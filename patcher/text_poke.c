/*
 * text_poke.c - the only code that writes live text.
 *
 * First choice: write through /proc/self/mem, as a debugger does. The pages keep their
 * protection (read+execute) throughout, so a thread that the handshake left asleep in a system
 * call and that wakes up meanwhile finds executable text, the old bytes or the new ones.
 * Fallback (no /proc, or a kernel that refuses forced writes): pages go RX -> RW -> RX, never
 * writable and executable at once (W^X); while a page is RW nothing on it can run.
 *
 * Either way this runs with the other threads parked, one of which may hold a libc lock: no
 * allocation, no stdio, only system calls. The bytes are copied with plain loops and mprotect
 * is a raw system call, so no libc code runs while a page is not executable.
 */
#include "ftr_patcher.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Text was mapped PROT_READ|PROT_EXEC by the loader; that is what we restore. */
#define TEXT_PROT (PROT_READ | PROT_EXEC)

static long raw_mprotect(uint64_t addr, uint64_t len, long prot)
{
    long ret;
    __asm__ volatile("syscall"
                     : "=a"(ret)
                     : "0"((long)SYS_mprotect), "D"(addr), "S"(len), "d"(prot)
                     : "rcx", "r11", "memory");
    return ret; /* -errno on failure */
}

/* Writes the pokes [from, to) that were accepted into the RW span, then checks them. */
static int write_span(const struct ftr_poke *p, size_t from, size_t to, const uint8_t *ok)
{
    int same = 1;
    for (size_t i = from; i < to; i++) {
        if (!ok[i - from]) continue;
        volatile uint8_t *dst = (volatile uint8_t *)(uintptr_t)p[i].addr;
        for (unsigned k = 0; k < p[i].len; k++)
            dst[k] = p[i].bytes[k];
    }
    for (size_t i = from; i < to; i++) {
        if (!ok[i - from]) continue;
        const volatile uint8_t *src = (const volatile uint8_t *)(uintptr_t)p[i].addr;
        for (unsigned k = 0; k < p[i].len; k++)
            same &= src[k] == p[i].bytes[k];
    }
    return same;
}

/* Writes the accepted pokes of [from, to) through /proc/self/mem: each run of nearby pokes as
 * one pwrite of the live bytes with the pokes applied (bytes between them are rewritten with
 * their own value). @return 1 written and read back, 0 the kernel refused, -1 error. */
#define SPAN_MAX 8192
static int write_span_mem(int fd, const struct ftr_poke *p, size_t from, size_t to,
                          const uint8_t *ok)
{
    uint8_t buf[SPAN_MAX];
    size_t i = from;
    while (i < to) {
        while (i < to && !ok[i - from])
            i++;
        if (i == to) break;
        uint64_t lo = p[i].addr, hi = lo;
        size_t j = i;
        for (; j < to; j++) {
            if (!ok[j - from]) continue;
            if (p[j].addr + p[j].len - lo > SPAN_MAX) break;
            if (p[j].addr + p[j].len > hi) hi = p[j].addr + p[j].len;
        }
        const volatile uint8_t *live = (const volatile uint8_t *)(uintptr_t)lo;
        for (uint64_t k = 0; k < hi - lo; k++)
            buf[k] = live[k];
        for (size_t m = i; m < j; m++)
            if (ok[m - from])
                for (unsigned k = 0; k < p[m].len; k++)
                    buf[p[m].addr - lo + k] = p[m].bytes[k];
        ssize_t w = pwrite(fd, buf, hi - lo, (off_t)lo);
        if (w != (ssize_t)(hi - lo))
            return i == from && w < 0 && (errno == EPERM || errno == EACCES || errno == EIO) ? 0
                                                                                             : -1;
        for (size_t m = i; m < j; m++) {
            if (!ok[m - from]) continue;
            const volatile uint8_t *src = (const volatile uint8_t *)(uintptr_t)p[m].addr;
            for (unsigned k = 0; k < p[m].len; k++)
                if (src[k] != p[m].bytes[k]) {
                    errno = EIO;
                    return -1;
                }
        }
        i = j;
    }
    return 1;
}

/* Number of accepted pokes a group may hold before it is flushed (bounded local state). */
#define GROUP_MAX 256

long ftr_text_poke(const struct ftr_poke *p, size_t n, size_t *bad, size_t badcap)
{
    long ps = sysconf(_SC_PAGESIZE);
    const uint64_t page = ps > 0 ? (uint64_t)ps : 4096;
    const uint64_t mask = ~(page - 1);
    long refused = 0;
    size_t nbad = 0;
    size_t i = 0;
    int mem = open("/proc/self/mem", O_RDWR | O_CLOEXEC); /* -1: use mprotect */

    while (i < n) {
        /* A group: consecutive pokes whose pages touch or overlap the group's span, so every
         * page of the span holds part of a poke (a text page) and one mprotect pair serves
         * them all. */
        uint8_t ok[GROUP_MAX];
        uint64_t lo = 0, hi = 0;
        size_t from = i, nok = 0;
        for (; i < n && i - from < GROUP_MAX; i++) {
            size_t len = p[i].len <= FTR_SITE_LEN_MAX ? p[i].len : FTR_SITE_LEN_MAX;
            uint64_t plo = p[i].addr & mask, phi = ((p[i].addr + len - 1) & mask) + page;
            if (nok && (plo < lo || plo > hi)) break;
            ok[i - from] = len && p[i].len <= FTR_SITE_LEN_MAX &&
                           !memcmp((const void *)(uintptr_t)p[i].addr, p[i].expect, len);
            if (!ok[i - from]) {
                refused++;
                if (bad && nbad < badcap) bad[nbad++] = i;
                continue;
            }
            if (!nok++) {
                lo = plo;
                hi = phi;
            } else if (phi > hi) {
                hi = phi;
            }
        }
        if (!nok) continue;
        if (mem >= 0) {
            int w = write_span_mem(mem, p, from, i, ok);
            if (w > 0) continue;
            if (w < 0) {
                int e = errno;
                close(mem);
                errno = e;
                return -1;
            }
            close(mem); /* refused (hardened kernel): mprotect from here on */
            mem = -1;
        }
        long r = raw_mprotect(lo, hi - lo, PROT_READ | PROT_WRITE);
        if (r < 0) {
            errno = (int)-r;
            return -1;
        }
        int same = write_span(p, from, i, ok);
        r = raw_mprotect(lo, hi - lo, TEXT_PROT);
        if (r < 0) {
            errno = (int)-r;
            return -1;
        }
        if (!same) {
            errno = EIO; /* the page did not keep what we wrote: something else maps it */
            return -1;
        }
    }
    if (mem >= 0) close(mem);
    return refused;
}
