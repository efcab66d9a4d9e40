#define _GNU_SOURCE
/* bthreads: thread life cycles. usage: bthreads MODE
 *   many      50 short-lived threads, 5 waves of 10 (created, then joined); thread i runs
 *             worker -> work -> leaf x (i%7+1)*3.   trees: main: main;many; thread i:
 *             {worker 1, worker;work 1, worker;work;leaf (i%7+1)*3}
 *   detached  20 detached threads: worker -> work -> leaf x 5 each (worker is called from an
 *             untraced start routine which posts a semaphore after worker() returned; main waits
 *             for all 20 posts). trees: main {main, main;detached}; each thread {worker,
 *             worker;work, worker;work;leaf 5}
 *   exit      a thread exiter -> nest1 -> nest2 -> leaf, then pthread_exit(42) from nest2; nest1
 *             pushed a cleanup handler (cleanup_fn, runs in nest1's frame while unwinding).
 *             main joins, then texit -> after_join.
 *             trees: main {main, main;texit, main;texit;after_join};
 *             thread {exiter, exiter;nest1, exiter;nest1;nest2, exiter;nest1;nest2;leaf,
 *             exiter;nest1;cleanup_fn}; nothing left open (the unwound frames are closed).
 *   mainexit  main -> mainexit starts talker and ends the main thread with pthread_exit();
 *             talker prints 3 lines (stdio, fully buffered into a pipe: only exit() flushes
 *             them) after work(2) each, then returns: the process must end then, with
 *             status 0 and the lines. trees: main {main, main;mainexit}; thread {talker,
 *             talker;work 3, talker;work;leaf 6}
 *   closerexit  as mainexit, but the thread first closes descriptors 3 to 15 over and over
 *             for 0.3 s (a daemon's clean-up): the process ended before the thread was done,
 *             the tracer's list of threads closed under it read as "no thread left".
 *             trees: main {main, main;closerexit}; thread {closer, closer;talker, then
 *             talker's below it}
 *   pokedexit as sysexit, while a fork child connects to the process's control socket every
 *             20 ms until the process is gone (as the recorders of many new sessions do): the
 *             control server looked for the end only when a second passed without a
 *             connection, and the process never ended. trees: as sysexit
 *   sysexit   the same, but the main thread ends with a raw exit system call (no glibc).
 *             trees: main {main, main;sysexit} (left open); thread as mainexit
 *   churn     5000 short threads (scaled()), 50 waves of 100 at a time, each worker -> work
 *             -> leaf x 100: nothing may be lost (1 M events in a second or less, far below what
 *             the writer takes), and the summary must count exactly.
 *             trees: main {main, main;churn}; each thread {worker, worker;work,
 *             worker;work;leaf 100}
 *   names     a sandbox: a seccomp filter that kills the process on prctl(PR_GET_NAME) (the
 *             program never asks a name), then 2 threads, each renamed (one by itself with
 *             prctl(PR_SET_NAME) then pthread_setname_np, one by main with pthread_setname_np
 *             after it started) and each calling worker(3000): with FTRACE_BUFSIZE=4 every
 *             thread fills many chunks. The tracer asked each thread's name at every full chunk
 *             and the process died of SIGSYS. trees: main {main, main;names}; each thread
 *             {worker, worker;work, worker;work;leaf 3000}; names "self-2" and "renamed-b"
 *             (--info), main's "bthreads"
 *   walk      a thread walker (a dumper, a stop-the-world collector): 3 threads wait in
 *             waiter -> pause-like sleeps; main -> walk -> walk_all sends SIGUSR1 to every
 *             other live thread of /proc/self/task with tgkill() and waits (3 s at most) for
 *             each to check in from the handler (checkin). Prints "walk: every thread checked
 *             in" or how many never did (a thread of the tracer that blocks every signal never
 *             does). trees: main
 *             {main, main;walk, main;walk;checkin?}: only main's own tree is checked
 *   forkwalk  the same walk in a fork child that records nothing (run with a filter that
 *             leaves it no function, and no library calls): the tracer's thread there waits,
 *             parked, for the child's first record, and must check in all the same. The
 *             parent waits for the child. trees: the parent's {main} only
 *   walkexit  the same walk, by a thread of the program after main called pthread_exit(): 2
 *             waiters, and the walker skips the ended main thread (a zombie in the list). The
 *             tracer's thread that watches for the program's end once main has gone must check
 *             in too. trees: only the walker's {walker, walker;walk_all} is checked
 runs the mode under nice(5) first (a niced process whose main
 * thread had exited never ended: the tracer read the nice value as its thread count).
 * A second argument "chroot" runs it chrooted first into a new empty directory, without /proc
 * (as root; else where it is): after main's raw exit the process never ended, its control
 * server unable to read /proc from there, and a SIGTERM then pending made it spin.
 */
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <pthread.h>
#include <dirent.h>
#include <dlfcn.h>
#include <semaphore.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <stddef.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <fcntl.h>
#include <sys/un.h>
#include <sys/socket.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include "behave.h"

