/*
 * test_dwarf_args.c - which functions take all their arguments in registers, from DWARF
 * (patcher/dwarf_args.c).
 *
 * Small C and C++ sources are compiled at run time with gcc / g++ and clang / clang++ (a
 * compiler that is missing is skipped), at -O0 and -O2, with DWARF 5 and 4, and every function's
 * verdict is checked by its symbol's address; ms_abi functions (gcc marks nothing of their
 * convention: their parameters' locations tell) at -O0 to -O2, DWARF 3 to 5. Then copies of
 * files with corrupted or truncated DWARF sections (location lists included) are read: the
 * reader may leave anything out but must not crash.
 */
#define _GNU_SOURCE
#include "test_dwarf_fixture.h"

#include "ftr_patcher.h"

/* ---- the code under test, compiled at run time ---- */

static const char c_source[] = KEEP
    "struct S8 { int a, b; };\n"
    "struct S16 { long a; double b; };\n"
    "struct S24 { long a, b, c; };\n"
    "struct P { char c; int x; } __attribute__((packed));\n"
    "struct L { long double x; };\n"
    "enum E { E1, E2 };\n"
    "typedef const volatile long cvl;\n"
    "K long f0(void) { return 1; }\n"
    "K long i6(int a, int b, int c, int d, int e, int f) { return a + b + c + d + e + f; }\n"
    "K long i7(int a, int b, int c, int d, int e, int f, int g)\n"
    "{ return a + b + c + d + e + f + g; }\n"
    "K double d8(double a, double b, double c, double d, double e, double f, double g,\n"
    "            double h) { return a + b + c + d + e + f + g + h; }\n"
    "K double d9(double a, double b, double c, double d, double e, double f, double g,\n"
    "            double h, double i) { return a + b + c + d + e + f + g + h + i; }\n"
    "K double i6d8(int a, int b, int c, int d, int e, int f, double g, double h, double i,\n"
    "              double j, double k, double l, double m, double n)\n"
    "{ return a + b + c + d + e + f + g + h + i + j + k + l + m + n; }\n"
    "K long s8(struct S8 s) { return s.a + s.b; }\n"
    "K long s16(struct S16 s) { return s.a + (long)s.b; }\n"
    "K long s16x2i2(struct S16 s, struct S16 t, int a, int b)\n"
    "{ return s.a + t.a + (long)(s.b + t.b) + a + b; }\n"
    "K long s16x4(struct S16 s, struct S16 t, struct S16 u, struct S16 v)\n"
    "{ return s.a + t.a + u.a + v.a; }\n"
    "K long s24(struct S24 s) { return s.a + s.b + s.c; }\n"
    "K long var(int n, ...) { return n; }\n"
    "K long ld(long double x) { return (long)x; }\n"
    "K struct S24 r24i5(long a, long b, long c, long d, long e)\n"
    "{ struct S24 r = {a + b, c + d, e}; return r; }\n"
    "K struct S24 r24i6(long a, long b, long c, long d, long e, long f)\n"
    "{ struct S24 r = {a + b, c + d, e + f}; return r; }\n"
    "K long double rld(void) { return 1.5L; }\n"
    "K long knr(a, b) int a, b; { return a + b; }\n"
    "K long packed(struct P p) { return p.c + p.x; }\n"
    "K long ldstruct(struct L l) { return (long)l.x; }\n"
    "K long ptrs(const char *a, void *b, enum E e, char g, unsigned long h, cvl i)\n"
    "{ return (long)a + (long)b + e + g + (long)h + i; }\n"
    "K long i128x3i(__int128 a, __int128 b, __int128 c, int d) { return (long)(a + b + c) + d; }\n"
    "K double cd4(_Complex double a, _Complex double b, _Complex double c, _Complex double d)\n"
    "{ return __real__ (a + b + c + d); }\n"
    "K double cd4d(_Complex double a, _Complex double b, _Complex double c,\n"
    "              _Complex double d, double e) { return __real__ (a + b + c + d) + e; }\n"
    "K long fnptr(long (*f)(int), int x) { return f(x); }\n"
    "static K long st(int a) { return a * 3; }\n"
    "long (*volatile stp)(int) = st;\n"
    "/* inlined into its caller and kept out of line: an abstract origin */\n"
    "static long sio6(long a, long b, long c, long d, long e, long f)\n"
    "{ return a * b + c * d + e * f; }\n"
    "long (*volatile sio6p)(long, long, long, long, long, long) = sio6;\n"
    "long callsio6(long x) { return sio6(x, x, x, x, x, x); }\n"
    "static long sio7(long a, long b, long c, long d, long e, long f, long g)\n"
    "{ return a * b + c * d + e * f + g; }\n"
    "long (*volatile sio7p)(long, long, long, long, long, long, long) = sio7;\n"
    "long callsio7(long x) { return sio7(x, x, x, x, x, x, x); }\n";

