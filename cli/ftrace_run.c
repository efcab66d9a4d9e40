/*
 * ftrace-run - run a program with libftrace.so preloaded, so that its instrumented functions
 * are traced into a trace file (see ftrace-report).
 *
 * It checks what it can before the program starts (the program exists and is dynamically
 * linked, the output is writable), sets the environment described in preload/ftr_env.h (with
 * ASan's runtime ahead of libftrace.so in LD_PRELOAD, docs/design.md "Sanitized programs") and
 * execs the program: same pid, same stdio, same exit status.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <gelf.h>
#include <getopt.h>
#include <libgen.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "ftr_argspec.h"
#include "ftr_env.h"
#include "ftr_filter.h"

#ifndef FTR_LIBDIR
#define FTR_LIBDIR "/usr/local/lib/ftrace-run"
#endif

static const char *prog = "ftrace-run";

static void usage(FILE *f)
{
    fprintf(f,
            "usage: %s [OPTIONS] PROGRAM [ARGS...]\n"
            "Run PROGRAM (built with -pg -mfentry, -pg, -mnop-mcount -mrecord-mcount or\n"
            "-fpatchable-function-entry=5) and record a function-graph trace of it.\n"
            "\n"
            "  -o, --output FILE        write the trace to FILE (default %s)\n"
            "  -F, --filter EXPR        trace only these functions: comma-separated globs,\n"
            "                           -glob to exclude, module:glob, @regex; later terms win\n"
            "                           (every other site stays a NOP and costs nothing)\n"
            "      --graph-function F   record only the call trees under F (set_graph_function)\n"
            "      --notrace F          hide F and everything it calls (set_graph_notrace)\n"
            "  -A, --argument SPEC      record arguments: FUNCS[@arg1/x,arg2/s,fparg1,...]\n"
            "                           (argN/FMT[SIZE], FMT one of d u x c p b e s f;\n"
            "                           repeatable; docs/arguments.md)\n"
            "  -R, --retval SPEC        record return values: FUNCS[@retval/FMT[SIZE]]\n"
            "      --auto-args          record the arguments and return values of every traced\n"
            "                           function, named and typed from its DWARF (-g), and of\n"
            "                           the common libc functions\n"
            "      --no-libcall         do not trace library calls (calls through the PLT or\n"
            "                           GOT into other libraries: malloc(), read(), ...)\n"
            "      --max-depth N        record calls up to depth N (max_graph_depth)\n"
            "      --threshold T        keep only calls lasting at least T (10us, 1ms; bare: us)\n"
            "      --disabled           start with tracing off (ftrace-ctl PID on)\n"
            "      --lossless           never drop events: a thread waits while the writer is\n"
            "                           behind (default: drop them and count them)\n"
            "      --no-recorder        each process writes the file from a thread of its own\n"
            "                           (default: a recorder process writes it, and keeps\n"
            "                           every record of a process killed by SIGKILL)\n"
            "      --clock C            tsc, mono (CLOCK_MONOTONIC: slower, for a TSC that is\n"
            "                           not invariant), auto (default: the TSC where trusted)\n"
            "      --exit MODE          how exits are caught: through (default: the tracer\n"
            "                           calls a function that takes no stack arguments, per\n"
            "                           DWARF) or hook (every return address is hooked)\n"
            "  -q, --quiet              nothing on stderr: no summary line, no warning\n"
            "  -h, --help               this help\n"
            "\n"
            "Environment read by the traced program's libftrace.so (set them to use it\n"
            "without ftrace-run: LD_PRELOAD=.../libftrace.so PROGRAM):\n",
            prog, FTR_DEFAULT_OUTPUT);
    for (int i = 0; i < FTR_ENV__COUNT; i++)
        fprintf(f, "  %-22s %s\n", ftr_env_name(i), ftr_env_help(i));
    fprintf(f, "\nThen: ftrace-report [FILE] prints the call graph.\n");
}

static int die(int code, const char *fmt, const char *a, const char *b)
{
    fprintf(stderr, "%s: ", prog);
    fprintf(stderr, fmt, a, b);
    fputc('\n', stderr);
    return code;
}

/* Finds libftrace.so next to this executable (build tree), in lib/ftrace-run under the
 * parent directory (an install under any prefix), or in the configured install directory. */