static volatile long sink;
NOINLINE long leaf(long x)
{
    sink += x;
    return x * 3 + 1;
}
NOINLINE long work(long n)
{
    long s = 0;
    for (long i = 0; i < n; i++)
        s += leaf(i);
    return s;
}
NOINLINE void *worker(void *arg)
{
    long r = work((long)arg);
    KEEP(r);
    return (void *)r;
}

NOINLINE int many(void)
{
    long sum = 0;
    for (int wave = 0; wave < 5; wave++) {
        pthread_t t[10];
        for (int j = 0; j < 10; j++) {
            long i = wave * 10 + j;
            pthread_create(&t[j], NULL, worker, (void *)((i % 7 + 1) * 3));
        }
        for (int j = 0; j < 10; j++) {
            void *r;
            pthread_join(t[j], &r);
            sum += (long)r;
        }
    }
    printf("many: 50 threads, sum %ld\n", sum);
    return 31;
}

NOINLINE int churn(void)
{
    long waves = scaled(50), sum = 0;
    for (long wave = 0; wave < waves; wave++) {
        pthread_t t[100];
        for (int j = 0; j < 100; j++)
            if (pthread_create(&t[j], NULL, worker, (void *)100L)) return 4;
        for (int j = 0; j < 100; j++) {
            void *r;
            pthread_join(t[j], &r);
            sum += (long)r;
        }
    }
    printf("churn: %ld threads, sum %ld\n", waves * 100, sum);
    return 0;
}

static sem_t done;
NOTRACE static void *detached_start(void *arg)
{
    worker(arg);
    sem_post(&done); /* after worker() returned: its tree is complete */
    return NULL;
}

NOINLINE int detached(void)
{
    sem_init(&done, 0, 0);
    pthread_attr_t at;
    pthread_attr_init(&at);
    pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
    for (int i = 0; i < 20; i++) {
        pthread_t t;
        pthread_create(&t, &at, detached_start, (void *)5L);
    }
    for (int i = 0; i < 20; i++)
        sem_wait(&done);
    printf("detached: 20 threads done\n");
    return 32;
}

NOINLINE void cleanup_fn(void *arg)
{
    sink += (long)arg;
}
NOINLINE void nest2(void)
{
    leaf(1);
    pthread_exit((void *)42L);
}
NOINLINE void nest1(void)
{
    pthread_cleanup_push(cleanup_fn, (void *)7L);
    nest2();
    NOTAIL();
    pthread_cleanup_pop(0);
}
NOINLINE void *exiter(void *arg)
{
    (void)arg;
    nest1();
    NOTAIL();
    return NULL;
}
NOINLINE void after_join(void)
{
    sink++;
}

NOINLINE int texit(void)
{
    pthread_t t;
    void *r;
    pthread_create(&t, NULL, exiter, NULL);
    pthread_join(t, &r);
    after_join();
    printf("exit: joined %ld, cleanup ran %s\n", (long)r, sink >= 7 ? "yes" : "no");
    return 33;
}

NOINLINE void *talker(void *arg)
{
    (void)arg;
    usleep(100 * 1000); /* the main thread has ended by now */
    for (int i = 0; i < 3; i++) {
        long r = work(2);
        printf("talker line %d (%ld)\n", i, r);
    }
    return NULL;
}