/* std::string by value (invisibly by reference: a class of 32 bytes) or by reference; apart:
 * <string> takes most of a compile's time */
static const char string_source[] =
    "#include <string>\n" KEEP "extern \"C\" K long str(std::string s) { return (long)s.size(); }\n"
    "extern \"C\" K long sref(const std::string &s) { return (long)s.size(); }\n";

static const char cxx_source[] = KEEP
    "struct T16 { long a, b; };\n"
    "struct Kl {\n"
    "    long v;\n"
    "    K long m5(long a, long b, long c, long d, long e);\n"
    "    K long m6(long a, long b, long c, long d, long e, long f);\n"
    "    K long in5(long a, long b, long c, long d, long e) { return v + a + b + c + d + e; }\n"
    "    K static long st6(long a, long b, long c, long d, long e, long f)\n"
    "    { return a + b + c + d + e + f; }\n"
    "    K virtual long vm5(long a, long b, long c, long d, long e)\n"
    "    { return v + a + b + c + d + e; }\n"
    "};\n"
    "long Kl::m5(long a, long b, long c, long d, long e) { return v + a + b + c + d + e; }\n"
    "long Kl::m6(long a, long b, long c, long d, long e, long f)\n"
    "{ return v + a + b + c + d + e + f; }\n"
    "extern \"C\" K long t16x3(T16 a, T16 b, T16 c) { return a.a + b.b + c.a; }\n"
    "extern \"C\" K long mptr(long (Kl::*p)(long, long, long, long, long), Kl *k)\n"
    "{ return (k->*p)(1, 2, 3, 4, 5); }\n"
    "extern \"C\" K long nul(decltype(nullptr) p, int a) { return a; }\n"
    "template <class... T> K long pk(T... t) { return (0 + ... + t); }\n"
    "template long pk<long, long, long, long, long, long>(long, long, long, long, long, long);\n"
    "template long pk<long, long, long, long, long, long, long>(long, long, long, long, long,\n"
    "                                                           long, long);\n"
    "namespace { K long anon(long a) { return a + 1; } }\n"
    "long (*volatile anonp)(long) = anon;\n";

/* Expected verdicts: Y listed, N not; G listed from gcc only (internal functions are not
 * listed from other compilers: LLVM's argument promotion). */
enum { N, Y, G };
struct expect {
    const char *name;
    int verdict;
};

static const struct expect c_expect[] = {
    {"f0", Y},       {"i6", Y},    {"i7", N},      {"d8", Y},       {"d9", N},       {"i6d8", Y},
    {"s8", Y},       {"s16", Y},   {"s16x2i2", Y}, {"s16x4", N},    {"s24", N},      {"var", N},
    {"ld", N},       {"r24i5", Y}, {"r24i6", N},   {"rld", Y},      {"knr", N},      {"packed", N},
    {"ldstruct", N}, {"ptrs", Y},  {"i128x3i", N}, {"cd4", Y},      {"cd4d", N},     {"fnptr", Y},
    {"st", G},       {"sio6", G},  {"sio7", N},    {"callsio6", Y}, {"callsio7", Y},
};

