/* Unit tests of the stop-the-world handshake (patcher/stw.c). */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <stdlib.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "ftr_patcher.h"

static int sig(void)
{
    return SIGRTMIN + 7;
}

/* Criterion's own helper threads block every signal: leave them out of the handshakes. */
static void setup(void)
{
    char err[256];
    cr_assert_eq(ftr_stw_init(sig(), NULL, err, sizeof err), 0, "%s", err);
    DIR *d = opendir("/proc/self/task");
    struct dirent *de;
    while ((de = readdir(d)))
        if (atoi(de->d_name) > 0 && atoi(de->d_name) != gettid()) ftr_stw_ignore(atoi(de->d_name));
    closedir(d);
}

static atomic_int stop_flag;
static atomic_long progress;

static void *busy(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_flag))
        atomic_fetch_add(&progress, 1);
    return NULL;
}

static void *sleeper(void *arg)
{
    (void)arg;
    while (!atomic_load(&stop_flag)) {
        struct timespec ts = {0, 1000000};
        nanosleep(&ts, NULL);
    }
    return NULL;
}

struct world {
    long progress_before, progress_after;
};

static int check_stopped(void *arg)
{
    struct world *w = arg;
    w->progress_before = atomic_load(&progress);
    struct timespec ts = {0, 5 * 1000000};
    nanosleep(&ts, NULL);
    w->progress_after = atomic_load(&progress);
    return 7;
}

Test(stw, parks_every_thread_and_runs_the_callback, .init = setup)
{
    pthread_t t[4];
    atomic_store(&stop_flag, 0);
    for (int i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, i < 2 ? busy : sleeper, NULL);
    while (atomic_load(&progress) < 1000)
        ;
    struct world w;
    struct ftr_stw_stats st;
    char err[256] = "";
    int rc = ftr_stw_run(check_stopped, NULL, &w, 2000, &st, err, sizeof err);
    cr_assert_eq(rc, 7, "rc %d: %s", rc, err);
    /* >= : a sanitizer's runtime may start a thread of its own after setup() */
    cr_assert_geq(st.threads + st.asleep, 4, "parked %u, asleep %u", st.threads, st.asleep);
    cr_assert_geq(st.threads, 2, "the busy threads must be parked");
    cr_assert_eq(w.progress_before, w.progress_after, "a busy thread ran while parked");
    long p = atomic_load(&progress);
    while (atomic_load(&progress) == p) /* released: they run again */
        ;
    atomic_store(&stop_flag, 1);
    for (int i = 0; i < 4; i++)
        pthread_join(t[i], NULL);
}

/* runs user code with every signal blocked: the handshake cannot park it */
static void *blocker(void *arg)
{
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL);
    while (!atomic_load(&stop_flag))
        ;
    return NULL;
}

static int must_not_run(void *arg)
{
    *(int *)arg = 1;
    return 0;
}

Test(stw, a_thread_blocking_the_signal_times_out_cleanly, .init = setup)
{
    pthread_t b, k;
    atomic_store(&stop_flag, 0);
    pthread_create(&b, NULL, blocker, NULL);
    pthread_create(&k, NULL, busy, NULL);
    usleep(20000);
    int ran = 0;
    char err[256] = "";
    int rc = ftr_stw_run(must_not_run, NULL, &ran, 100, NULL, err, sizeof err);
    cr_assert_eq(rc, -1);
    cr_assert_eq(ran, 0, "the callback ran without the world stopped");
    /* seen before it is signalled (running with the signal blocked): refused at once */
    cr_assert(strstr(err, "blocks signal") || strstr(err, "did not stop"), "message: %s", err);
    long p = atomic_load(&progress);
    while (atomic_load(&progress) == p) /* the busy thread was released */
        ;
    /* the blocked signal stays pending; a later handshake must not be confused by it */
    atomic_store(&stop_flag, 1);
    pthread_join(b, NULL); /* exits with the signal still pending: harmless */
    pthread_join(k, NULL);
    atomic_store(&stop_flag, 0);
    pthread_create(&k, NULL, busy, NULL);
    struct world w;
    rc = ftr_stw_run(check_stopped, NULL, &w, 2000, NULL, err, sizeof err);
    cr_assert_eq(rc, 7, "%s", err);
    atomic_store(&stop_flag, 1);
    pthread_join(k, NULL);
}

/* A thread loops through five 1-byte NOPs (an unpatched -fpatchable-function-entry site).
 * Handshakes rewrite it back and forth between 5 x 90 and the 5-byte NOP; a thread parked
 * inside must be moved to site+5, else it would resume in the middle of an instruction. */
static uint8_t *code;
static atomic_long loops;

static void *nop_runner(void *arg)
{
    (void)arg;
    void (*fn)(void) = (void (*)(void))code;
    while (!atomic_load(&stop_flag)) {
        fn();
        atomic_fetch_add(&loops, 1);
    }
    return NULL;
}

struct flip {
    struct ftr_site *site;
    int to_nop5;
};

static uint64_t fix(void *arg, uint64_t ip)
{
    struct flip *f = arg;
    return ftr_site_fixup_ip(f->site, ip);
}

static int do_flip(void *arg)
{
    struct flip *f = arg;
    struct ftr_poke p = {.addr = f->site->addr, .len = 5};
    static const uint8_t nops[5] = {0x90, 0x90, 0x90, 0x90, 0x90};
    uint8_t nop5[5];
    ftr_x86_gen_nop(nop5, 5);
    memcpy(p.expect, f->to_nop5 ? nops : nop5, 5);
    memcpy(p.bytes, f->to_nop5 ? nop5 : nops, 5);
    size_t bad[1];
    return (int)ftr_text_poke(&p, 1, bad, 1);
}

