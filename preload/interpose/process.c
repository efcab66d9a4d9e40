/*
 * process.c - tracing follows the program into the processes it creates.
 *
 *  - fork(): handled by pthread_atfork handlers (init.c, threads.c, writer.c): the child traces
 *    on as its own process of the session.
 *  - exec*(): the image that execs writes everything it recorded (END, "replaced by exec")
 *    before the exec; if the exec fails, tracing resumes. The new image must find the preload
 *    and the session in its environment even when the program passes an environment of its
 *    own making: the wrappers add LD_PRELOAD and every FTRACE_* variable the session started
 *    with, where the program's environment lacks them (the program's own values win).
 *    The new image must also see the environment the program gave it, not ours: the wrappers
 *    name what they added in FTR_ENV_ADDED, and the new image's constructor takes exactly that
 *    out again (ftr_env_restore), after reading its settings; its own exec*() and spawn*()
 *    still add them, from the values saved at its start. An image that execs also hands its
 *    summary line's totals on (summary.c) when the new image will load us (loads_preload).
 *  - posix_spawn*(): the environment, likewise. glibc's system() and popen() spawn with environ
 *    from inside the C library, past these wrappers: they start traced children where environ
 *    carries LD_PRELOAD (a program given the session's environment, as most are), and untraced
 *    ones in a process whose environ was restored to one its parent made without it.
 *  - vfork(): the child shares our memory; ftr_finish() recognises it by its pid and does
 *    nothing, and the wrappers only build the new environment, on the stack. vfork() itself is
 *    wrapped (vfork_x86_64.S): the calling thread does not trace across it, so the child's
 *    traced calls before its exec are not recorded as the parent's (they are not recorded).
 *
 * glibc's exec functions call each other internally (not through the PLT), so each exported
 * one is wrapped. The real functions are looked up at start-up: a vfork child must not run
 * the dynamic linker's lookup code.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <elf.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ftr_env.h"
#include "sigguard.h"
#include "tracer.h"

#define EXPORT __attribute__((visibility("default")))
#define MAX_ARGS 4096

extern char **environ;

static char *session_env[FTR_ENV__COUNT]; /* "FTRACE_X=value" as the session started */
static size_t n_session_env;
static char preload_lib[PATH_MAX]; /* our own path, for LD_PRELOAD */

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*fexecve_fn)(int, char *const[], char *const[]);
typedef int (*execveat_fn)(int, const char *, char *const[], char *const[], int);
typedef int (*spawn_fn)(pid_t *, const char *, const posix_spawn_file_actions_t *,
                        const posix_spawnattr_t *, char *const[], char *const[]);
static execve_fn real_execve, real_execvpe;
static fexecve_fn real_fexecve;
static execveat_fn real_execveat;
static spawn_fn real_posix_spawn, real_posix_spawnp;

/* ftrace-run put the program's ASan runtime first in LD_PRELOAD, named in
 * FTR_ENV_RUNTIME_PRELOAD (ftr_env.h): it is loaded now, and the program and the processes it
 * starts see LD_PRELOAD as an untraced run would, ours aside (ASan preloaded into a shell or
 * any other tool would run its leak check there, changing what it prints and its status). */
static void drop_runtime_preload(void)
{
    const char *rt = getenv(FTR_ENV_RUNTIME_PRELOAD), *ld = getenv("LD_PRELOAD");
    if (!rt) return;
    size_t n = strlen(rt);
    if (n && ld && !strncmp(ld, rt, n) && (ld[n] == ':' || ld[n] == ' '))
        setenv("LD_PRELOAD", ld + n + 1, 1);
    unsetenv(FTR_ENV_RUNTIME_PRELOAD);
}