NOINLINE int mainexit(void)
{
    pthread_t t;
    pthread_create(&t, NULL, talker, NULL);
    pthread_exit(NULL);
}

/* closes every descriptor from 3 to 15 again and again for 0.3 s, while the main thread is
 * gone, then talks */
NOINLINE void *closer(void *arg)
{
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
        for (int fd = 3; fd <= 15; fd++)
            close(fd);
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((t.tv_sec - t0.tv_sec) * 1000000000L + (t.tv_nsec - t0.tv_nsec) < 300000000L);
    return talker(arg);
}

NOINLINE int closerexit(void)
{
    pthread_t t;
    /* pthread_exit() unwinds with libgcc_s, which glibc loads at its first use: not while
     * descriptors are closed under the loader */
    if (!dlopen("libgcc_s.so.1", RTLD_NOW)) return 3;
    pthread_create(&t, NULL, closer, NULL);
    pthread_exit(NULL);
}

NOINLINE int sysexit(void);

/* A fork child connects to its parent's control socket (where ftrace-run's preload listens;
 * untraced there is none) every 20 ms until the parent is gone, as a storm of new sessions'
 * recorders, which look at every live socket, does; then the parent's main thread exits raw */
NOTRACE static void poke_parent(pid_t parent)
{
    char path[200];
    const char *xdg = getenv("XDG_RUNTIME_DIR");
    if (xdg && *xdg)
        snprintf(path, sizeof path, "%s/ftrace-run/%d.sock", xdg, (int)parent);
    else
        snprintf(path, sizeof path, "/tmp/ftrace-run-%u/%d.sock", (unsigned)geteuid(), (int)parent);
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    snprintf(a.sun_path, sizeof a.sun_path, "%s", path);
    for (int i = 0; getppid() == parent && i < 3000; i++) { /* a minute at most */
        int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0) {
            connect(fd, (struct sockaddr *)&a, sizeof a);
            close(fd);
        }
        usleep(20 * 1000);
    }
}

NOINLINE int pokedexit(void)
{
    pid_t parent = getpid();
    pid_t child = fork();
    if (child == 0) {
        int null = open("/dev/null", O_WRONLY);
        dup2(null, 1); /* the test's pipes are the parent's alone */
        dup2(null, 2);
        poke_parent(parent);
        _exit(0);
    }
    return sysexit();
}

NOINLINE int sysexit(void)
{
    pthread_t t;
    pthread_create(&t, NULL, talker, NULL);
    for (;;)
        syscall(SYS_exit, 0);
}

static sem_t named, go;
NOTRACE static void *self_namer(void *arg)
{
    prctl(PR_SET_NAME, "self-1");
    pthread_setname_np(pthread_self(), "self-2");
    worker(arg);
    return NULL;
}
NOTRACE static void *other_named(void *arg)
{
    sem_post(&named);
    sem_wait(&go); /* main renamed it meanwhile */
    worker(arg);
    return NULL;
}

NOINLINE int names(void)
{
    struct sock_filter f[] = {
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_prctl, 0, 3),
        BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, args[0])),
        BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, PR_GET_NAME, 0, 1),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
        BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
    };
    struct sock_fprog prog = {sizeof f / sizeof f[0], f};
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) || prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog))
        return 5;
    sem_init(&named, 0, 0);
    sem_init(&go, 0, 0);
    pthread_t a, b;
    if (pthread_create(&a, NULL, self_namer, (void *)3000L)) return 4;
    if (pthread_create(&b, NULL, other_named, (void *)3000L)) return 4;
    sem_wait(&named);
    if (pthread_setname_np(b, "renamed-b")) return 6;
    sem_post(&go);
    pthread_join(a, NULL);
    pthread_join(b, NULL);
    printf("names: 2 threads\n");
    return 0;
}