Test(stw, threads_inside_a_rewritten_site_are_moved_out, .init = setup)
{
    long page = sysconf(_SC_PAGESIZE);
    code = mmap(NULL, (size_t)page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    cr_assert_neq(code, MAP_FAILED);
    /* 16 x (5 x nop) ... ret: many sites, so that parked ips often land inside one */
    struct ftr_site sites[16];
    for (int i = 0; i < 16; i++) {
        memset(code + 5 * i, 0x90, 5);
        sites[i] = (struct ftr_site){.addr = (uint64_t)code + 5 * (uint64_t)i, .len = 5};
    }
    code[80] = 0xc3;
    cr_assert_eq(mprotect(code, (size_t)page, PROT_READ | PROT_EXEC), 0);
    atomic_store(&stop_flag, 0);
    pthread_t t;
    pthread_create(&t, NULL, nop_runner, NULL);
    unsigned moved = 0;
    char err[256];
    for (int round = 0; round < 400; round++) {
        for (int i = 0; i < 16; i++) {
            struct flip f = {&sites[i], !(round & 1)};
            struct ftr_stw_stats st;
            int rc = ftr_stw_run(do_flip, fix, &f, 2000, &st, err, sizeof err);
            cr_assert_eq(rc, 0, "round %d site %d: rc %d %s", round, i, rc, err);
            moved += st.moved_ips;
        }
    }
    long l = atomic_load(&loops);
    while (atomic_load(&loops) == l) /* still running correctly */
        ;
    atomic_store(&stop_flag, 1);
    pthread_join(t, NULL);
    cr_log_info("threads moved out of a site: %u", moved);
    cr_assert_gt(moved, 0, "no parked thread ever landed inside a site: the test proves nothing");
}

/* Threads asleep in calls the kernel never restarts after a handler (nanosleep, poll) must not
 * be woken with EINTR by handshakes: they are left asleep. */
static atomic_int eintr_seen, sleeps_done;

static void *napper(void *arg)
{
    int use_poll = arg != NULL;
    while (!atomic_load(&stop_flag)) {
        int rc;
        if (use_poll) {
            rc = poll(NULL, 0, 2);
        } else {
            struct timespec ts = {0, 2000000};
            rc = nanosleep(&ts, NULL);
        }
        if (rc < 0 && errno == EINTR) atomic_fetch_add(&eintr_seen, 1);
        atomic_fetch_add(&sleeps_done, 1);
    }
    return NULL;
}

static int nothing(void *arg)
{
    (void)arg;
    return 0;
}

Test(stw, sleepers_are_not_woken_with_eintr, .init = setup)
{
    atomic_store(&stop_flag, 0);
    pthread_t a, b;
    pthread_create(&a, NULL, napper, NULL);
    pthread_create(&b, NULL, napper, (void *)1);
    usleep(10000);
    char err[256];
    unsigned asleep = 0;
    const int rounds = 200;
    for (int i = 0; i < rounds; i++) {
        struct ftr_stw_stats st;
        cr_assert_eq(ftr_stw_run(nothing, NULL, NULL, 2000, &st, err, sizeof err), 0, "%s", err);
        asleep += st.asleep;
        usleep(500);
    }
    atomic_store(&stop_flag, 1);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    cr_log_info("%d sleeps, %u sleepers left asleep, %d EINTR", atomic_load(&sleeps_done), asleep,
                atomic_load(&eintr_seen));
    cr_assert_gt(asleep, rounds, "sleepers were signalled rather than left asleep");
    /* a thread caught between two sleeps is parked like any other; it can only meet EINTR in
     * the microseconds between our look at it and the signal */
    cr_assert_lt(atomic_load(&eintr_seen), rounds / 10, "EINTR leaked into sleeping threads");
}

/* ftr_stw_others_listed() reads the list again from a descriptor opened before: the other
 * threads, not the caller, nor the leader it is told to leave out; -1 on a descriptor that
 * is no directory (never 0, "no thread left") */
Test(stw, others_listed_from_an_open_task_dir)
{
    int dfd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    cr_assert(dfd >= 0);
    int before = ftr_stw_others_listed(dfd, 0); /* the test runner's own threads */
    cr_assert_geq(before, 0);
    int leader_other = getpid() != (pid_t)syscall(SYS_gettid);
    atomic_store(&stop_flag, 0);
    pthread_t t[2];
    for (int i = 0; i < 2; i++)
        cr_assert_eq(pthread_create(&t[i], NULL, sleeper, NULL), 0);
    cr_expect_eq(ftr_stw_others_listed(dfd, 0), before + 2);
    cr_expect_eq(ftr_stw_others_listed(dfd, 0), before + 2, "read again from the start");
    cr_expect_eq(ftr_stw_others_listed(dfd, getpid()), before + 2 - leader_other);
    atomic_store(&stop_flag, 1);
    for (int i = 0; i < 2; i++)
        pthread_join(t[i], NULL);
    /* a joined thread may be listed a moment longer (its tid is cleared before its end) */
    int after = -1;
    for (int i = 0; i < 2000 && (after = ftr_stw_others_listed(dfd, 0)) != before; i++)
        usleep(1000);
    cr_expect_eq(after, before);
    close(dfd);
    int fd = open("/proc/self/stat", O_RDONLY | O_CLOEXEC);
    cr_expect_eq(ftr_stw_others_listed(fd, 0), -1);
    close(fd);
}
