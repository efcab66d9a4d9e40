/*
 * text_io.h - reading and writing live text. Shall only be used within patcher/ (text_poke.c).
 *
 * Text is written through /proc/thread-self/mem, as a debugger writes it: the pages keep
 * PROT_READ|PROT_EXEC throughout, so a thread that runs them meanwhile finds executable text.
 * (/proc/thread-self, not /proc/self: after the main thread called pthread_exit(), /proc/self
 * is a zombie whose mem cannot be opened.) Reads go through the same file, so that a page that
 * is not mapped (a library unloaded meanwhile) is an error, never a fault.
 * No allocation, no stdio: this runs while other threads may be parked holding libc locks.
 */
#ifndef FTR_TEXT_IO_H
#define FTR_TEXT_IO_H

#include <stddef.h>
#include <stdint.h>

#include "ftr_patcher.h"

/* One small write: len bytes at addr. Arrays of pieces are sorted by addr, non-overlapping. */
struct ftr_piece {
    uint64_t addr;
    uint8_t len;
    uint8_t bytes[FTR_SITE_LEN_MAX];
};

/* Longest run of text one pwrite() covers (text_poke.c's spans). */
#define FTR_TEXTIO_SPAN 8192

/*! ftr_textio_open() : @return a descriptor on this process's memory, or -1 (errno). */
int ftr_textio_open(void);
void ftr_textio_close(int fd);

/*! ftr_textio_read() : len bytes at addr into buf; through fd, or directly when fd < 0 (the
 *  caller knows the range is mapped). @return 0, or -1 (a missing page: EIO/EFAULT). */
int ftr_textio_read(int fd, uint64_t addr, void *buf, size_t len);

/*! ftr_textio_pwrite() : len bytes from buf at addr, through fd (EINTR retried).
 *  @return 1, 0 refused by the kernel (EPERM, EACCES, EIO), -1 other error (errno). */
int ftr_textio_pwrite(int fd, uint64_t addr, const void *buf, size_t len);

/*! ftr_textio_write_mprotect() : the fallback for callers that are alone (no other thread can
 *  run the pages meanwhile): each page group RX -> RW -> written -> RX, never W and X at once.
 *  @return 0 or -1 (errno). */
int ftr_textio_write_mprotect(const struct ftr_piece *pc, size_t n);

/* Scratch memory for a batch: anonymous mmap, so it works with other threads parked inside
 * malloc. */
void *ftr_textio_scratch(size_t bytes);
void ftr_textio_scratch_free(void *p, size_t bytes);
/* p (from ftr_textio_scratch) is never freed: a trap handler may still read it. */
void ftr_textio_scratch_keep(void *p);

#endif /* FTR_TEXT_IO_H */