static atomic_int checked_in, walk_done;
NOINLINE void checkin(int sig)
{
    (void)sig;
    atomic_fetch_add(&checked_in, 1);
}
static void *walk_waiter(void *arg)
{
    (void)arg;
    while (!atomic_load(&walk_done))
        usleep(1000);
    return NULL;
}
/* Is thread tid of this process a zombie (a main thread that called pthread_exit())? */
static int zombie(int tid)
{
    char path[64], buf[512];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE *f = fopen(path, "r");
    size_t n = f ? fread(buf, 1, sizeof buf - 1, f) : 0;
    if (f) fclose(f);
    buf[n] = 0;
    const char *p = strrchr(buf, ')');
    return p && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X');
}

NOINLINE int walk_all(void)
{
    int sent = 0, me = (int)syscall(SYS_gettid);
    DIR *d = opendir("/proc/self/task");
    for (struct dirent *e; d && (e = readdir(d));) {
        int tid = atoi(e->d_name);
        if (tid > 0 && tid != me && !zombie(tid) &&
            syscall(SYS_tgkill, getpid(), tid, SIGUSR1) == 0)
            sent++;
    }
    if (d) closedir(d);
    for (int i = 0; i < 3000 && atomic_load(&checked_in) < sent; i++)
        usleep(1000);
    return sent - atomic_load(&checked_in);
}

static void say(int missing)
{
    if (missing)
        printf("walk: %d thread%s never checked in\n", missing, missing == 1 ? "" : "s");
    else
        printf("walk: every thread checked in\n");
    fflush(stdout);
}

NOINLINE int walk(void)
{
    signal(SIGUSR1, checkin);
    pthread_t t[3];
    for (int i = 0; i < 3; i++)
        pthread_create(&t[i], NULL, walk_waiter, NULL);
    usleep(20000);
    say(walk_all());
    atomic_store(&walk_done, 1);
    for (int i = 0; i < 3; i++)
        pthread_join(t[i], NULL);
    return 0;
}

NOINLINE void *walker(void *arg)
{
    (void)arg;
    usleep(50000); /* main has called pthread_exit() */
    say(walk_all());
    atomic_store(&walk_done, 1);
    return NULL;
}

static int forkwalk(void)
{
    signal(SIGUSR1, checkin);
    fflush(stdout);
    pid_t p = fork();
    if (p == 0) {
        say(walk_all());
        _exit(0);
    }
    int st = 0;
    return p > 0 && waitpid(p, &st, 0) == p && WIFEXITED(st) ? WEXITSTATUS(st) : 1;
}

static int walkexit(void)
{
    signal(SIGUSR1, checkin);
    pthread_t t[3];
    for (int i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, walk_waiter, NULL);
    pthread_create(&t[2], NULL, walker, NULL);
    pthread_exit(NULL);
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    if (argc > 2 && !strcmp(argv[2], "nice") && nice(5) == -1) return 3;
    if (argc > 2 && !strcmp(argv[2], "chroot")) {
        /* pthread_exit() unwinds with libgcc_s, which glibc loads at its first use */
        if (!dlopen("libgcc_s.so.1", RTLD_NOW)) return 3;
        mkdir("empty-root", 0700);
        if (chroot("empty-root") == 0 && chdir("/") != 0) return 3;
    }
    int rc = 2;
    if (!strcmp(mode, "many"))
        rc = many();
    else if (!strcmp(mode, "detached"))
        rc = detached();
    else if (!strcmp(mode, "churn"))
        rc = churn();
    else if (!strcmp(mode, "exit"))
        rc = texit();
    else if (!strcmp(mode, "pokedexit"))
        rc = pokedexit();
    else if (!strcmp(mode, "closerexit"))
        rc = closerexit();
    else if (!strcmp(mode, "mainexit"))
        rc = mainexit();
    else if (!strcmp(mode, "sysexit"))
        rc = sysexit();
    else if (!strcmp(mode, "names"))
        rc = names();
    else if (!strcmp(mode, "walk"))
        rc = walk();
    else if (!strcmp(mode, "walkexit"))
        rc = walkexit();
    else if (!strcmp(mode, "forkwalk"))
        rc = forkwalk();
    else
        fprintf(stderr, "usage: bthreads "
                        "many|detached|churn|exit|mainexit|sysexit|names|walk|walkexit|forkwalk\n");
    KEEP(rc);
    return rc;
}