static const struct expect cxx_expect[] = {
    {"_ZN2Kl2m5Elllll", Y},
    {"_ZN2Kl2m6Ellllll", N},
    {"_ZN2Kl3in5Elllll", Y},
    {"_ZN2Kl3st6Ellllll", Y},
    {"_ZN2Kl3vm5Elllll", Y},
    {"t16x3", Y},
    {"mptr", Y},
    {"nul", N},
    {"_Z2pkIJllllllEElDpT_", Y},
    {"_Z2pkIJlllllllEElDpT_", N},
    {"_ZN12_GLOBAL__N_14anonEl", G},
};

static const struct expect string_expect[] = {{"str", N}, {"sref", Y}};

/* __attribute__((ms_abi)): the callee owns 32 bytes of home space above its return address
 * (gcc -O0 spills its register arguments there) and takes its fifth argument above that, none
 * of which call-through leaves where it expects. clang says so (DW_AT_calling_convention);
 * gcc does not: the parameters' locations at the entry tell (rcx, rdx, r8, r9 by position, or
 * the caller's side of the CFA), against their System V twins, which stay listed. */
static const char ms_source[] =
    KEEP "struct S24 { long a, b, c; };\n"
         "#define MS __attribute__((ms_abi))\n"
         "K MS long m1(long a) { return a * 3; }\n"
         "K MS long m2(long a, long b) { return a * 3 + b; }\n"
         "K MS long m4(long a, long b, long c, long d) { return a * 3 + b + c * d; }\n"
         "K MS long m5(long a, long b, long c, long d, long e) { return a + b + c + d + e; }\n"
         "K MS double md(double x, long a) { return x * a; }\n"
         "K MS double mdi(double x, double y, int a) { return x * y + a; }\n"
         "K MS long mp(const char *p, int n) { return p[n]; }\n"
         "K MS struct S24 mr(long a) { struct S24 r = {a, a * 2, a * 3}; return r; }\n"
         "K MS long mu(long unused, long b) { return b * 7; }\n"
         "K MS long mm(long a) { a = a * a + 1; return a ^ (a >> 3); }\n"
         "K long s1(long a) { return a * 3; }\n"
         "K long s2(long a, long b) { return a * 3 + b; }\n"
         "K long s4(long a, long b, long c, long d) { return a * 3 + b + c * d; }\n"
         "K double sd(double x, long a) { return x * a; }\n"
         "K double sdi(double x, double y, int a) { return x * y + a; }\n"
         "K long sp(const char *p, int n) { return p[n]; }\n"
         "K struct S24 sr(long a) { struct S24 r = {a, a * 2, a * 3}; return r; }\n"
         "K long su(long a, long b) { return b * 7 + (a & 1); }\n"
         "K long sm(long a) { a = a * a + 1; return a ^ (a >> 3); }\n"
         "K double sdd(double x, double y) { return x * y; }\n";

static const struct expect ms_expect[] = {
    {"m1", N},  {"m2", N}, {"m4", N}, {"m5", N}, {"md", N}, {"mdi", N}, {"mp", N},
    {"mr", N},  {"mu", N}, {"mm", N}, {"s1", Y}, {"s2", Y}, {"s4", Y},  {"sd", Y},
    {"sdi", Y}, {"sp", Y}, {"sr", Y}, {"su", Y}, {"sm", Y}, {"sdd", Y},
};

/* ---- helpers ---- */

static int listed(const uint64_t *v, long n, uint64_t a)
{
    for (long i = 0; i < n; i++)
        if (v[i] == a) return 1;
    return 0;
}

/* Runs ftr_dwarf_regargs() on elf and checks the result's shape. */
static long regargs_of(Elf *elf, uint64_t **v)
{
    char err[128] = "";
    long n = ftr_dwarf_regargs(elf, v, err, sizeof err);
    cr_assert(n >= 0, "ftr_dwarf_regargs: %s", err);
    for (long i = 1; i < n; i++)
        cr_assert((*v)[i - 1] < (*v)[i], "sorted, unique");
    return n;
}

