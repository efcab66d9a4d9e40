/* Unit tests of the live rewrite (patcher/text_poke.c): the breakpoint batch against threads that
 * run the sites being rewritten, in every site shape, and the SIGTRAP side on its own.
 *
 * Each test function lives in a page of generated code:
 *     [site][movabs $body_count, %rax][lock incq (%rax)][ret]        (fentry-shaped sites)
 *     push %rbp; mov %rsp,%rbp; [site][movabs..][lock incq][pop %rbp][ret]   (-pg mcount)
 * Its site's CALL state calls a stub of its own: [movabs $stub_count, %rax][lock incq (%rax)]
 * [ret]. Every call of the function must run its body exactly once, whatever the site is doing;
 * a torn site would crash, skip the body or run garbage. */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "ftr_patcher.h"

enum { F_GOT, F_REL, F_NOP5, F_MCOUNT, NFUNC };
static const char *const fname[NFUNC] = {"ff 15", "e8", "nop5", "mcount across a line"};

struct fn {
    uint8_t *entry; /* what callers call */
    uint64_t site;
    uint8_t len;
    uint8_t orig[6];
    uint64_t stub;
    atomic_ulong body, stubs;
};
static struct fn fns[NFUNC];
static uint8_t *code;
static const size_t code_len = 4 * 4096;

static void on_trap(int sig, siginfo_t *si, void *uc)
{
    if (ftr_bp_trap(si, uc)) return;
    signal(sig, SIG_DFL);
    raise(sig);
}

static uint8_t *emit_count(uint8_t *p, atomic_ulong *ctr)
{
    uint64_t a = (uint64_t)(uintptr_t)ctr;
    *p++ = 0x48; /* movabs $ctr, %rax */
    *p++ = 0xb8;
    memcpy(p, &a, 8);
    p += 8;
    *p++ = 0xf0; /* lock incq (%rax) */
    *p++ = 0x48;
    *p++ = 0xff;
    *p++ = 0x00;
    return p;
}

/* Lays the functions out in a fresh page; sites in their original shape. */
static void build(void)
{
    code = mmap(NULL, code_len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(code, MAP_FAILED);
    memset(code, 0xcc, code_len);
    uint8_t *ret = code; /* a bare ret: what the original calls reach */
    *ret = 0xc3;
    uint8_t *got = code + 64; /* the "GOT slot" of the ff 15 site */
    uint64_t reta = (uint64_t)(uintptr_t)ret;
    memcpy(got, &reta, 8);
    uint8_t *p = code + 128;
    for (int f = 0; f < NFUNC; f++) {
        struct fn *fn = &fns[f];
        p = code + 128 + (size_t)f * 256;
        fn->entry = p;
        if (f == F_MCOUNT) {
            /* push %rbp; mov %rsp,%rbp, then pad so the 5-byte site straddles a 64-byte line */
            *p++ = 0x55;
            *p++ = 0x48;
            *p++ = 0x89;
            *p++ = 0xe5;
            while (((uintptr_t)p + 2) % 64) /* the site covers [line-2, line+3) */
                *p++ = 0x90;
        }
        fn->site = (uint64_t)(uintptr_t)p;
        uint8_t *s = p;
        if (f == F_GOT) {
            int32_t d = (int32_t)((int64_t)(uintptr_t)got - (int64_t)(fn->site + 6));
            s[0] = 0xff;
            s[1] = 0x15;
            memcpy(s + 2, &d, 4);
            fn->len = 6;
        } else if (f == F_NOP5) {
            ftr_x86_gen_nop(s, 5);
            fn->len = 5;
        } else {
            int32_t d = (int32_t)((int64_t)reta - (int64_t)(fn->site + 5));
            s[0] = 0xe8;
            memcpy(s + 1, &d, 4);
            fn->len = 5;
        }
        memcpy(fn->orig, s, fn->len);
        p = s + fn->len;
        p = emit_count(p, &fn->body);
        if (f == F_MCOUNT) *p++ = 0x5d; /* pop %rbp */
        *p++ = 0xc3;
        uint8_t *stub = code + 128 + (size_t)f * 256 + 160;
        fn->stub = (uint64_t)(uintptr_t)stub;
        stub = emit_count(stub, &fn->stubs);
        *stub = 0xc3;
    }
    cr_assert_eq(mprotect(code, code_len, PROT_READ | PROT_EXEC), 0);
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_sigaction = on_trap;
    sa.sa_flags = SA_SIGINFO | SA_NODEFER;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGTRAP, &sa, NULL);
    char err[256];
    cr_assert_eq(ftr_bp_init(err, sizeof err), 0, "%s", err);
}

