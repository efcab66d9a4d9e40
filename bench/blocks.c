/*
 * blocks.c - what the building blocks of a tracer cost on this machine, in ns per operation.
 *
 * Tracers' per-call costs move a lot between machines (a VM's rdtsc can cost 30 ns or 5 ns), so
 * run_bench.py prints these beside its results: they explain why ratios measured on one machine
 * differ from peers.md's. Each block runs in a loop of N iterations; the empty loop is not
 * subtracted (it is ~1 ns).
 *
 * Build: gcc -O2 -o blocks blocks.c        Usage: ./blocks [N]
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline uint64_t rdtsc(void)
{
    uint32_t lo, hi;
    __asm__ volatile("rdtsc" : "=a"(lo), "=d"(hi));
    return (uint64_t)hi << 32 | lo;
}

/* plain_fn and hijack_fn do the same loads and stores; hijack_fn sends its return through a
 * trampoline (what a return-address hook does), which the return-stack buffer mispredicts. */
uintptr_t saved_ret;
void plain_fn(void);
void hijack_fn(void);
__asm__(".text\n"
        "plain_fn:\n  mov (%rsp), %rax\n  mov %rax, saved_ret(%rip)\n  mov %rax, (%rsp)\n  ret\n"
        "hijack_fn:\n  mov (%rsp), %rax\n  mov %rax, saved_ret(%rip)\n"
        "  lea hijack_tramp(%rip), %rax\n  mov %rax, (%rsp)\n  ret\n"
        "hijack_tramp:\n  jmp *saved_ret(%rip)\n");

#define BLOCK(name, n, stmt)                                                                      \
    do {                                                                                           \
        double t0 = now();                                                                         \
        for (long i = 0; i < (n); i++) {                                                           \
            stmt;                                                                                  \
            __asm__ volatile("" ::: "memory");                                                     \
        }                                                                                          \
        printf("%s %.1f\n", name, (now() - t0) / (n) * 1e9);                                       \
    } while (0)

int main(int argc, char **argv)
{
    long n = argc > 1 ? atol(argv[1]) : 5000000;
    volatile uint64_t sink = 0;
    struct timespec ts;
    BLOCK("rdtsc", n, sink += rdtsc());
    BLOCK("lfence;rdtsc", n, ({ __asm__ volatile("lfence"); sink += rdtsc(); }));
    BLOCK("clock_gettime(MONOTONIC)", n, ({ clock_gettime(CLOCK_MONOTONIC, &ts); sink += ts.tv_nsec; }));
    BLOCK("syscall(getppid)", n / 20, sink += syscall(SYS_getppid));
    BLOCK("call+ret", n, __asm__ volatile("call plain_fn" ::: "rax", "memory"));
    BLOCK("hijacked return", n, __asm__ volatile("call hijack_fn" ::: "rax", "memory"));
    return (int)(sink & 0);
}