static void check_file(const char *path, const struct expect *e, size_t ne, int gnu,
                       const char *what)
{
    int fd = open(path, O_RDONLY);
    cr_assert(fd >= 0, "%s: not built", path);
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    cr_assert(elf);
    uint64_t *v;
    long n = regargs_of(elf, &v);
    for (size_t i = 0; i < ne; i++) {
        uint64_t a = symbol(elf, e[i].name);
        cr_expect(a, "%s: no symbol %s", what, e[i].name);
        int want = e[i].verdict == G ? gnu : e[i].verdict == Y;
        cr_expect(listed(v, n, a) == want, "%s: %s should %sbe listed", what, e[i].name,
                  want ? "" : "not ");
    }
    free(v);
    elf_end(elf);
    close(fd);
}

struct config {
    const char *cc, *cxx, *opt, *dbg;
    int c_only;  /* build a.c alone */
    int strings; /* build the std::string source too */
};

static void build(const struct config *k, int n)
{
    /* all at once, two at a time: the C++ ones take most of the time */
    char path[128], jobs[4096];
    size_t len = 0;
    for (int i = 0; i < n && len < sizeof jobs; i++) {
        len += (size_t)snprintf(jobs + len, sizeof jobs - len,
                                "'%s %s %s -w -shared -fPIC a.c -o c%d.so'\n", k[i].cc, k[i].opt,
                                k[i].dbg, i);
        if (!k[i].c_only && len < sizeof jobs)
            len += (size_t)snprintf(jobs + len, sizeof jobs - len,
                                    "'%s -std=c++17 %s %s -w -shared -fPIC b.cc -o x%d.so'\n",
                                    k[i].cxx, k[i].opt, k[i].dbg, i);
        if (k[i].strings && len < sizeof jobs)
            len += (size_t)snprintf(jobs + len, sizeof jobs - len,
                                    "'%s -std=c++17 %s %s -w -shared -fPIC s.cc -o s%d.so'\n",
                                    k[i].cxx, k[i].opt, k[i].dbg, i);
    }
    cr_assert(len < sizeof jobs);
    snprintf(path, sizeof path, "%s/a.c", tmpdir);
    write_file(path, c_source);
    snprintf(path, sizeof path, "%s/b.cc", tmpdir);
    write_file(path, cxx_source);
    snprintf(path, sizeof path, "%s/s.cc", tmpdir);
    write_file(path, string_source);
    run_jobs(jobs);
}

/* ---- verdicts ---- */

Test(dwarf_args, verdicts, .init = make_tmpdir, .fini = remove_tmpdir)
{
    elf_version(EV_CURRENT);
    struct config all[8], k[8];
    int n = 0, m = 0;
    const char *opts[] = {"-O0", "-O2"}, *dbgs[] = {"-g", "-gdwarf-4"};
    for (int c = 0; c < 2; c++)
        for (int o = 0; o < 2; o++)
            for (int d = 0; d < 2; d++)
                all[m++] =
                    (struct config){c ? "clang" : "gcc", c ? "clang++" : "g++", opts[o], dbgs[d], 0,
                                    o == 1 && d == 0};
    for (int i = 0; i < m; i++)
        if (have(all[i].cc) && have(all[i].cxx)) k[n++] = all[i];
    if (!n) cr_skip_test("no compiler");
    build(k, n);
    for (int i = 0; i < n; i++) {
        char path[128], what[96];
        int gnu = !strcmp(k[i].cc, "gcc");
        snprintf(what, sizeof what, "%s %s %s", k[i].cc, k[i].opt, k[i].dbg);
        snprintf(path, sizeof path, "%s/c%d.so", tmpdir, i);
        check_file(path, c_expect, sizeof c_expect / sizeof *c_expect, gnu, what);
        snprintf(what, sizeof what, "%s %s %s", k[i].cxx, k[i].opt, k[i].dbg);
        snprintf(path, sizeof path, "%s/x%d.so", tmpdir, i);
        check_file(path, cxx_expect, sizeof cxx_expect / sizeof *cxx_expect, gnu, what);
        snprintf(path, sizeof path, "%s/s%d.so", tmpdir, i);
        if (k[i].strings) check_file(path, string_expect, 2, gnu, what);
    }
}