void ftr_env_snapshot(void)
{
    drop_runtime_preload();
    for (int i = 0; i < FTR_ENV__COUNT; i++) {
        const char *v = getenv(ftr_env_name(i));
        if (v && asprintf(&session_env[n_session_env], "%s=%s", ftr_env_name(i), v) > 0)
            n_session_env++;
    }
    Dl_info di;
    if (dladdr((void *)ftr_env_snapshot, &di) && di.dli_fname)
        snprintf(preload_lib, sizeof preload_lib, "%s", di.dli_fname);
    real_execve = (execve_fn)dlsym(RTLD_NEXT, "execve");
    real_execvpe = (execve_fn)dlsym(RTLD_NEXT, "execvpe");
    real_fexecve = (fexecve_fn)dlsym(RTLD_NEXT, "fexecve");
    real_execveat = (execveat_fn)dlsym(RTLD_NEXT, "execveat");
    real_posix_spawn = (spawn_fn)dlsym(RTLD_NEXT, "posix_spawn");
    real_posix_spawnp = (spawn_fn)dlsym(RTLD_NEXT, "posix_spawnp");
}

void ftr_env_session_set(int id, const char *value)
{
    const char *name = ftr_env_name(id);
    size_t n = strlen(name);
    char *kv;
    if (setenv(name, value, 1) != 0 || asprintf(&kv, "%s=%s", name, value) < 0) return;
    for (size_t i = 0; i < n_session_env; i++)
        if (!strncmp(session_env[i], name, n) && session_env[i][n] == '=') {
            free(session_env[i]);
            session_env[i] = kv;
            return;
        }
    if (n_session_env < FTR_ENV__COUNT)
        session_env[n_session_env++] = kv;
    else
        free(kv);
}

/* LD_PRELOAD as the parent gave it: ours was put first ("ours:theirs", or "ours" for an empty
 * one). Edited in place, so that the entry keeps its place among the others. */
static void strip_first_preload(void)
{
    for (char **e = environ; e && *e; e++) {
        if (strncmp(*e, "LD_PRELOAD=", 11) != 0) continue;
        char *v = *e + 11, *rest = v + strcspn(v, ": ");
        memmove(v, *rest ? rest + 1 : rest, strlen(*rest ? rest + 1 : rest) + 1);
        return;
    }
}

void ftr_env_restore(void)
{
    const char *v = getenv(FTR_ENV_ADDED);
    char names[64 + FTR_ENV__COUNT * 32];
    if (!v) return;
    snprintf(names, sizeof names, "%s", v);
    unsetenv(FTR_ENV_ADDED);
    for (char *sv, *name = strtok_r(names, ",", &sv); name; name = strtok_r(NULL, ",", &sv)) {
        if (!strcmp(name, "LD_PRELOAD+"))
            strip_first_preload();
        else if (!strcmp(name, "LD_PRELOAD") || !strncmp(name, "FTRACE_", 7))
            unsetenv(name); /* nothing else: the marker names only what the wrapper adds */
    }
}

static size_t count(char *const v[])
{
    size_t n = 0;
    while (v && v[n])
        n++;
    return n;
}

static int has_name(char *const env[], const char *entry)
{
    size_t len = strcspn(entry, "=");
    for (size_t i = 0; env && env[i]; i++)
        if (strncmp(env[i], entry, len) == 0 && env[i][len] == '=') return 1;
    return 0;
}

/* Appends ",name" (the first without the comma) to the FTR_ENV_ADDED entry being built. */
static void note_added(char *added, size_t len, const char *entry, size_t namelen, const char *tail)
{
    size_t at = strlen(added);
    int first = added[at - 1] == '=';
    snprintf(added + at, len - at, "%s%.*s%s", first ? "" : ",", (int)namelen, entry, tail);
}

/* Fills out (room for count(env) + FTR_ENV__COUNT + 4 pointers) with env plus what the session
 * needs, then carry (the summary's FTR_ENV_CARRY entry, or NULL), then the FTR_ENV_ADDED entry
 * naming what was added, if anything was; ld and added are scratch for the rewritten
 * LD_PRELOAD entry and that one. No allocation (vfork children). */
