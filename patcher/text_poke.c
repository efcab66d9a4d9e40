/*
 * text_poke.c - rewrite sites, alone or while other threads run them.
 *
 * Decide, verify, write. Every poke names the bytes that must be there now (expect) and the
 * bytes it writes. Both ways first read the live bytes of every poke (through
 * /proc/thread-self/mem, so that an unloaded page is a refusal, not a fault) and refuse those
 * that differ; then:
 *
 * Alone (ftr_text_poke): no other thread can run the text (the process has one thread, as at
 * start-up, or the others are parked). The bytes are written as they are, with this thread's
 * signals blocked so that none of its handlers runs a half-written site.
 *
 * Live (ftr_text_poke_live): the kernel's text_poke_bp_batch() (arch/x86/kernel/alternative.c).
 *   1. publish the batch: a table, sorted by address, of what each site is becoming;
 *   2. int3 (cc) on the first byte of every site; serialise every core;
 *   3. the tail bytes (1..len-1); serialise;
 *   4. the first bytes; serialise;
 *   5. retire the table once no trap handler is still reading it.
 * A thread that reaches a site between 2 and 4 executes the int3: a synchronous SIGTRAP, which
 * never interrupts a system call. ftr_bp_trap() finds the site in the table and sends the
 * thread on as the new instruction would (x86_64_gen.c's ftr_x86_emulation(): a NOP goes on
 * at the end of the site, a CALL pushes the end of the site and goes to the stub). No thread
 * can fetch a torn site: until the int3 is visible everywhere (the first sync), every byte is
 * the old instruction's; after it, the first byte is the int3 until the last step, and the int3
 * is a single byte. Intel SDM 3A 8.1.3 and the AMD APM (cross-modifying code) require the
 * serialisation of every core that may run the code; membarrier(SYNC_CORE) gives it.
 * A thread whose trap is handled after its int3 is gone (it trapped just before step 4 and was
 * slow to run its handler) finds a site that is no longer cc: it runs the site again.
 *
 * Not covered, by design: a thread stopped *inside* a site (between the five 1-byte NOPs of
 * -fpatchable-function-entry) would run the new tail bytes as instructions; stw.c parks and
 * moves such threads before such sites are first converted.
 *
 * Only mmap for memory, only system calls: other threads may be parked inside malloc.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>
#include <linux/membarrier.h>

#include "ftr_patcher.h"
#include "text_io.h"

/* Sites written per breakpoint batch (three serialisations each). */
#define FTR_POKE_SLICE 1024

/* ---- the batch being written, as the trap handler sees it ---- */
struct bp_table {
    size_t n;
    const struct ftr_emu *emu; /* sorted by addr */
};
static struct bp_table tables[2];          /* [0] the live batch, [1] a batch left unfinished */
static _Atomic(struct bp_table *) current; /* &tables[0] while a batch runs, else NULL */
static _Atomic(struct bp_table *) wedged;  /* a batch whose int3s could not all be removed */
static atomic_int inflight;                /* trap handlers reading a table now */
static atomic_ullong ntraps;
static int have_sync_core;

static const struct ftr_emu *lookup(const struct bp_table *t, uint64_t addr)
{
    size_t lo = 0, hi = t->n;
    while (lo < hi) {
        size_t mid = lo + (hi - lo) / 2;
        if (t->emu[mid].addr < addr)
            lo = mid + 1;
        else
            hi = mid;
    }
    return lo < t->n && t->emu[lo].addr == addr ? &t->emu[lo] : NULL;
}