static void call(int f)
{
    ((void (*)(void))(uintptr_t)fns[f].entry)();
}

static atomic_int stop;
static atomic_ulong calls[NFUNC];

static void *runner(void *arg)
{
    (void)arg;
    unsigned long mine[NFUNC] = {0};
    while (!atomic_load_explicit(&stop, memory_order_relaxed))
        for (int f = 0; f < NFUNC; f++) {
            call(f);
            mine[f]++;
        }
    for (int f = 0; f < NFUNC; f++)
        atomic_fetch_add(&calls[f], mine[f]);
    return NULL;
}

/* wakes from short sleeps straight into the sites: a thread the kernel just scheduled */
static void *sleeper(void *arg)
{
    (void)arg;
    unsigned long mine[NFUNC] = {0};
    while (!atomic_load_explicit(&stop, memory_order_relaxed)) {
        struct timespec ts = {0, 20 * 1000};
        nanosleep(&ts, NULL);
        for (int f = 0; f < NFUNC; f++) {
            call(f);
            mine[f]++;
        }
    }
    for (int f = 0; f < NFUNC; f++)
        atomic_fetch_add(&calls[f], mine[f]);
    return NULL;
}

enum { ST_ORIG, ST_NOP, ST_CALL };
static void state_bytes(const struct fn *fn, int st, uint8_t *out)
{
    if (st == ST_ORIG)
        memcpy(out, fn->orig, fn->len);
    else if (st == ST_NOP)
        ftr_x86_gen_nop(out, fn->len);
    else
        cr_assert_eq(ftr_x86_gen_call(out, fn->len, fn->site, fn->stub), 0);
}

static long flip(int from, int to, struct ftr_poke_stats *st)
{
    struct ftr_poke p[NFUNC];
    for (int f = 0; f < NFUNC; f++) {
        p[f].addr = fns[f].site;
        p[f].len = fns[f].len;
        state_bytes(&fns[f], from, p[f].expect);
        state_bytes(&fns[f], to, p[f].bytes);
    }
    return ftr_text_poke_live(p, NFUNC, NULL, 0, st);
}