static char **session_envp(char *const env[], char **out, char *ld, size_t ldlen, char *added,
                           size_t addedlen, const char *carry)
{
    size_t n = 0;
    int have_ld = 0;
    snprintf(added, addedlen, "%s=", FTR_ENV_ADDED);
    for (size_t i = 0; env && env[i]; i++) {
        if (strncmp(env[i], "LD_PRELOAD=", 11) == 0 && preload_lib[0]) {
            have_ld = 1;
            if (!strstr(env[i] + 11, preload_lib)) {
                snprintf(ld, ldlen, "LD_PRELOAD=%s%s%s", preload_lib, env[i][11] ? ":" : "",
                         env[i] + 11);
                out[n++] = ld;
                note_added(added, addedlen, "LD_PRELOAD", 10, "+");
                continue;
            }
        }
        out[n++] = env[i];
    }
    if (!have_ld && preload_lib[0]) {
        snprintf(ld, ldlen, "LD_PRELOAD=%s", preload_lib);
        out[n++] = ld;
        note_added(added, addedlen, "LD_PRELOAD", 10, "");
    }
    for (size_t i = 0; i < n_session_env; i++)
        if (!has_name(env, session_env[i])) {
            out[n++] = session_env[i];
            note_added(added, addedlen, session_env[i], strcspn(session_env[i], "="), "");
        }
    if (carry && !has_name(env, carry)) out[n++] = (char *)carry;
    if (added[strlen(added) - 1] != '=' && !has_name(env, added)) out[n++] = added;
    out[n] = NULL;
    return out;
}