static int find_preload(char *out, size_t len)
{
    char self[PATH_MAX];
    ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
    if (n > 0) {
        self[n] = 0;
        const char *dir = dirname(self);
        static const char *const rel[] = {"", "/../lib/ftrace-run", "/../lib64/ftrace-run",
                                          "/../lib/x86_64-linux-gnu/ftrace-run"};
        for (size_t i = 0; i < sizeof rel / sizeof rel[0]; i++) {
            snprintf(out, len, "%s%s/%s", dir, rel[i], FTR_PRELOAD_NAME);
            if (access(out, R_OK) == 0) return 0;
        }
    }
    snprintf(out, len, "%s/%s", FTR_LIBDIR, FTR_PRELOAD_NAME);
    return access(out, R_OK) == 0 ? 0 : -1;
}

/* Resolves the program like execvp does, so that a missing one is reported before exec. */
static int resolve(const char *name, char *out, size_t len)
{
    if (strchr(name, '/')) {
        snprintf(out, len, "%s", name);
        return access(out, X_OK);
    }
    const char *path = getenv("PATH");
    if (!path) path = "/usr/local/bin:/usr/bin:/bin";
    for (const char *p = path; *p;) {
        const char *e = strchr(p, ':');
        size_t dl = e ? (size_t)(e - p) : strlen(p);
        snprintf(out, len, "%.*s/%s", (int)dl, dl ? p : ".", name);
        if (access(out, X_OK) == 0) return 0;
        p += dl + (e != NULL);
    }
    errno = ENOENT;
    return -1;
}

/* The sanitizer runtimes that matter here, by file name. ASan's must be the first object
 * loaded (it checks, and dies otherwise): libftrace.so goes after it. ThreadSanitizer sees our
 * threads through its interceptors (the libc calls they make) but not how they synchronise
 * (atomics in uninstrumented code), and would report races in them: not traced. The others
 * (LeakSanitizer, UBSan) need no place of their own. */
enum runtime { RT_NONE, RT_ASAN, RT_TSAN };

static enum runtime runtime_of(const char *path, size_t len)
{
    const char *b = path;
    for (size_t i = 0; i < len; i++)
        if (path[i] == '/') b = path + i + 1;
    size_t n = len - (size_t)(b - path);
    if (!memmem(b, n, ".so", 3)) return RT_NONE;
    if ((n > 8 && !memcmp(b, "libasan.", 8)) || (n > 16 && !memcmp(b, "libclang_rt.asan", 16)))
        return RT_ASAN;
    if ((n > 8 && !memcmp(b, "libtsan.", 8)) || (n > 16 && !memcmp(b, "libclang_rt.tsan", 16)))
        return RT_TSAN;
    return RT_NONE;
}

/* What the loader will make of the program. */
struct prog_elf {
    int dynamic;          /* 1: ELF with an interpreter; 0: static ELF; -1: not ELF (a script:
                             exec will sort it out) */
    enum runtime runtime; /* the sanitizer runtime it needs (DT_NEEDED) or carries (clang's
                             default: linked in, its symbols exported) */
    char needed[256];     /* that DT_NEEDED entry; "" when the runtime is linked in */
};

