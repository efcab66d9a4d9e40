/*
 * text_poke.c - the only code that writes live text.
 *
 * Pages go RX -> RW -> RX, never writable and executable at once (W^X). While a page is RW
 * nothing on it can run; the caller guarantees no other thread runs there (stop-the-world),
 * and this file makes sure the calling thread does not either: the bytes are copied with a
 * plain loop and mprotect is a raw system call, so no libc code is needed while a page is not
 * executable (its pages could be among the poked ones if libc itself were a target).
 */
#include "ftr_patcher.h"

#include <errno.h>
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
    return refused;
}
