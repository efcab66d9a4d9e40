/*
 * minhook.c - the smallest useful entry+return hook, measured beside ftrace-run as a yardstick.
 *
 * Not part of ftrace-run: bench/run_bench.py builds it as a preload and runs the -pg -mfentry
 * builds of the workloads under it (`LD_PRELOAD=minhook.so ./prog`). It does what peers.md calls
 * the "minimal __fentry__ + return-address hook": at every entry and every exit one rdtsc and one
 * 16-byte record in a per-thread buffer, the return address swapped for a return trampoline and
 * kept on a per-thread shadow stack, and a raw write() of each full 64 KiB buffer. Nothing else:
 * no patching (glibc's __fentry__ is simply overridden), no longjmp or tail-call care, no
 * compression, no symbol tables, the tails of worker threads' buffers are dropped. Measuring it
 * in the same run gives target (a) a floor taken on this machine, not only peers.md's figure
 * taken on another.
 *
 * Build: gcc -O2 -shared -fPIC -mgeneral-regs-only -o minhook.so minhook.c
 * Output: $MINHOOK_OUTPUT (default /dev/null).
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define NREC 4096   /* records per buffer: 64 KiB */
#define NSHADOW 4096

struct rec { uint64_t tsc, id; }; /* id: address after the site; bit 0 set on exit */
struct shadow { uintptr_t ret, id; };
struct tls {
    unsigned n, depth;
    struct rec buf[NREC];
    struct shadow sh[NSHADOW];
};
static __thread struct tls mh __attribute__((tls_model("initial-exec")));
static int mh_fd = -1;

static inline uint64_t rdtsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
}

/* write(2) without libc: no errno, no vector registers touched. */
static void raw_write(int fd, const void *p, size_t len)
{
    long r;
    __asm__ volatile("syscall" : "=a"(r) : "a"(1), "D"(fd), "S"(p), "d"(len)
                     : "rcx", "r11", "memory");
    (void)r;
}

static inline void emit(struct tls *t, uint64_t tsc, uintptr_t id)
{
    if (__builtin_expect(t->n == NREC, 0)) {
        if (mh_fd >= 0)
            raw_write(mh_fd, t->buf, sizeof t->buf);
        t->n = 0;
    }
    t->buf[t->n].tsc = tsc;
    t->buf[t->n].id = id;
    t->n++;
}

void mh_return(void);

__attribute__((visibility("hidden"))) void mh_entry(uintptr_t *slot, uintptr_t id)
{
    uint64_t tsc = rdtsc();
    struct tls *t = &mh;
    if (t->depth < NSHADOW) { /* deeper calls simply run unhooked */
        t->sh[t->depth].ret = *slot;
        t->sh[t->depth].id = id;
        t->depth++;
        *slot = (uintptr_t)mh_return;
    }
    emit(t, tsc, id);
}

__attribute__((visibility("hidden"))) uintptr_t mh_exit(void)
{
    uint64_t tsc = rdtsc();
    struct tls *t = &mh;
    struct shadow *s = &t->sh[--t->depth];
    emit(t, tsc, s->id | 1);
    return s->ret;
}

/* __fentry__: [rsp] = the address after the site, [rsp+8] = the function's return address.
 * Saves every register that can carry an argument (and rax, r10, r11), calls mh_entry with the
 * stack 16-byte aligned. mh_return: entered by the function's ret with rsp 16-byte aligned;
 * rax:rdx may hold the return value. */
__asm__(".text\n"
        ".globl __fentry__\n.type __fentry__,@function\n"
        "__fentry__:\n"
        "  push %rax\n  push %rcx\n  push %rdx\n  push %rsi\n  push %rdi\n"
        "  push %r8\n  push %r9\n  push %r10\n  push %r11\n"
        "  lea 80(%rsp), %rdi\n"  /* slot */
        "  mov 72(%rsp), %rsi\n"  /* id */
        "  sub $8, %rsp\n"
        "  call mh_entry\n"
        "  add $8, %rsp\n"
        "  pop %r11\n  pop %r10\n  pop %r9\n  pop %r8\n  pop %rdi\n"
        "  pop %rsi\n  pop %rdx\n  pop %rcx\n  pop %rax\n"
        "  ret\n"
        ".size __fentry__, .-__fentry__\n"
        ".globl mh_return\n.hidden mh_return\n.type mh_return,@function\n"
        "mh_return:\n"
        "  push %rax\n  push %rdx\n"
        "  call mh_exit\n"
        "  mov %rax, %r11\n"
        "  pop %rdx\n  pop %rax\n"
        "  jmp *%r11\n"
        ".size mh_return, .-mh_return\n");

__attribute__((constructor)) static void mh_init(void)
{
    const char *out = getenv("MINHOOK_OUTPUT");
    mh_fd = open(out ? out : "/dev/null", O_WRONLY | O_CREAT | O_TRUNC | O_APPEND, 0644);
}

__attribute__((destructor)) static void mh_fini(void)
{
    if (mh_fd >= 0 && mh.n)
        raw_write(mh_fd, mh.buf, mh.n * sizeof(struct rec));
}
