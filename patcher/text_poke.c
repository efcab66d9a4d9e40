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
static atomic_uint table_seq;              /* bumped when a table is published or retired */
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

/* Not instrumented by sanitizers: it writes below another context's stack pointer (what the
 * emulated call pushes), memory a sanitizer may still hold poisoned from frames that were
 * there before. */
__attribute__((no_sanitize("address", "undefined"))) int ftr_bp_trap(const void *siginfo,
                                                                     void *ucontext)
{
    const siginfo_t *si = siginfo;
    ucontext_t *uc = ucontext;
    if (si->si_code != SI_KERNEL) return 0; /* int3 raises SIGTRAP with SI_KERNEL */
    uint64_t addr = (uint64_t)uc->uc_mcontext.gregs[REG_RIP] - 1;
    const volatile uint8_t *code = (const volatile uint8_t *)(uintptr_t)addr;
    greg_t *g = uc->uc_mcontext.gregs;
    int ours = 0;
    atomic_fetch_add(&inflight, 1);
    /* The byte, then the tables, then the sequence again. A table is published (then
     * table_seq bumped) before its int3s are written; once they are gone, table_seq is bumped,
     * then the table retired. So an int3 read between two equal sequence numbers with no
     * table holding it is not ours; with different ones, a batch began or ended meanwhile:
     * look again. (Retiring first and bumping after would let a handler read our int3, then
     * no table, then the old number: a thread killed by its own SIGTRAP.) */
    for (int tries = 0; tries < 64; tries++) {
        unsigned seq = atomic_load(&table_seq);
        uint8_t b = code[0];
        if (b != 0xcc) {
            /* The int3 that trapped is gone: one of ours, removed since (a program's own int3s
             * stay; `int $3` is cd 03). Run the site's final bytes. */
            ours = !(b == 0x03 && (addr & 0xfff) && code[-1] == 0xcd);
            if (ours) g[REG_RIP] = (greg_t)addr;
            break;
        }
        const struct ftr_emu *e = NULL;
        struct bp_table *t = atomic_load(&current);
        if (t) e = lookup(t, addr);
        if (!e && (t = atomic_load(&wedged)) != NULL) e = lookup(t, addr);
        if (e) {
            if (e->kind == FTR_EMU_CALL) {
                uint64_t sp = (uint64_t)g[REG_RSP] - 8; /* what the call would have pushed */
                *(volatile uint64_t *)(uintptr_t)sp = e->next;
                g[REG_RSP] = (greg_t)sp;
            }
            g[REG_RIP] = (greg_t)e->target;
            ours = 1;
            break;
        }
        if (atomic_load(&table_seq) == seq) break; /* a program's own int3 */
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

/* ---- preparing a batch ----
 * The accepted pokes are grouped into spans: runs of nearby sites (gaps of at most SPAN_GAP
 * bytes, FTR_TEXTIO_SPAN bytes at most) whose live text is read once into an image. Each step
 * then changes the image and writes whole spans back with one pwrite() each (the bytes between
 * sites with the value they have: only we write text); a last read checks every span. */
#define SPAN_GAP 512

struct span {
    uint64_t lo;
    uint32_t len;      /* bytes of the image */
    uint32_t img;      /* offset of its image in batch.image */
    uint32_t from, to; /* its pokes: batch.order[from, to) */
};

struct batch {
    void *mem;
    size_t bytes;
    uint32_t *order; /* poke indices by address; after prepare(), the accepted ones */
    uint8_t *ok;     /* per poke index: 1 accepted, 0 refused */
    struct ftr_emu *emu;
    struct span *span;
    uint8_t *image;
    size_t nok, nspan;
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

static int same(const uint8_t *a, const uint8_t *b, unsigned n)
{
    unsigned d = 0;
    for (unsigned i = 0; i < n; i++)
        d |= a[i] ^ b[i];
    return d == 0;
}

/* The spans of the sorted pokes order[0, n), into out; @return their number. */
static size_t group(const struct ftr_poke *p, const uint32_t *order, size_t n, struct span *out)
{
    size_t ns = 0;
    for (size_t k = 0; k < n;) {
        uint64_t lo = p[order[k]].addr, hi = lo + p[order[k]].len;
        size_t j = k + 1;
        for (; j < n; j++) {
            const struct ftr_poke *q = &p[order[j]];
            if (q->addr < hi || q->addr - hi > SPAN_GAP || q->addr + q->len - lo > FTR_TEXTIO_SPAN)
                break; /* (an overlap starts a span of its own: it is refused below) */
            hi = q->addr + q->len;
        }
        out[ns] = (struct span){
            .lo = lo, .len = (uint32_t)(hi - lo), .from = (uint32_t)k, .to = (uint32_t)j};
        ns++;
        k = j;
    }
    return ns;
}

/* Reads the live text of every span and accepts the pokes whose bytes match (a missing page
 * refuses them). live: also demands a state the trap handler can emulate. */
static int prepare(const struct ftr_poke *p, size_t n, int fd, int live, struct batch *b)
{
    memset(b, 0, sizeof *b);
    /* one scratch for all: a span's image is at most the sum of its sites and of the gaps
     * between them, so n * (FTR_SITE_LEN_MAX + SPAN_GAP) bounds every image together (only
     * what is used is ever touched) */
    size_t bytes = n * (sizeof *b->emu + sizeof *b->span + sizeof *b->order + sizeof *b->ok +
                        FTR_SITE_LEN_MAX + SPAN_GAP) +
                   64;
    void *mem = ftr_textio_scratch(bytes);
    if (!mem) return -1;
    b->mem = mem;
    b->bytes = bytes;
    b->emu = mem;
    b->span = (struct span *)(b->emu + n);
    b->order = (uint32_t *)(b->span + n);
    b->ok = (uint8_t *)(b->order + n);
    b->image = b->ok + n;
    int sorted = 1;
    for (size_t i = 0; i < n; i++) {
        b->order[i] = (uint32_t)i;
        sorted &= i == 0 || p[i - 1].addr <= p[i].addr;
    }
    if (!sorted) sort_by_addr(b->order, p, n);
    size_t ns = group(p, b->order, n, b->span);

    size_t off = 0, nok = 0, nspan = 0;
    for (size_t si = 0; si < ns; si++) {
        struct span sp = b->span[si];
        uint8_t *im = b->image + off;
        size_t got = sp.len; /* readable bytes from sp.lo */
        if (fd >= 0) {
            ssize_t r;
            do
                r = pread(fd, im, sp.len, (off_t)sp.lo);
            while (r < 0 && errno == EINTR);
            got = r > 0 ? (size_t)r : 0;
        } else {
            ftr_textio_read(-1, sp.lo, im, sp.len);
        }
        size_t first = nok;
        for (uint32_t k = sp.from; k < sp.to; k++) {
            const struct ftr_poke *q = &p[b->order[k]];
            uint64_t at = q->addr - sp.lo;
            int ok = q->len >= 1 && q->len <= FTR_SITE_LEN_MAX && at + q->len <= got &&
                     same(im + at, q->expect, q->len) &&
                     (k == sp.from || q->addr >= p[b->order[k - 1]].addr + p[b->order[k - 1]].len);
            struct ftr_emu e;
            if (ok && live) ok = ftr_x86_emulation(q->bytes, q->len, q->addr, &e) == 0;
            b->ok[b->order[k]] = (uint8_t)ok;
            if (!ok) continue;
            if (live) b->emu[nok] = e;
            b->order[nok++] = b->order[k]; /* the accepted pokes, in address order */
        }
        if (nok == first) continue; /* nothing to write here */
        sp.from = (uint32_t)first;
        sp.to = (uint32_t)nok;
        sp.img = (uint32_t)off;
        b->span[nspan++] = sp;
        off += sp.len;
    }
    b->nok = nok;
    b->nspan = nspan;
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

/* What each step puts into the image of the pokes of a span: everything (alone), the int3,
 * the tails, the first bytes (live). @return 1 when a byte changed. */
enum { STEP_ALL, STEP_INT3, STEP_TAILS, STEP_FIRST };
static int apply_step(const struct ftr_poke *p, const struct batch *b, const struct span *sp,
                      int step)
{
    int changed = 0;
    uint8_t *im = b->image + sp->img;
    for (uint32_t k = sp->from; k < sp->to; k++) {
        const struct ftr_poke *q = &p[b->order[k]];
        uint8_t *at = im + (q->addr - sp->lo);
        if (same(q->expect, q->bytes, q->len)) continue; /* already in that state */
        unsigned from = step == STEP_TAILS ? 1 : 0;
        unsigned to = step == STEP_ALL || step == STEP_TAILS ? q->len : 1;
        for (unsigned i = from; i < to; i++) {
            uint8_t v = step == STEP_INT3 ? 0xcc : q->bytes[i];
            changed |= at[i] != v;
            at[i] = v;
        }
    }
    return changed;
}

/* Writes the spans [from, to) whose images changed in this step. @return 1, 0 (the kernel
 * refused the very first write), -1 (errno). */
static int write_spans(int fd, const struct ftr_poke *p, struct batch *b, size_t from, size_t to,
                       int step, unsigned *writes)
{
    for (size_t si = from; si < to; si++) {
        const struct span *sp = &b->span[si];
        if (!apply_step(p, b, sp, step)) continue;
        int w = ftr_textio_pwrite(fd, sp->lo, b->image + sp->img, sp->len);
        if (writes) ++*writes;
        if (w <= 0) return w == 0 && writes && *writes == 1 ? 0 : -1;
    }
    return 1;
}

/* Every span reads back as its image. @return 1, or -1 (EIO). */
static int verify(int fd, const struct batch *b, size_t from, size_t to)
{
    uint8_t back[FTR_TEXTIO_SPAN];
    for (size_t si = from; si < to; si++) {
        const struct span *sp = &b->span[si];
        if (ftr_textio_read(fd, sp->lo, back, sp->len) < 0 ||
            !same(back, b->image + sp->img, sp->len)) {
            errno = EIO;
            return -1;
        }
    }
    return 1;
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

/* The mprotect fallback writes pieces; built here from the accepted pokes. */
static int write_mprotect(const struct ftr_poke *p, const struct batch *b)
{
    struct ftr_piece pc[64];
    size_t m = 0;
    for (size_t k = 0; k < b->nok; k++) {
        const struct ftr_poke *q = &p[b->order[k]];
        pc[m].addr = q->addr;
        pc[m].len = q->len;
        memcpy(pc[m].bytes, q->bytes, q->len);
        if (++m == 64 || k + 1 == b->nok) {
            if (ftr_textio_write_mprotect(pc, m) < 0) return -1;
            m = 0;
        }
    }
    return 1;
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
    sigset_t old;
    block_signals(&old);
    int w = fd >= 0 ? write_spans(fd, p, &b, 0, b.nspan, STEP_ALL, &(unsigned){0}) : 0;
    if (w > 0) w = verify(fd, &b, 0, b.nspan);
    if (w == 0) w = write_mprotect(p, &b);
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

/* Takes the table away from the trap handlers; @return 1 when no handler reads it any more
 * (its memory may go), 0 when one is still inside after a while (then it is kept). */
static int retire(void)
{
    /* the sequence first: a handler that finds no table must also find the sequence moved
     * (it read the int3 before the first bytes came back, and the table gone after) */
    atomic_fetch_add(&table_seq, 1);
    atomic_store(&current, NULL);
    uint64_t until = 0;
    while (atomic_load(&inflight) != 0) {
        uint64_t now = now_ns();
        if (!until) until = now + 100 * 1000000u; /* then the memory is left to it */
        if (now > until) return 0;
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
    int rc = 1, gone = 1;
    /* In slices of whole spans, as the kernel's batches: a site holds its int3 only while its
     * slice is being written, so a thread that keeps calling it traps for that long. */
    for (size_t from = 0; from < b.nspan && rc > 0;) {
        size_t to = from;
        while (to < b.nspan && b.span[to].to - b.span[from].from < FTR_POKE_SLICE)
            to++;
        if (to == from) to++;
        tables[0].n = b.span[to - 1].to - b.span[from].from;
        tables[0].emu = b.emu + b.span[from].from;
        atomic_store(&current, &tables[0]); /* the table before any int3 */
        atomic_fetch_add(&table_seq, 1);
        unsigned writes0 = st->writes;
        rc = write_spans(fd, p, &b, from, to, STEP_INT3, &st->writes);
        if (rc > 0) {
            ftr_bp_sync();
            st->syncs++;
            unsigned w = st->writes;
            rc = write_spans(fd, p, &b, from, to, STEP_TAILS, &st->writes);
            if (rc > 0 && st->writes != w) {
                ftr_bp_sync();
                st->syncs++;
            }
            if (rc > 0) rc = write_spans(fd, p, &b, from, to, STEP_FIRST, &st->writes);
            ftr_bp_sync();
            st->syncs++;
            if (rc > 0) rc = verify(fd, &b, from, to);
        }
        if (rc < 0 || (rc == 0 && st->writes > writes0 + 1) || (rc == 0 && from > 0)) {
            /* Some first bytes may stay int3: the table must outlive them, and the handler
             * keeps sending threads on as the new bytes would. No more live batches. */
            int e = rc == 0 ? EIO : errno;
            tables[1] = tables[0];
            atomic_store(&wedged, &tables[1]);
            atomic_store(&current, NULL);
            ftr_textio_scratch_keep(b.mem);
            ftr_textio_close(fd);
            errno = e;
            return -1;
        }
        gone &= retire();
        from = to;
    }
    st->ns = now_ns() - t0;
    st->traps = ftr_bp_traps() - traps0;
    long refused = report_refused(&b, n, bad, badcap);
    if (gone) /* else a slow handler may still read it: never freed */
        ftr_textio_scratch_free(b.mem, b.bytes);
    else
        ftr_textio_scratch_keep(b.mem);
    ftr_textio_close(fd);
    if (rc == 0) { /* the kernel refused the very first write: nothing changed */
        errno = EPERM;
        return -1;
    }
    return refused;
}