int ftr_bp_trap(const void *siginfo, void *ucontext)
{
    const siginfo_t *si = siginfo;
    ucontext_t *uc = ucontext;
    if (si->si_code != SI_KERNEL) return 0; /* int3 raises SIGTRAP with SI_KERNEL */
    uint64_t addr = (uint64_t)uc->uc_mcontext.gregs[REG_RIP] - 1;
    int ours = 0;
    atomic_fetch_add(&inflight, 1);
    const volatile uint8_t *code = (const volatile uint8_t *)(uintptr_t)addr;
    const struct ftr_emu *e = NULL;
    struct bp_table *t = atomic_load(&current);
    if (t) e = lookup(t, addr);
    if (!e && (t = atomic_load(&wedged)) != NULL) e = lookup(t, addr);
    if (e && code[0] == 0xcc) {
        greg_t *g = uc->uc_mcontext.gregs;
        if (e->kind == FTR_EMU_CALL) {
            uint64_t sp = (uint64_t)g[REG_RSP] - 8; /* what the call would have pushed */
            *(volatile uint64_t *)(uintptr_t)sp = e->next;
            g[REG_RSP] = (greg_t)sp;
        }
        g[REG_RIP] = (greg_t)e->target;
        ours = 1;
    } else if (code[0] != 0xcc && !(code[0] == 0x03 && (addr & 0xfff) && code[-1] == 0xcd)) {
        /* The int3 that trapped is gone: one of ours, removed since (a program's own int3s stay;
         * `int $3` is cd 03). Run the site's final bytes. */
        uc->uc_mcontext.gregs[REG_RIP] = (greg_t)addr;
        ours = 1;
    }
    atomic_fetch_sub(&inflight, 1);
    if (ours) atomic_fetch_add_explicit(&ntraps, 1, memory_order_relaxed);
    return ours;
}

uint64_t ftr_bp_traps(void)
{
    return atomic_load_explicit(&ntraps, memory_order_relaxed);
}

int ftr_bp_init(char *err, size_t errlen)
{
    if (have_sync_core) return 0;
    if (syscall(SYS_membarrier, MEMBARRIER_CMD_REGISTER_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) != 0) {
        if (err) {
            int e = errno;
            size_t k = 0;
            const char *m = "this kernel has no membarrier(SYNC_CORE): ";
            while (m[k] && k + 1 < errlen) {
                err[k] = m[k];
                k++;
            }
            const char *s = strerror(e);
            for (size_t j = 0; s[j] && k + 1 < errlen; j++)
                err[k++] = s[j];
            if (errlen) err[k] = 0;
        }
        return -1;
    }
    have_sync_core = 1;
    return 0;
}

static void cpuid_serialise(void)
{
    unsigned a = 0, b, c = 0, d;
    __asm__ volatile("cpuid" : "+a"(a), "=b"(b), "+c"(c), "=d"(d) : : "memory");
}

int ftr_bp_sync(void)
{
    int rc = have_sync_core &&
                     syscall(SYS_membarrier, MEMBARRIER_CMD_PRIVATE_EXPEDITED_SYNC_CORE, 0, 0) == 0
                 ? 0
                 : -1;
    cpuid_serialise();
    return rc;
}

/* ---- preparing a batch ---- */
struct batch {
    void *mem;
    size_t bytes;
    uint32_t *order; /* poke indices by address */
    uint8_t *ok;     /* per poke index: 1 accepted, 0 refused */
    struct ftr_piece *pc;
    struct ftr_emu *emu;
    size_t nok;
};

static void sift(uint32_t *a, const struct ftr_poke *p, size_t i, size_t n)
{
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) return;
        if (c + 1 < n && p[a[c + 1]].addr > p[a[c]].addr) c++;
        if (p[a[i]].addr >= p[a[c]].addr) return;
        uint32_t t = a[i];
        a[i] = a[c];
        a[c] = t;
        i = c;
    }
}

/* Heap sort (no allocation, no recursion) of the indices by address. */
static void sort_by_addr(uint32_t *a, const struct ftr_poke *p, size_t n)
{
    for (size_t i = n / 2; i-- > 0;)
        sift(a, p, i, n);
    for (size_t end = n; end-- > 1;) {
        uint32_t t = a[0];
        a[0] = a[end];
        a[end] = t;
        sift(a, p, 0, end);
    }
}

/* Reads the live bytes of every poke (by address, a window of up to FTR_TEXTIO_SPAN bytes per
 * read) and accepts those that match. live: also demands a state the trap handler can emulate. */