/* Type units (.debug_types, DW_UT_type) are not read: a type in one is unknown. Compressed
 * sections are decompressed (SHF_COMPRESSED, .zdebug); DWARF 2 and 3 (members located by
 * expressions) are read; split DWARF's skeletons and no DWARF list nothing. */
Test(dwarf_args, variants, .init = make_tmpdir, .fini = remove_tmpdir)
{
    elf_version(EV_CURRENT);
    if (!have("gcc") || !have("g++")) cr_skip_test("no gcc");
    struct config k[] = {{"gcc", "g++", "-O2", "-gdwarf-4 -fdebug-types-section", 0, 0},
                         {"gcc", "g++", "-O2", "-gdwarf-5 -fdebug-types-section -gz", 0, 0},
                         {"gcc", "g++", "-O2", "-g -gz=zlib-gnu", 1, 0},
                         {"gcc", "g++", "-O0", "-gdwarf-2", 1, 0},
                         {"gcc", "g++", "-O2", "-gdwarf-3", 1, 0},
                         {"gcc", "g++", "-O2", "-g -gsplit-dwarf", 1, 0},
                         {"gcc", "g++", "-O2", "-g0", 1, 0},
                         {"gcc", "g++", "-O2", "-g1", 0, 0}};
    build(k, 8);
    /* the aggregates and enums are in type units; the pointers to them are not */
    const struct expect tu[] = {{"t16x3", N}, {"mptr", Y}, {"_ZN2Kl2m5Elllll", Y}},
                        tu_c[] = {{"i6", Y}, {"i7", N}, {"s16", N}, {"ptrs", N}, {"fnptr", Y}};
    for (int i = 0; i < 8; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/x%d.so", tmpdir, i);
        if (i < 2) check_file(path, tu, 3, 1, k[i].dbg);
        snprintf(path, sizeof path, "%s/c%d.so", tmpdir, i);
        if (i < 2) check_file(path, tu_c, 5, 1, k[i].dbg);
        if (i >= 2 && i < 5)
            check_file(path, c_expect, sizeof c_expect / sizeof *c_expect, 1, k[i].dbg);
        if (i < 5) continue;
        /* split DWARF, none, -g1 (no parameters described, C++ included): nothing listed */
        for (int cxx = 0; cxx < (i == 7 ? 2 : 1); cxx++) {
            snprintf(path, sizeof path, "%s/%c%d.so", tmpdir, cxx ? 'x' : 'c', i);
            int fd = open(path, O_RDONLY);
            Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
            uint64_t *v;
            cr_expect(regargs_of(elf, &v) == 0, "%s %s: nothing listed", k[i].dbg, path);
            cr_expect(v == NULL);
            elf_end(elf);
            close(fd);
        }
    }
}

/* ms_abi functions, from gcc at every optimisation level (and instrumented as the tracer's
 * builds are), DWARF 3 to 5, and from clang: none listed. */