static void read_elf(const char *path, struct prog_elf *pe)
{
    memset(pe, 0, sizeof *pe);
    pe->dynamic = -1;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return;
    Elf *e = elf_version(EV_CURRENT) != EV_NONE ? elf_begin(fd, ELF_C_READ_MMAP, NULL) : NULL;
    size_t nph = 0;
    if (e && elf_kind(e) == ELF_K_ELF && gelf_getclass(e) == ELFCLASS64 &&
        elf_getphdrnum(e, &nph) == 0) {
        pe->dynamic = 0;
        for (size_t i = 0; i < nph; i++) {
            GElf_Phdr ph;
            if (gelf_getphdr(e, (int)i, &ph) && ph.p_type == PT_INTERP) pe->dynamic = 1;
        }
        for (Elf_Scn *scn = NULL; pe->dynamic == 1 && (scn = elf_nextscn(e, scn));) {
            GElf_Shdr sh;
            Elf_Data *d = gelf_getshdr(scn, &sh) ? elf_getdata(scn, NULL) : NULL;
            if (!d || !sh.sh_entsize || (sh.sh_type != SHT_DYNAMIC && sh.sh_type != SHT_DYNSYM))
                continue;
            for (size_t k = 0; k < sh.sh_size / sh.sh_entsize; k++) {
                GElf_Dyn dyn;
                GElf_Sym sym;
                const char *name;
                if (sh.sh_type == SHT_DYNAMIC) {
                    if (!gelf_getdyn(d, (int)k, &dyn) || dyn.d_tag != DT_NEEDED) continue;
                    name = elf_strptr(e, sh.sh_link, dyn.d_un.d_val);
                    enum runtime rt = name ? runtime_of(name, strlen(name)) : RT_NONE;
                    if (rt == RT_NONE) continue;
                    pe->runtime = rt;
                    snprintf(pe->needed, sizeof pe->needed, "%s", name);
                } else if (gelf_getsym(d, (int)k, &sym) && sym.st_shndx != SHN_UNDEF &&
                           (name = elf_strptr(e, sh.sh_link, sym.st_name)) &&
                           !strcmp(name, "__tsan_init")) {
                    pe->runtime = RT_TSAN;
                }
            }
        }
    }
    if (e) elf_end(e);
    close(fd);
}

/* LD_PRELOAD's entries (separated by colons or spaces, as ld.so reads them) one by one. */
static const char *next_entry(const char *p, size_t *len)
{
    p += strspn(p, ": ");
    *len = strcspn(p, ": ");
    return *len ? p : NULL;
}

static int preloads(const char *ld, enum runtime rt)
{
    size_t n;
    for (const char *p = ld; ld && (p = next_entry(p, &n)); p += n)
        if (runtime_of(p, n) == rt) return 1;
    return 0;
}

/* The LD_PRELOAD the program starts with: libftrace.so first, but after ASan's runtime. One
 * that is first already (the user's) stays first; otherwise the one the program needs is put
 * first, named as in its DT_NEEDED: ld.so finds it as it would for the program. That one is
 * named in FTR_ENV_RUNTIME_PRELOAD too: the preload takes it out of the environment again, or
 * the processes the program starts would all run with ASan (bash's leaks then fail it). */
static char *preload_list(const char *lib, const char *old, const struct prog_elf *pe)
{
    size_t n = 0;
    const char *first = old ? next_entry(old, &n) : NULL;
    size_t keep = first && runtime_of(first, n) == RT_ASAN ? n : 0; /* stays first */
    const char *rest = keep ? first + n : old ? old : "";
    rest += strspn(rest, ": ");
    int add = !keep && pe->runtime == RT_ASAN && pe->needed[0] && !strpbrk(pe->needed, ": ");
    if (add)
        setenv(FTR_ENV_RUNTIME_PRELOAD, pe->needed, 1);
    else
        unsetenv(FTR_ENV_RUNTIME_PRELOAD);
    char *out = NULL;
    if (asprintf(&out, "%s%s%.*s%s%s%s%s", add ? pe->needed : "", add ? ":" : "", (int)keep,
                 keep ? first : "", keep ? ":" : "", lib, *rest ? ":" : "", rest) < 0)
        return NULL;
    return out;
}