#define SESSION_ENVP(env, name, carry)                                                             \
    char *name##_v[count(env) + FTR_ENV__COUNT + 4];                                               \
    char name##_ld[PATH_MAX + 4096];                                                               \
    char name##_added[64 + FTR_ENV__COUNT * 32];                                                   \
    char **name = session_envp(env, name##_v, name##_ld, sizeof name##_ld, name##_added,           \
                               sizeof name##_added, carry)

/* Runs an exec: flush this image's trace first, resume it if the exec fails. The new image's
 * environment is made after the flush: it carries the summary line's totals (summary.c) when
 * the file at dirfd/path (or the open fd) will load us. It gets the program's mask
 * (sigguard.h). */
#define DO_EXEC(envp, env, dirfd, path, fd, call)                                                  \
    do {                                                                                           \
        int finished_ = ftr_finish(FTR_END_EXEC, 0);                                               \
        ftr_sigguard_exec(0);                                                                      \
        const char *carry_ = finished_ ? ftr_summary_exec(loads_preload(dirfd, path, fd)) : NULL;  \
        SESSION_ENVP(envp, env, carry_);                                                           \
        int rc_ = (call);                                                                          \
        int errno_ = errno;                                                                        \
        ftr_sigguard_exec(1);                                                                      \
        if (finished_) ftr_resume();                                                               \
        errno = errno_;                                                                            \
        return rc_;                                                                                \
    } while (0)

/* Will the file exec'd load this preload, so that the next image says the summary line? Not
 * a static or 32-bit program, nor a set-user-ID one that the dynamic linker runs securely
 * (it ignores LD_PRELOAD then); a script, as its interpreter would (the kernel follows 4 of
 * them). Unknown or unreadable: yes (the exec fails, or a shell runs it, or it is an
 * executable we may not read: most are dynamic). The descriptor is opened under the
 * descriptor lock, so that no dup2() of the program's (fdguard.c) lands on its number
 * meanwhile. */
static int loads_preload_at(int dirfd, const char *path, int fd, int depth)
{
    unsigned char buf[512];
    struct stat st;
    ssize_t n = -1;
    int own = -1, ok = 1;
    ftr_fd_lock();
    if (fd < 0 && path) fd = own = openat(dirfd, path, O_RDONLY | O_CLOEXEC);
    if (fd >= 0 && fstat(fd, &st) == 0) n = pread(fd, buf, sizeof buf - 1, 0);
    const Elf64_Ehdr *eh = (const Elf64_Ehdr *)buf;
    if (n >= (ssize_t)sizeof *eh && !memcmp(buf, ELFMAG, SELFMAG)) {
        ok = eh->e_ident[EI_CLASS] == ELFCLASS64 && eh->e_machine == EM_X86_64 &&
             !(st.st_mode & S_ISUID && st.st_uid != getuid()) &&
             !(st.st_mode & S_ISGID && st.st_gid != getgid());
        Elf64_Phdr ph[64];
        size_t np = eh->e_phnum < 64 ? eh->e_phnum : 64, k = 0;
        if (ok && eh->e_phentsize == sizeof *ph &&
            pread(fd, ph, np * sizeof *ph, (off_t)eh->e_phoff) == (ssize_t)(np * sizeof *ph))
            while (k < np && ph[k].p_type != PT_INTERP)
                k++;
        ok = ok && k < np; /* dynamically linked: the dynamic linker loads LD_PRELOAD */
    }
    if (own >= 0) close(own);
    ftr_fd_unlock();
    if (n > 2 && buf[0] == '#' && buf[1] == '!' && depth < 4) {
        buf[n] = 0;
        char *interp = (char *)buf + 2 + strspn((char *)buf + 2, " \t");
        interp[strcspn(interp, " \t\n")] = 0;
        if (*interp) ok = loads_preload_at(AT_FDCWD, interp, -1, depth + 1);
    }
    return ok;
}

static int loads_preload(int dirfd, const char *path, int fd)
{
    return loads_preload_at(dirfd, path, fd, 0);
}

/* The file execvpe() will run, as it searches PATH (or NULL: the name has a slash, or is not
 * found; the exec then fails, or it is the name itself). */
static const char *search_path(const char *file, char *buf, size_t len)
{
    if (!file || !*file || strchr(file, '/')) return file;
    const char *p = getenv("PATH");
    if (!p) p = "/bin:/usr/bin";
    for (const char *dir = p;; dir++) {
        size_t dl = strcspn(dir, ":");
        struct stat st;
        if (snprintf(buf, len, "%.*s/%s", dl ? (int)dl : 1, dl ? dir : ".", file) < (int)len &&
            access(buf, X_OK) == 0 && stat(buf, &st) == 0 && S_ISREG(st.st_mode))
            return buf;
        dir += dl;
        if (!*dir) return NULL;
    }
}

static int missing(void)
{
    errno = ENOSYS;
    return -1;
}

EXPORT int execve(const char *path, char *const argv[], char *const envp[])
{
    DO_EXEC(envp, env, AT_FDCWD, path, -1, real_execve ? real_execve(path, argv, env) : missing());
}

EXPORT int execvpe(const char *file, char *const argv[], char *const envp[])
{
    char found[PATH_MAX];
    DO_EXEC(envp, env, AT_FDCWD, search_path(file, found, sizeof found), -1,
            real_execvpe ? real_execvpe(file, argv, env) : missing());
}

EXPORT int fexecve(int fd, char *const argv[], char *const envp[])
{
    DO_EXEC(envp, env, AT_FDCWD, NULL, fd, real_fexecve ? real_fexecve(fd, argv, env) : missing());
}

EXPORT int execveat(int dirfd, const char *path, char *const argv[], char *const envp[], int flags)
{
    const char *name = path;
    __asm__("" : "+r"(name)); /* declared nonnull, but a NULL is the kernel's EFAULT, not ours */
    int empty = (flags & AT_EMPTY_PATH) && name && !*name;
    DO_EXEC(envp, env, dirfd, empty ? NULL : path, empty ? dirfd : -1,
            real_execveat ? real_execveat(dirfd, path, argv, env, flags) : missing());
}

EXPORT int execv(const char *path, char *const argv[])
{
    return execve(path, argv, environ);
}
EXPORT int execvp(const char *file, char *const argv[])
{
    return execvpe(file, argv, environ);
}

/* execl*(): the variadic arguments, gathered into an argv on the stack. */
#define GATHER(first, ap, argv, after)                                                             \
    char *argv[MAX_ARGS];                                                                          \
    size_t argc_ = 0;                                                                              \
    argv[argc_++] = (char *)(first);                                                               \
    va_start(ap, first);                                                                           \
    while (argc_ < MAX_ARGS - 1 && (argv[argc_] = va_arg(ap, char *)) != NULL)                     \
        argc_++;                                                                                   \
    argv[argc_] = NULL;                                                                            \
    after;                                                                                         \
    va_end(ap)

EXPORT int execl(const char *path, const char *arg, ...)
{
    va_list ap;
    GATHER(arg, ap, argv, (void)0);
    return execve(path, argv, environ);
}

EXPORT int execlp(const char *file, const char *arg, ...)
{
    va_list ap;
    GATHER(arg, ap, argv, (void)0);
    return execvpe(file, argv, environ);
}

EXPORT int execle(const char *path, const char *arg, ...)
{
    va_list ap;
    char *const *envp;
    GATHER(arg, ap, argv, envp = va_arg(ap, char *const *));
    return execve(path, argv, envp);
}

/* A child that does not get a mask of its own gets the program's (sigguard.h): a copy of the
 * attributes that says so. @return attr, or buf */
static const posix_spawnattr_t *spawn_attr(const posix_spawnattr_t *attr, posix_spawnattr_t *buf)
{
    short flags = 0;
    sigset_t mask;
    if (attr && posix_spawnattr_getflags(attr, &flags) != 0) return attr;
    if ((flags & POSIX_SPAWN_SETSIGMASK) || !ftr_sigguard_spawn_mask(&mask)) return attr;
    if (attr)
        *buf = *attr;
    else if (posix_spawnattr_init(buf) != 0)
        return attr;
    posix_spawnattr_setflags(buf, (short)(flags | POSIX_SPAWN_SETSIGMASK));
    posix_spawnattr_setsigmask(buf, &mask);
    return buf;
}

EXPORT int posix_spawn(pid_t *pid, const char *path, const posix_spawn_file_actions_t *fa,
                       const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    if (!real_posix_spawn) return ENOSYS;
    SESSION_ENVP(envp, env, NULL);
    posix_spawnattr_t buf;
    return real_posix_spawn(pid, path, fa, spawn_attr(attr, &buf), argv, env);
}

EXPORT int posix_spawnp(pid_t *pid, const char *file, const posix_spawn_file_actions_t *fa,
                        const posix_spawnattr_t *attr, char *const argv[], char *const envp[])
{
    if (!real_posix_spawnp) return ENOSYS;
    SESSION_ENVP(envp, env, NULL);
    posix_spawnattr_t buf;
    return real_posix_spawnp(pid, file, fa, spawn_attr(attr, &buf), argv, env);
}

/* daemon(): glibc's parent leaves through its internal _exit, which no wrapper sees, and would
 * lose all it recorded. The same steps, with our fork and our _exit. */
EXPORT int daemon(int nochdir, int noclose)
{
    pid_t p = fork();
    if (p < 0) return -1;
    if (p > 0) _exit(0);
    if (setsid() < 0) return -1;
    if (!nochdir && chdir("/") < 0) return -1;
    if (!noclose) {
        int fd = open("/dev/null", O_RDWR);
        if (fd < 0) return -1;
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISCHR(st.st_mode)) {
            close(fd);
            errno = ENODEV;
            return -1;
        }
        dup2(fd, 0);
        dup2(fd, 1);
        dup2(fd, 2);
        if (fd > 2) close(fd);
    }
    return 0;
}

/* vfork_x86_64.S: a failed vfork() sets errno like glibc's */
atomic_int ftr_vforks;

void ftr_vfork_errno(int e)
{
    errno = e;
}