static int prepare(const struct ftr_poke *p, size_t n, int fd, int live, struct batch *b)
{
    memset(b, 0, sizeof *b);
    size_t bytes = n * (sizeof *b->order + sizeof *b->ok + sizeof *b->pc + sizeof *b->emu) + 64;
    b->mem = ftr_textio_scratch(bytes);
    if (!b->mem) return -1;
    b->bytes = bytes;
    b->emu = b->mem;
    b->pc = (struct ftr_piece *)(b->emu + n);
    b->order = (uint32_t *)(b->pc + n);
    b->ok = (uint8_t *)(b->order + n);
    int sorted = 1;
    for (size_t i = 0; i < n; i++) {
        b->order[i] = (uint32_t)i;
        sorted &= i == 0 || p[i - 1].addr <= p[i].addr;
    }
    if (!sorted) sort_by_addr(b->order, p, n);

    uint8_t win[FTR_TEXTIO_SPAN];
    uint64_t wlo = 0, whi = 0, last_end = 0;
    for (size_t k = 0; k < n; k++) {
        const struct ftr_poke *q = &p[b->order[k]];
        int ok = q->len >= 1 && q->len <= FTR_SITE_LEN_MAX && q->addr >= last_end;
        struct ftr_emu e;
        if (ok && live) ok = ftr_x86_emulation(q->bytes, q->len, q->addr, &e) == 0;
        if (ok && (q->addr < wlo || q->addr + q->len > whi)) {
            if (fd >= 0) {
                ssize_t r;
                do
                    r = pread(fd, win, sizeof win, (off_t)q->addr);
                while (r < 0 && errno == EINTR);
                wlo = q->addr;
                whi = r > 0 ? wlo + (uint64_t)r : wlo;
            } else {
                ftr_textio_read(-1, q->addr, win, q->len);
                wlo = q->addr;
                whi = wlo + q->len;
            }
        }
        ok = ok && q->addr + q->len <= whi && !memcmp(win + (q->addr - wlo), q->expect, q->len);
        b->ok[b->order[k]] = (uint8_t)ok;
        if (!ok) continue;
        last_end = q->addr + q->len;
        if (live) b->emu[b->nok] = e;
        b->order[b->nok++] = b->order[k]; /* order now lists the accepted pokes only */
    }
    return 0;
}

/* Refused pokes into bad[] (ascending index), @return their number. */
static long report_refused(const struct batch *b, size_t n, size_t *bad, size_t badcap)
{
    long refused = 0;
    size_t nbad = 0;
    for (size_t i = 0; i < n; i++)
        if (!b->ok[i]) {
            refused++;
            if (bad && nbad < badcap) bad[nbad++] = i;
        }
    return refused;
}

static void block_signals(sigset_t *old)
{
    sigset_t all;
    sigfillset(&all);
    /* faults stay deliverable: blocked, a fault would kill the process */
    sigdelset(&all, SIGSEGV);
    sigdelset(&all, SIGBUS);
    sigdelset(&all, SIGILL);
    sigdelset(&all, SIGFPE);
    sigdelset(&all, SIGTRAP);
    syscall(SYS_rt_sigprocmask, SIG_BLOCK, &all, old, _NSIG / 8);
}

static void restore_signals(const sigset_t *old)
{
    syscall(SYS_rt_sigprocmask, SIG_SETMASK, old, NULL, _NSIG / 8);
}

long ftr_text_poke(const struct ftr_poke *p, size_t n, size_t *bad, size_t badcap)
{
    if (n == 0) return 0;
    int fd = ftr_textio_open(); /* -1: read directly, write with mprotect */
    struct batch b;
    if (prepare(p, n, fd, 0, &b) < 0) {
        ftr_textio_close(fd);
        return -1;
    }
    for (size_t k = 0; k < b.nok; k++) {
        const struct ftr_poke *q = &p[b.order[k]];
        b.pc[k].addr = q->addr;
        b.pc[k].len = q->len;
        memcpy(b.pc[k].bytes, q->bytes, q->len);
    }
    sigset_t old;
    block_signals(&old);
    int w = fd >= 0 ? ftr_textio_write(fd, b.pc, b.nok, NULL) : 0;
    if (w == 0) w = ftr_textio_write_mprotect(b.pc, b.nok) == 0 ? 1 : -1;
    int e = errno;
    restore_signals(&old);
    long refused = report_refused(&b, n, bad, badcap);
    ftr_textio_scratch_free(b.mem, b.bytes);
    ftr_textio_close(fd);
    errno = e;
    return w < 0 ? -1 : refused;
}

static uint64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Fills b->pc with one piece per accepted poke of [from, to) whose bytes change: the int3
 * (step 2), the tails (3) or the first bytes (4). @return the number of pieces. */