int main(int argc, char **argv)
{
    enum {
        OPT_GRAPH = 256,
        OPT_NOTRACE,
        OPT_DEPTH,
        OPT_THRESHOLD,
        OPT_DISABLED,
        OPT_LOSSLESS,
        OPT_NO_RECORDER,
        OPT_CLOCK,
        OPT_EXIT,
        OPT_AUTO_ARGS,
        OPT_NO_LIBCALL
    };
    static const struct option opts[] = {
        {"output", required_argument, NULL, 'o'},
        {"filter", required_argument, NULL, 'F'},
        {"graph-function", required_argument, NULL, OPT_GRAPH},
        {"notrace", required_argument, NULL, OPT_NOTRACE},
        {"argument", required_argument, NULL, 'A'},
        {"retval", required_argument, NULL, 'R'},
        {"auto-args", no_argument, NULL, OPT_AUTO_ARGS},
        {"no-libcall", no_argument, NULL, OPT_NO_LIBCALL},
        {"max-depth", required_argument, NULL, OPT_DEPTH},
        {"threshold", required_argument, NULL, OPT_THRESHOLD},
        {"disabled", no_argument, NULL, OPT_DISABLED},
        {"lossless", no_argument, NULL, OPT_LOSSLESS},
        {"no-recorder", no_argument, NULL, OPT_NO_RECORDER},
        {"clock", required_argument, NULL, OPT_CLOCK},
        {"exit", required_argument, NULL, OPT_EXIT},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const char *output = FTR_DEFAULT_OUTPUT;
    int quiet = 0, c;
    opterr = 0;
    while ((c = getopt_long(argc, argv, "+o:F:A:R:qh", opts, NULL)) != -1) {
        char err[512];
        switch (c) {
        case 'o':
            output = optarg;
            break;
        case 'F':
        case OPT_GRAPH:
        case OPT_NOTRACE: {
            struct ftr_filter *f = ftr_filter_parse(optarg, err, sizeof err);
            if (!f) {
                fprintf(stderr, "%s: %s\n", prog, err);
                return 2;
            }
            ftr_filter_free(f);
            setenv(ftr_env_name(c == 'F'         ? FTR_ENV_FILTER
                                : c == OPT_GRAPH ? FTR_ENV_GRAPH_FUNCTION
                                                 : FTR_ENV_NOTRACE),
                   optarg, 1);
            break;
        }
        case 'A':
        case 'R': {
            struct ftr_argspecs sp = {0};
            if (!*optarg) {
                fprintf(stderr, "%s: bad argument spec '': empty spec\n", prog);
                return 2;
            }
            if (ftr_argspecs_parse(optarg, c == 'R', &sp, err, sizeof err) < 0) {
                ftr_argspecs_free(&sp);
                fprintf(stderr, "%s: %s\n", prog, err);
                return 2;
            }
            ftr_argspecs_free(&sp);
            enum ftr_env_id id = c == 'A' ? FTR_ENV_ARGS : FTR_ENV_RETVAL;
            const char *old = getenv(ftr_env_name(id));
            char *v = NULL;
            if (asprintf(&v, "%s%s%s", old ? old : "", old && *old ? ";" : "", optarg) < 0) {
                fprintf(stderr, "%s: out of memory\n", prog);
                return 2;
            }
            setenv(ftr_env_name(id), v, 1);
            free(v);
            break;
        }
        case OPT_DEPTH: {
            char *end;
            unsigned long d = strtoul(optarg, &end, 10);
            if (!*optarg || *end || d > 1000000) {
                fprintf(stderr, "%s: --max-depth '%s': expected a number (0 for no limit)\n", prog,
                        optarg);
                return 2;
            }
            setenv(ftr_env_name(FTR_ENV_MAX_DEPTH), optarg, 1);
            break;
        }
        case OPT_THRESHOLD: {
            uint64_t ns;
            if (ftr_parse_duration(optarg, &ns) < 0) {
                fprintf(stderr, "%s: --threshold '%s': expected a duration like 10us or 1ms\n",
                        prog, optarg);
                return 2;
            }
            setenv(ftr_env_name(FTR_ENV_THRESHOLD), optarg, 1);
            break;
        }
        case OPT_LOSSLESS:
            setenv(ftr_env_name(FTR_ENV_LOSSLESS), "1", 1);
            break;
        case OPT_NO_RECORDER:
            setenv(ftr_env_name(FTR_ENV_RECORDER), "0", 1);
            break;
        case OPT_CLOCK:
            if (strcmp(optarg, "tsc") && strcmp(optarg, "mono") && strcmp(optarg, "auto")) {
                fprintf(stderr, "ftrace-run: --clock %s: want tsc, mono or auto\n", optarg);
                return 2;
            }
            setenv(ftr_env_name(FTR_ENV_CLOCK), optarg, 1);
            break;
        case OPT_EXIT:
            if (strcmp(optarg, "through") && strcmp(optarg, "hook")) {
                fprintf(stderr, "ftrace-run: --exit %s: want through or hook\n", optarg);
                return 2;
            }
            setenv(ftr_env_name(FTR_ENV_EXIT), optarg, 1);
            break;
        case OPT_NO_LIBCALL:
            setenv(ftr_env_name(FTR_ENV_LIBCALL), "0", 1);
            break;
        case OPT_AUTO_ARGS:
            setenv(ftr_env_name(FTR_ENV_AUTO_ARGS), "1", 1);
            break;
        case OPT_DISABLED:
            setenv(ftr_env_name(FTR_ENV_DISABLED), "1", 1);
            break;
        case 'q':
            quiet = 1;
            break;
        case 'h':
            usage(stdout);
            return 0;
        default:
            if (optopt)
                fprintf(stderr, "%s: option '-%c' %s (see --help)\n", prog, optopt,
                        strchr("oFAR", optopt) ? "needs an argument" : "is unknown");
            else
                fprintf(stderr, "%s: unknown option '%s' (see --help)\n", prog, argv[optind - 1]);
            return 2;
        }
    }
    if (optind >= argc) {
        fprintf(stderr, "%s: no program given (see --help)\n", prog);
        return 2;
    }

    char path[PATH_MAX];
    if (resolve(argv[optind], path, sizeof path) < 0)
        return die(127, "%s: %s", argv[optind], strerror(errno));
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode))
        return die(126, "%s: %s", argv[optind], "is a directory");
    struct prog_elf pe;
    read_elf(path, &pe);
    const char *old = getenv("LD_PRELOAD");
    int untraced = 0;
    if (pe.dynamic == 0) {
        fprintf(stderr,
                "%s: %s is statically linked: LD_PRELOAD cannot apply; running it "
                "untraced\n",
                prog, argv[optind]);
        untraced = 1;
    } else if (stat(path, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)) && geteuid() != 0) {
        fprintf(stderr,
                "%s: %s is set-user/group-ID: the loader ignores LD_PRELOAD; running it "
                "untraced\n",
                prog, argv[optind]);
        untraced = 1;
    } else if (pe.runtime == RT_TSAN || preloads(old, RT_TSAN)) {
        fprintf(stderr,
                "%s: %s runs with ThreadSanitizer, which would report the tracer's own threads "
                "as data races; running it untraced\n",
                prog, argv[optind]);
        untraced = 1;
    }

    if (!untraced) {
        char lib[PATH_MAX];
        if (find_preload(lib, sizeof lib) < 0)
            return die(1, "cannot find %s (looked next to ftrace-run and in %s)", FTR_PRELOAD_NAME,
                       FTR_LIBDIR);
        /* the output must be writable now, and named absolutely: the program may chdir */
        int fd = open(output, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        if (fd < 0) return die(1, "cannot write %s: %s", output, strerror(errno));
        close(fd);
        char abs_out[PATH_MAX], dir[PATH_MAX], base[PATH_MAX];
        snprintf(dir, sizeof dir, "%s", output);
        snprintf(base, sizeof base, "%s", output);
        char *rdir = realpath(dirname(dir), NULL);
        if (!rdir) return die(1, "cannot write %s: %s", output, strerror(errno));
        snprintf(abs_out, sizeof abs_out, "%s/%s", rdir, basename(base));
        free(rdir);

        char *preload = preload_list(lib, old, &pe);
        if (!preload) return die(1, "%s%s", "out of memory", "");
        setenv("LD_PRELOAD", preload, 1);
        setenv(ftr_env_name(FTR_ENV_OUTPUT), abs_out, 1);
        if (quiet) setenv(ftr_env_name(FTR_ENV_QUIET), "1", 1);
        free(preload);
    }
    execv(path, argv + optind);
    return die(126, "%s: %s", argv[optind], strerror(errno));
}
