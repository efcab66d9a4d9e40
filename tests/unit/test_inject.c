/*
 * test_inject.c - the injector's pure parts (cli/inject/inject_int.h): /proc/PID/maps lines,
 * /proc/PID/task/TID/syscall and status texts, which system calls a thread may be stopped in,
 * and the ELF symbol lookup, on this test's own libc.so.6 (compared with what the dynamic
 * loader and the kernel say).
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <dlfcn.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "inject_int.h"

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "r");
    cr_assert_not_null(f, "%s", path);
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap);
    size_t r;
    while ((r = fread(buf + n, 1, cap - n - 1, f)) > 0) {
        n += r;
        if (n + 1 == cap) buf = realloc(buf, cap *= 2);
    }
    fclose(f);
    buf[n] = 0;
    return buf;
}

/* ---- maps ---- */

Test(maps, a_file_mapping)
{
    struct ftr_inj_map m;
    const char *l = "7f1c8a628000-7f1c8a7bd000 r-xp 00028000 fe:01 1234567                    "
                    "/usr/lib/x86_64-linux-gnu/libc.so.6\nnext line";
    cr_assert_eq(ftr_inj_parse_maps_line(l, &m), 0);
    cr_assert_eq(m.start, 0x7f1c8a628000ull);
    cr_assert_eq(m.end, 0x7f1c8a7bd000ull);
    cr_assert_str_eq(m.perms, "r-xp");
    cr_assert_eq(m.offset, 0x28000u);
    cr_assert_eq(m.dev_major, 0xfe);
    cr_assert_eq(m.dev_minor, 1);
    cr_assert_eq(m.inode, 1234567u);
    cr_assert_eq(m.path_len, strlen("/usr/lib/x86_64-linux-gnu/libc.so.6"));
    cr_assert(!memcmp(m.path, "/usr/lib/x86_64-linux-gnu/libc.so.6", m.path_len));
}

Test(maps, anonymous_deleted_and_special)
{
    struct ftr_inj_map m;
    cr_assert_eq(ftr_inj_parse_maps_line("7ffd1000-7ffd2000 rw-p 00000000 00:00 0", &m), 0);
    cr_assert_eq(m.path_len, 0);
    cr_assert_eq(ftr_inj_parse_maps_line("7ffd1000-7ffd2000 rw-p 00000000 00:00 0 \n", &m), 0);
    cr_assert_eq(m.path_len, 0);
    cr_assert_eq(ftr_inj_parse_maps_line("1000-2000 rw-p 00000000 00:00 0    [stack]", &m), 0);
    cr_assert_eq(m.path_len, 7);
    cr_assert(!memcmp(m.path, "[stack]", 7));
    cr_assert_eq(
        ftr_inj_parse_maps_line("1000-2000 r-xp 00000000 08:02 99 /lib/libc.so.6 (deleted)", &m),
        0);
    cr_assert_eq(m.path_len, strlen("/lib/libc.so.6"));
}