Test(dwarf_args, ms_abi, .init = make_tmpdir, .fini = remove_tmpdir)
{
    elf_version(EV_CURRENT);
    static const char *const flags[] = {
        /* gcc */
        "-O0 -g", "-O0 -gdwarf-4", "-O1 -g", "-O1 -gdwarf-4", "-O2 -g", "-O2 -gdwarf-4", "-Os -g",
        "-O0 -gdwarf-3", "-O2 -gdwarf-3", "-O2 -g -pg -mfentry", "-O2 -gdwarf-4 -pg -mfentry",
        "-O0 -g -fpatchable-function-entry=5", "-O2 -g -fpatchable-function-entry=5",
        /* clang */
        "-O0 -g", "-O0 -gdwarf-4", "-O2 -g", "-O2 -gdwarf-4"};
    const int ngcc = 13, nall = sizeof flags / sizeof *flags;
    int gcc = have("gcc"), clang = have("clang");
    if (!gcc && !clang) cr_skip_test("no compiler");
    char path[128], jobs[4096], what[96];
    size_t len = 0;
    for (int i = 0; i < nall; i++)
        if (i < ngcc ? gcc : clang)
            len += (size_t)snprintf(jobs + len, sizeof jobs - len,
                                    "'%s %s -w -shared -fPIC m.c -o m%d.so'\n",
                                    i < ngcc ? "gcc" : "clang", flags[i], i);
    cr_assert(len < sizeof jobs);
    snprintf(path, sizeof path, "%s/m.c", tmpdir);
    write_file(path, ms_source);
    run_jobs(jobs);
    for (int i = 0; i < nall; i++) {
        if (!(i < ngcc ? gcc : clang)) continue;
        snprintf(what, sizeof what, "%s %s", i < ngcc ? "gcc" : "clang", flags[i]);
        snprintf(path, sizeof path, "%s/m%d.so", tmpdir, i);
        check_file(path, ms_expect, sizeof ms_expect / sizeof *ms_expect, i < ngcc, what);
    }
}

Test(dwarf_args, names)
{
    cr_expect(ftr_dwarf_name_ok("foo"));
    cr_expect(ftr_dwarf_name_ok("_ZN2Kl2m5Elllll"));
    cr_expect(ftr_dwarf_name_ok("fopen@@GLIBC_2.2.5"));
    cr_expect(!ftr_dwarf_name_ok("foo.isra.0"));
    cr_expect(!ftr_dwarf_name_ok("foo.constprop.0"));
    cr_expect(!ftr_dwarf_name_ok("foo.part.0"));
    cr_expect(!ftr_dwarf_name_ok("foo.cold"));
    cr_expect(!ftr_dwarf_name_ok("foo.lto_priv.0@VER_1"));
    cr_expect(!ftr_dwarf_name_ok("_ZGVbN2v_foo"));
    cr_expect(!ftr_dwarf_name_ok("_ZThn16_N1C1gEv")); /* C++ thunks */
    cr_expect(!ftr_dwarf_name_ok("_ZTv0_n24_N1C1fEv"));
    cr_expect(!ftr_dwarf_name_ok("_ZTch0_h16_N1D5cloneEv"));
    cr_expect(ftr_dwarf_regargs(NULL, &(uint64_t *){0}, NULL, 0) == 0);
}

/* ---- robustness: corrupted and truncated DWARF ---- */

/* Reads a corrupted copy: whatever it says, it must return, sorted and unique. */
static void read_copy(uint8_t *img, size_t size)
{
    Elf *elf = elf_memory((char *)img, size);
    cr_assert(elf);
    uint64_t *v;
    regargs_of(elf, &v);
    free(v);
    elf_end(elf);
}

Test(dwarf_args, corrupted, .init = make_tmpdir, .fini = remove_tmpdir)
{
    elf_version(EV_CURRENT);
    struct config k[3];
    int n = 0;
    if (have("g++")) k[n++] = (struct config){"gcc", "g++", "-O2", "-g", 0, 0};
    if (have("g++")) k[n++] = (struct config){"gcc", "g++", "-O2", "-gdwarf-4", 1, 0};
    if (have("clang++")) k[n++] = (struct config){"clang", "clang++", "-O2", "-gdwarf-5", 0, 0};
    if (!n) cr_skip_test("no compiler");
    build(k, n);
    for (int i = 0; i < n; i++) {
        char path[128];
        snprintf(path, sizeof path, "%s/c%d.so", tmpdir, i);
        corrupt(path, read_copy);
        snprintf(path, sizeof path, "%s/x%d.so", tmpdir, i);
        if (!k[i].c_only) corrupt(path, read_copy);
    }
}