Test(text_poke, torn_site_stress, .timeout = 180)
{
    build();
    enum { RUNNERS = 3, SLEEPERS = 2, ROUNDS = 3000 };
    pthread_t th[RUNNERS + SLEEPERS];
    for (int i = 0; i < RUNNERS + SLEEPERS; i++)
        pthread_create(&th[i], NULL, i < RUNNERS ? runner : sleeper, NULL);
    struct ftr_poke_stats st;
    cr_assert_eq(flip(ST_ORIG, ST_CALL, &st), 0, "first patch: %s", strerror(errno));
    uint64_t traps = 0;
    for (int r = 0; r < ROUNDS; r++) {
        cr_assert_eq(flip(ST_CALL, ST_NOP, &st), 0, "round %d: %s", r, strerror(errno));
        traps += st.traps;
        cr_assert_eq(st.syncs, 3);
        cr_assert_eq(flip(ST_NOP, ST_CALL, &st), 0, "round %d: %s", r, strerror(errno));
        traps += st.traps;
    }
    atomic_store(&stop, 1);
    for (int i = 0; i < RUNNERS + SLEEPERS; i++)
        pthread_join(th[i], NULL);
    for (int f = 0; f < NFUNC; f++) {
        unsigned long body = atomic_load(&fns[f].body), made = atomic_load(&calls[f]);
        unsigned long stubs = atomic_load(&fns[f].stubs);
        cr_assert_eq(body, made, "%s: %lu bodies run for %lu calls", fname[f], body, made);
        cr_assert_leq(stubs, made, "%s: more hooks (%lu) than calls (%lu)", fname[f], stubs, made);
        cr_assert_gt(stubs, 0, "%s: the CALL state was never run", fname[f]);
        /* now alone and in the CALL state: every call is hooked exactly once */
        unsigned long s0 = atomic_load(&fns[f].stubs), b0 = atomic_load(&fns[f].body);
        for (int k = 0; k < 1000; k++)
            call(f);
        cr_assert_eq(atomic_load(&fns[f].stubs) - s0, 1000, "%s: hooks after", fname[f]);
        cr_assert_eq(atomic_load(&fns[f].body) - b0, 1000);
    }
    cr_log_info("%d live batches, %llu threads trapped and sent on", 2 * ROUNDS,
                (unsigned long long)traps);
}

/* The trap handler's rules outside a batch (inside one: torn_site_stress): an int3 that is gone
 * when its handler runs is run again; an int3 of no batch, or a SIGTRAP that is no int3, is not
 * ours. */
Test(text_poke, stale_and_foreign_traps)
{
    build();
    siginfo_t si;
    memset(&si, 0, sizeof si);
    si.si_code = SI_KERNEL;
    ucontext_t uc;
    memset(&uc, 0, sizeof uc);
    uc.uc_mcontext.gregs[REG_RIP] = (greg_t)(fns[F_NOP5].site + 1);
    cr_assert_eq(ftr_bp_trap(&si, &uc), 1, "a site that is no longer int3 is ours to retry");
    cr_assert_eq((uint64_t)uc.uc_mcontext.gregs[REG_RIP], fns[F_NOP5].site);
    /* an int3 that is not in any batch is not ours */
    uc.uc_mcontext.gregs[REG_RIP] = (greg_t)(uintptr_t)(code + 2); /* code[1] is 0xcc */
    cr_assert_eq(ftr_bp_trap(&si, &uc), 0);
    /* a SIGTRAP sent by someone (not an int3) is not ours */
    si.si_code = SI_USER;
    uc.uc_mcontext.gregs[REG_RIP] = (greg_t)(fns[F_NOP5].site + 1);
    cr_assert_eq(ftr_bp_trap(&si, &uc), 0);
}

/* Refusals: bytes that are not what the caller expects are never written, live or alone; a
 * page that is not mapped is a refusal, not a fault. */
Test(text_poke, refusals)
{
    build();
    struct ftr_poke p[2];
    memset(p, 0, sizeof p);
    p[0].addr = fns[F_REL].site;
    p[0].len = 5;
    ftr_x86_gen_nop(p[0].expect, 5); /* wrong: it holds the original call */
    ftr_x86_gen_call(p[0].bytes, 5, fns[F_REL].site, fns[F_REL].stub);
    p[1].addr = 4096; /* below mmap_min_addr: never mapped */
    p[1].len = 5;
    ftr_x86_gen_nop(p[1].bytes, 5);
    size_t bad[2];
    long lr = ftr_text_poke_live(p, 2, bad, 2, NULL);
    cr_assert_eq(lr, 2, "live: %ld (%s)", lr, strerror(errno));
    cr_assert_eq(bad[0], 0);
    cr_assert_eq(bad[1], 1);
    cr_assert_eq(ftr_text_poke(p, 2, bad, 2), 2);
    cr_assert_eq(memcmp((void *)(uintptr_t)fns[F_REL].site, fns[F_REL].orig, 5), 0);
}