Test(maps, malformed_lines)
{
    struct ftr_inj_map m;
    const char *bad[] = {"",
                         "garbage",
                         "1000 rw-p 00000000 00:00 0",
                         "2000-1000 rw-p 00000000 00:00 0",
                         "1000-2000 rw- 00000000 00:00 0",
                         "1000-2000 rw-p 00000000 0000 0",
                         "1000-2000 rw-p 00000000 00:00",
                         "1000-2000 rw-p 00000000 00:00 x",
                         "1000-2000 rw-p 00000000 00:00 12x /a",
                         "11112222333344445-ffffffffffffffff rw-p 0 00:00 0"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_eq(ftr_inj_parse_maps_line(bad[i], &m), -1, "accepted: '%s'", bad[i]);
}

Test(maps, find_and_below)
{
    const char *maps = "1000-2000 r--p 00000000 08:01 5 /bin/x\n"
                       "bad line\n"
                       "7000-8000 ---p 00000000 00:00 0\n"
                       "8000-10000 rw-p 00000000 00:00 0\n";
    struct ftr_inj_map m, below;
    cr_assert_eq(ftr_inj_maps_find(maps, 0x9000, &m, &below), 0);
    cr_assert_eq(m.start, 0x8000u);
    cr_assert_eq(below.end, 0x8000u);
    cr_assert_str_eq(below.perms, "---p");
    cr_assert_eq(ftr_inj_maps_find(maps, 0x1000, &m, &below), 0);
    cr_assert_eq(below.end, 0u);
    cr_assert_eq(ftr_inj_maps_find(maps, 0x2000, &m, NULL), -1);
    cr_assert_eq(ftr_inj_maps_find(maps, 0x10000, &m, NULL), -1);
    cr_assert_eq(ftr_inj_maps_find(maps, 0, &m, NULL), -1);
}

/* ---- syscall and status ---- */

Test(sysc, blocked_in_a_call)
{
    struct ftr_inj_sysc s;
    const char *t = "230 0x1 0x0 0x7ffd3a2b1c50 0x0 0x8 0x0 0x7ffd3a2b1c38 0x7f1c8a6ec503\n";
    cr_assert_eq(ftr_inj_parse_syscall(t, &s), 0);
    cr_assert_eq(s.nr, 230);
    cr_assert_eq(s.args[0], 1u);
    cr_assert_eq(s.args[2], 0x7ffd3a2b1c50ull);
    cr_assert_eq(s.args[4], 8u);
    cr_assert_eq(s.sp, 0x7ffd3a2b1c38ull);
    cr_assert_eq(s.pc, 0x7f1c8a6ec503ull);
}

Test(sysc, running_and_outside_a_call)
{
    struct ftr_inj_sysc s;
    cr_assert_eq(ftr_inj_parse_syscall("running\n", &s), 0);
    cr_assert_eq(s.nr, FTR_INJ_RUNNING);
    cr_assert_eq(ftr_inj_parse_syscall("-1 0x7ffd00 0x401000\n", &s), 0);
    cr_assert_eq(s.nr, FTR_INJ_NOCALL);
    cr_assert_eq(s.sp, 0x7ffd00u);
    cr_assert_eq(s.pc, 0x401000u);
}

Test(sysc, malformed)
{
    struct ftr_inj_sysc s;
    const char *bad[] = {"",
                         "x",
                         "-2 0x1 0x2",
                         "-1 0x7ffd00",
                         "7 0x1 0x2 0x3",
                         "7 0x1 0x2 0x3 0x4 0x5 0x6 0x7",
                         "7 0x1 0x2 0x3 0x4 0x5 0x6 0x7 0x8 junk",
                         "7 1 2 3 4 5 6 7 8",
                         "99999999999999999999 0x1 0x2 0x3 0x4 0x5 0x6 0x7 0x8"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_expect_eq(ftr_inj_parse_syscall(bad[i], &s), -1, "accepted: '%s'", bad[i]);
}

Test(status, fields_and_signal_sets)
{
    const char *st = "Name:\tsleeper\nState:\tS (sleeping)\nTracerPid:\t0\nUid:\t1000\t1000\t1000\t"
                     "1000\nSigBlk:\t0000000000000400\nSigIgn:\t0000000000001000\nSeccomp:\t2\n";
    cr_assert(!strncmp(ftr_inj_status_field(st, "Name"), "sleeper\n", 8));
    cr_assert_eq(*ftr_inj_status_field(st, "State"), 'S');
    cr_assert_eq(atoi(ftr_inj_status_field(st, "Seccomp")), 2);
    cr_assert_null(ftr_inj_status_field(st, "Sig")); /* whole keys only */
    cr_assert_null(ftr_inj_status_field(st, "Tracer"));
    const char *blk = ftr_inj_status_field(st, "SigBlk"), *ign = ftr_inj_status_field(st, "SigIgn");
    cr_assert_eq(ftr_inj_sigset_has(blk, SIGSEGV), 1);
    cr_assert_eq(ftr_inj_sigset_has(blk, SIGUSR1), 0);
    cr_assert_eq(ftr_inj_sigset_has(blk, SIGUSR2), 0);
    cr_assert_eq(ftr_inj_sigset_has(ign, SIGPIPE), 1); /* 0x1000: signal 13 */
    cr_assert_eq(ftr_inj_sigset_has(ign, SIGSEGV), 0);
    cr_assert_eq(ftr_inj_sigset_has(ign, SIGALRM), 0);
    cr_assert_eq(ftr_inj_sigset_has("1000", 13), 1);
    cr_assert_eq(ftr_inj_sigset_has("8000000000000000", 64), 1);
    cr_assert_eq(ftr_inj_sigset_has("8000000000000000", 63), 0);
    cr_assert_eq(ftr_inj_sigset_has("1", 5), 0); /* beyond the digits */
    cr_assert_eq(ftr_inj_sigset_has("", 1), -1);
    cr_assert_eq(ftr_inj_sigset_has(NULL, 1), -1);
}

Test(status, this_process)
{
    char *st = slurp("/proc/self/status");
    sigset_t s;
    sigemptyset(&s);
    sigaddset(&s, SIGSEGV);
    sigprocmask(SIG_BLOCK, &s, NULL);
    char *blocked = slurp("/proc/thread-self/status");
    sigprocmask(SIG_UNBLOCK, &s, NULL);
    cr_assert_eq(ftr_inj_sigset_has(ftr_inj_status_field(blocked, "SigBlk"), SIGSEGV), 1);
    char *now = slurp("/proc/thread-self/status");
    cr_assert_eq(ftr_inj_sigset_has(ftr_inj_status_field(now, "SigBlk"), SIGSEGV), 0);
    cr_assert_eq(atoi(ftr_inj_status_field(st, "TracerPid")), 0);
    free(st);
    free(blocked);
    free(now);
}

/* ---- which calls ---- */

Test(classes, safe_and_unsafe_calls)
{
    const char *name;
    cr_assert_eq(ftr_inj_syscall_class(SYS_clock_nanosleep, &name), FTR_INJ_SAFE);
    cr_assert_str_eq(name, "clock_nanosleep");
    cr_assert_eq(ftr_inj_syscall_class(SYS_nanosleep, &name), FTR_INJ_SAFE);
    cr_assert_eq(ftr_inj_syscall_class(SYS_poll, &name), FTR_INJ_SAFE);
    cr_assert_eq(ftr_inj_syscall_class(SYS_wait4, &name), FTR_INJ_SAFE);
    cr_assert_eq(ftr_inj_syscall_class(SYS_waitid, &name), FTR_INJ_SAFE);
    cr_assert_eq(ftr_inj_syscall_class(SYS_pause, &name), FTR_INJ_SAFE);
    cr_assert_eq(ftr_inj_syscall_class(SYS_read, &name), FTR_INJ_SAFE_READ);
    cr_assert_eq(ftr_inj_syscall_class(SYS_accept, &name), FTR_INJ_SAFE_ACCEPT);
    cr_assert_eq(ftr_inj_syscall_class(SYS_accept4, &name), FTR_INJ_SAFE_ACCEPT);
    cr_assert_eq(ftr_inj_syscall_class(SYS_ppoll, &name), FTR_INJ_SAFE_PPOLL);
    cr_assert_eq(ftr_inj_syscall_class(SYS_pselect6, &name), FTR_INJ_SAFE_PSELECT);
    cr_assert_eq(ftr_inj_syscall_class(SYS_rt_sigsuspend, &name), FTR_INJ_SAFE_SIGSUSPEND);
    /* locks, memory, files; and the waits Linux ends with EINTR at any stop */
    long unsafe[] = {SYS_futex,
                     SYS_mmap,
                     SYS_munmap,
                     SYS_brk,
                     SYS_mprotect,
                     SYS_madvise,
                     SYS_openat,
                     SYS_epoll_wait,
                     SYS_epoll_pwait,
                     SYS_rt_sigtimedwait,
                     SYS_restart_syscall,
                     SYS_recvfrom,
                     SYS_recvmsg,
                     SYS_write,
                     SYS_clone,
                     -1,
                     100000};
    for (size_t i = 0; i < sizeof unsafe / sizeof unsafe[0]; i++)
        cr_expect_eq(ftr_inj_syscall_class(unsafe[i], &name), FTR_INJ_UNSAFE, "call %ld",
                     unsafe[i]);
    ftr_inj_syscall_class(SYS_futex, &name);
    cr_assert_str_eq(name, "futex");
    ftr_inj_syscall_class(SYS_epoll_wait, &name);
    cr_assert_str_eq(name, "epoll_wait");
    ftr_inj_syscall_class(SYS_mmap, &name);
    cr_assert_null(name);
}

/* ---- ELF, on this process's libc ---- */

/* libc.so.6's own definition of name (a sanitizer's interceptor may come first by default) */
static void *libc_sym(const char *name)
{
    void *h = dlopen("libc.so.6", RTLD_LAZY | RTLD_NOLOAD);
    cr_assert_not_null(h);
    void *p = dlsym(h, name);
    dlclose(h);
    return p;
}

static char *own_libc(struct ftr_inj_map *m, char **maps_out)
{
    char *maps = slurp("/proc/self/maps");
    for (const char *l = maps; l && *l; l = strchr(l, '\n'), l = l ? l + 1 : NULL)
        if (ftr_inj_parse_maps_line(l, m) == 0 && m->offset == 0 && m->path_len > 10 &&
            !memcmp(m->path + m->path_len - 10, "/libc.so.6", 10)) {
            *maps_out = maps;
            return strndup(m->path, m->path_len);
        }
    cr_assert_fail("no libc.so.6 in /proc/self/maps");
    return NULL;
}

Test(elf, symbols_of_own_libc)
{
    struct ftr_inj_map m;
    char *maps, *path = own_libc(&m, &maps), err[256];
    struct ftr_inj_elf e;
    cr_assert_eq(ftr_inj_elf_open(path, &e, err, sizeof err), 0, "%s", err);
    uint64_t v, base = m.start - e.load_vaddr;
    const char *names[] = {"dlopen", "dlerror", "gnu_get_libc_version", "malloc", "environ"};
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        cr_assert_eq(ftr_inj_elf_symbol(&e, names[i], &v), 0, "%s", names[i]);
        cr_expect_eq((void *)(uintptr_t)(base + v), libc_sym(names[i]), "%s", names[i]);
    }
    cr_assert_eq(ftr_inj_elf_symbol(&e, "no_such_symbol_here", &v), -1);
    cr_assert_eq(ftr_inj_elf_symbol(&e, "dlope", &v), -1); /* whole names only */
    const unsigned char *id;
    size_t idlen;
    cr_assert_eq(ftr_inj_elf_build_id(&e, &id, &idlen, &v), 0);
    cr_assert(!memcmp(id, (void *)(uintptr_t)(base + v), idlen));
    ftr_inj_elf_close(&e);
    free(path);
    free(maps);
}

/* The kernel's sigaction, to read the sa_restorer glibc installs */
struct ksigaction {
    void *handler;
    unsigned long flags;
    void *restorer;
    uint64_t mask;
};

static void nop_handler(int sig)
{
    (void)sig;
}

Test(elf, find_libc_of_this_process)
{
    struct ftr_inj_map m;
    char *maps, *path = own_libc(&m, &maps), err[512];
    struct ftr_inj_libc lc;
    cr_assert_eq(ftr_inj_find_libc(getpid(), "/proc/self", maps, &lc, err, sizeof err), 0, "%s",
                 err);
    cr_assert_eq((void *)(uintptr_t)lc.dlopen, libc_sym("dlopen"));
    cr_assert_eq((void *)(uintptr_t)lc.dlerror, libc_sym("dlerror"));
    cr_assert_eq((void *)(uintptr_t)lc.version, libc_sym("gnu_get_libc_version"));
    cr_assert(lc.dlopen >= lc.text_lo && lc.dlopen < lc.text_hi);
    /* __restore_rt: what glibc's sigaction gives the kernel as the handler's return */
    struct sigaction sa = {.sa_handler = nop_handler};
    sigaction(SIGUSR1, &sa, NULL);
    struct ksigaction ks;
    cr_assert_eq(syscall(SYS_rt_sigaction, SIGUSR1, NULL, &ks, 8), 0);
    cr_assert_eq(lc.sigreturn, (uint64_t)(uintptr_t)ks.restorer);
    free(path);
    free(maps);
}

Test(elf, refusals)
{
    char err[512], tmp[] = "/tmp/test_inject_XXXXXX";
    struct ftr_inj_libc lc;
    struct ftr_inj_elf e;
    cr_assert_eq(ftr_inj_find_libc(getpid(), "/proc/self",
                                   "400000-401000 r-xp 00000000 08:01 7 /bin/static\n", &lc, err,
                                   sizeof err),
                 -1);
    cr_assert(strstr(err, "statically linked"), "%s", err);
    cr_assert_eq(ftr_inj_find_libc(getpid(), "/proc/self",
                                   "7f0000-7f1000 r-xp 00000000 08:01 7 /lib/ld-musl-x86_64.so.1\n",
                                   &lc, err, sizeof err),
                 -1);
    cr_assert(strstr(err, "musl"), "%s", err);
    cr_assert_eq(ftr_inj_find_libc(getpid(), "/proc/self",
                                   "7f0000-7f1000 r--p 00000000 08:01 7 /lib/libc.so.6\n"
                                   "7f2000-7f3000 r--p 00000000 08:01 7 /lib/libc.so.6\n",
                                   &lc, err, sizeof err),
                 -1);
    cr_assert(strstr(err, "2 copies"), "%s", err);
    /* not ELF, not this machine's ELF */
    int fd = mkstemp(tmp);
    cr_assert(fd >= 0);
    unsigned char junk[256] = "not an ELF file at all";
    cr_assert_eq(write(fd, junk, sizeof junk), (ssize_t)sizeof junk);
    cr_assert_eq(ftr_inj_elf_open(tmp, &e, err, sizeof err), -1);
    cr_assert(strstr(err, "not an ELF file"), "%s", err);
    memcpy(junk, "\177ELF\001\001\001", 7); /* 32-bit */
    cr_assert_eq(pwrite(fd, junk, sizeof junk, 0), (ssize_t)sizeof junk);
    cr_assert_eq(ftr_inj_elf_open(tmp, &e, err, sizeof err), -1);
    cr_assert(strstr(err, "64-bit"), "%s", err);
    close(fd);
    unlink(tmp);
    cr_assert_eq(ftr_inj_elf_open("/no/such/file", &e, err, sizeof err), -1);
    cr_assert(strstr(err, "cannot open"), "%s", err);
}