enum { STEP_INT3, STEP_TAILS, STEP_FIRST };
static size_t pieces(const struct ftr_poke *p, struct batch *b, size_t from, size_t to, int step)
{
    size_t m = 0;
    for (size_t k = from; k < to; k++) {
        const struct ftr_poke *q = &p[b->order[k]];
        if (!memcmp(q->expect, q->bytes, q->len)) continue; /* already in that state */
        struct ftr_piece *pc = &b->pc[m];
        if (step == STEP_TAILS) {
            if (!memcmp(q->expect + 1, q->bytes + 1, q->len - 1u)) continue;
            pc->addr = q->addr + 1;
            pc->len = (uint8_t)(q->len - 1);
            memcpy(pc->bytes, q->bytes + 1, pc->len);
        } else {
            pc->addr = q->addr;
            pc->len = 1;
            pc->bytes[0] = step == STEP_INT3 ? 0xcc : q->bytes[0];
        }
        m++;
    }
    return m;
}

/* Takes the table away from the trap handlers; @return 1 when no handler reads it any more
 * (its memory may go), 0 when one is still inside after a while (then it is kept). */
static int retire(void)
{
    atomic_store(&current, NULL);
    for (int spin = 0; atomic_load(&inflight) != 0; spin++) {
        if (spin > 100000) return 0;
        sched_yield();
    }
    return 1;
}

long ftr_text_poke_live(const struct ftr_poke *p, size_t n, size_t *bad, size_t badcap,
                        struct ftr_poke_stats *st)
{
    struct ftr_poke_stats local = {0};
    if (!st) st = &local;
    memset(st, 0, sizeof *st);
    if (n == 0) return 0;
    if (!have_sync_core || atomic_load(&wedged)) {
        errno = ENOSYS;
        return -1;
    }
    int fd = ftr_textio_open();
    if (fd < 0) {
        errno = EPERM;
        return -1;
    }
    struct batch b;
    if (prepare(p, n, fd, 1, &b) < 0) {
        ftr_textio_close(fd);
        return -1;
    }
    uint64_t t0 = now_ns(), traps0 = ftr_bp_traps();
    int rc = 1, e = 0, gone = 1;
    /* In slices, as the kernel's batches: a site holds its int3 only while its slice is being
     * written, so a thread that keeps calling it traps for that long, not for the whole batch. */
    for (size_t from = 0; from < b.nok && rc > 0; from += FTR_POKE_SLICE) {
        size_t to = b.nok - from > FTR_POKE_SLICE ? from + FTR_POKE_SLICE : b.nok;
        tables[0].n = to - from;
        tables[0].emu = b.emu + from;
        atomic_store(&current, &tables[0]); /* the table before any int3 */
        unsigned writes0 = st->writes;
        size_t m = pieces(p, &b, from, to, STEP_INT3);
        if (m) {
            rc = ftr_textio_write(fd, b.pc, m, &st->writes);
            if (rc > 0) {
                ftr_bp_sync();
                st->syncs++;
                size_t t = pieces(p, &b, from, to, STEP_TAILS);
                if (t && (rc = ftr_textio_write(fd, b.pc, t, &st->writes)) > 0) {
                    ftr_bp_sync();
                    st->syncs++;
                }
                if (rc > 0) {
                    rc = ftr_textio_write(fd, b.pc, pieces(p, &b, from, to, STEP_FIRST),
                                          &st->writes);
                    ftr_bp_sync();
                    st->syncs++;
                }
            }
            if (rc < 0 || (rc == 0 && st->writes > writes0 + 1)) {
                /* Some first bytes may stay int3: the table must outlive them, and the handler
                 * keeps sending threads on as the new bytes would. No more live batches. */
                e = rc == 0 ? EIO : errno;
                tables[1] = tables[0];
                atomic_store(&wedged, &tables[1]);
                atomic_store(&current, NULL);
                ftr_textio_close(fd);
                errno = e;
                return -1;
            }
            if (rc == 0) e = EPERM; /* the kernel refused the very first write: nothing changed */
        }
        gone &= retire();
    }
    st->ns = now_ns() - t0;
    st->traps = ftr_bp_traps() - traps0;
    long refused = report_refused(&b, n, bad, badcap);
    if (gone) ftr_textio_scratch_free(b.mem, b.bytes); /* else a slow handler may still read it */
    ftr_textio_close(fd);
    if (rc <= 0) {
        errno = e;
        return -1;
    }
    return refused;
}
