/*
 * test_dwarf_params.c - what each function's parameters and return value are and where they
 * are at its entry, from DWARF (patcher/dwarf_params.c, dwarf_abi.c).
 *
 * Small C and C++ sources are compiled at run time with gcc / g++ and clang / clang++ (a
 * compiler that is missing is skipped), at -O0 and -O2, with DWARF 5 and 4, and every
 * function's descriptor, found by its symbol's address, is rendered as a line and compared
 * with the System V places worked out by hand. Enumerations are checked value by value. Then
 * copies with truncated or corrupted DWARF are read: anything may be left out, but what is
 * given must be well-formed, and nothing may crash.
 */
#define _GNU_SOURCE
#include "test_dwarf_fixture.h"

#include "ftr_patcher.h"

/* ---- the code under test, compiled at run time ---- */

/* U(x) keeps x alive (and described) in every function, at every optimisation level */
#define USE "#define U(x) __asm__ volatile(\"\" : : \"m\"(x))\n"

static const char c_source[] = KEEP USE
    "struct S8 { int a, b; };\n"
    "struct DL { double d; long l; };\n"
    "struct DD { double a, b; };\n"
    "struct LL { long a, b; };\n"
    "struct S24 { long a, b, c; };\n"
    "struct F3 { float a, b, c; };\n"
    "struct CF { char c[3]; float f; };\n"
    "struct P { char c; int x; } __attribute__((packed));\n"
    "struct BF { unsigned a : 3, b : 5; float f; };\n"
    "struct DB { double d; unsigned a : 3; };\n"
    "union UIF { int i; float f; };\n"
    "enum E { EA = -1, EB = 5, EC = 200 };\n"
    "enum F { FA = 0xfffffff0u, FB = 1 };\n"
    "typedef const volatile long cvl;\n"
    "typedef struct S8 s8_t;\n"
    "typedef const char *cstr;\n"
    "K long widths(signed char a, unsigned char b, short c, unsigned short d, int e,\n"
    "              unsigned f) { U(a); U(b); U(c); U(d); U(e); U(f); return 0; }\n"
    "K unsigned long long wide(long long a, unsigned long long b, long c, unsigned long d,\n"
    "                          _Bool e, char f) { U(a); U(b); U(c); U(d); U(e); U(f); return 0; }\n"
    "K long enums(enum E e, enum F f) { U(e); U(f); return 0; }\n"
    "K long ptrs(void *a, const char *b, char *c, unsigned char *d, int *e, const char **f)\n"
    "{ U(a); U(b); U(c); U(d); U(e); U(f); return 0; }\n"
    "K double mix(int a, double b, float c, long d, double e)\n"
    "{ U(a); U(b); U(c); U(d); U(e); return 0; }\n"
    "K long i8(long a, long b, long c, long d, long e, long f, long g, long h)\n"
    "{ U(a); U(b); U(c); U(d); U(e); U(f); U(g); U(h); return 0; }\n"
    "K double d10(double a, double b, double c, double d, double e, double f, double g,\n"
    "             double h, double i, double j)\n"
    "{ U(a); U(b); U(c); U(d); U(e); U(f); U(g); U(h); U(i); U(j); return 0; }\n"
    "K double dimix(double a, double b, double c, double d, double e, double f, double g,\n"
    "               double h, double i, int j, int k, int l, int m, int n, int o, int p)\n"
    "{ U(a); U(b); U(c); U(d); U(e); U(f); U(g); U(h); U(i); U(j); U(k); U(l); U(m); U(n);\n"
    "  U(o); U(p); return 0; }\n"
    "K long s16(struct S8 s, struct DL t, struct DD u, struct LL v)\n"
    "{ U(s); U(t); U(u); U(v); return 0; }\n"
    "K long s24(struct S24 s, long a) { U(s); U(a); return 0; }\n"
    "K long agg(struct F3 a, struct CF b, union UIF c, struct BF d, struct DB e)\n"
    "{ U(a); U(b); U(c); U(d); U(e); return 0; }\n"
    "K long packed(struct P p, int a) { U(p); U(a); return 0; }\n"
    "K long short_int(long a, long b, long c, long d, long e, struct LL s, long g)\n"
    "{ U(a); U(b); U(c); U(d); U(e); U(s); U(g); return 0; }\n"
    "K long short_sse(double a, double b, double c, double d, double e, double f, double g,\n"
    "                 struct DD s, double h)\n"
    "{ U(a); U(b); U(c); U(d); U(e); U(f); U(g); U(s); U(h); return 0; }\n"
    "K long after6(int a, int b, int c, int d, int e, int f, struct S8 s)\n"
    "{ U(a); U(b); U(c); U(d); U(e); U(f); U(s); return 0; }\n"
    "K struct S24 r24(long a, long b) { struct S24 r = {a, b, 0}; return r; }\n"
    "K struct DL rdl(void) { struct DL r = {1, 2}; return r; }\n"
    "K struct LL rll(void) { struct LL r = {1, 2}; return r; }\n"
    "K struct DD rdd(void) { struct DD r = {1, 2}; return r; }\n"
    "K struct S8 rs8(void) { struct S8 r = {1, 2}; return r; }\n"
    "K float rf(void) { return 1; }\n"
    "K _Bool rb(void) { return 1; }\n"
    "K char rc(void) { return 1; }\n"
    "K const char *rs(void) { return \"\"; }\n"
    "K enum E re(void) { return EB; }\n"
    "K void rv(int a) { U(a); }\n"
    "K __int128 i128(__int128 a, long b) { U(a); U(b); return 0; }\n"
    "K long i128s(long a, long b, long c, long d, long e, __int128 x, long y)\n"
    "{ U(a); U(b); U(c); U(d); U(e); U(x); U(y); return 0; }\n"
    "K long i128a(long a, long b, long c, long d, long e, long f, long g, __int128 h)\n"
    "{ U(a); U(b); U(c); U(d); U(e); U(f); U(g); U(h); return 0; }\n"
    "K long ld(long double x, int a) { U(x); U(a); return 0; }\n"
    "K long double rld(void) { return 1.5L; }\n"
    "K _Complex double cd(_Complex double a, _Complex float b) { U(a); U(b); return 0; }\n"
    "K long var(int n, const char *fmt, ...) { U(n); U(fmt); return 0; }\n"
    "K long knr(a, f) int a; float f; { U(a); U(f); return 0; }\n"
    "K long td(cvl a, const s8_t b, cstr c, const double d) { U(a); U(b); U(c); U(d); return 0; "
    "}\n"
    "K long unused(long a, long b, long c) { U(a); U(c); return 0; }\n"
    "static K long st(long a) { U(a); return 0; }\n"
    "long (*volatile stp)(long) = st;\n"
    "/* inlined into its caller and kept out of line: an abstract origin */\n"
    "static long sio(long a, long b) { return a * b + (a ^ b); }\n"
    "long (*volatile siop)(long, long) = sio;\n"
    "long callsio(long x) { return sio(x, x + 1); }\n"
    "#define I(n) int a##n, int b##n, int c##n\n"
    "#define J(n) U(a##n); U(b##n); U(c##n);\n"
    "K long many(I(0), I(1), I(2), I(3), I(4), I(5)) { J(0) J(1) J(2) J(3) J(4) J(5) return 0; }\n";

static const char cxx_source[] = KEEP USE
    "struct Big { long a, b, c; };\n"
    "struct Kl {\n"
    "    long v;\n"
    "    K long m(int a, double b);\n"
    "    K Big mb(long x) const;\n"
    "    K static long st(long a);\n"
    "};\n"
    "long Kl::m(int a, double b) { U(a); U(b); return v; }\n"
    "Big Kl::mb(long x) const { Big r = {v, x, 0}; return r; }\n"
    "long Kl::st(long a) { U(a); return 0; }\n"
    "struct D { long a; ~D() {} };\n"
    "struct Dflt { long a; ~Dflt() = default; };\n"
    "struct V { long a; virtual long f(); };\n"
    "long V::f() { return a; }\n"
    "struct Inner { long a; ~Inner() {} };\n"
    "struct Outer { Inner i; long b; };\n"
    "struct Del { long a; Del() = default; Del(const Del &) = delete; Del(Del &&) = default; };\n"
    "struct Cp { long a; Cp(); Cp(const Cp &o); };\n"
    "Cp::Cp() : a(0) {}\n"
    "Cp::Cp(const Cp &o) : a(o.a) {}\n"
    "struct Tv { long a; Tv(); };\n"
    "Tv::Tv() : a(1) {}\n"
    "struct Hm { long a; Hm() : a(1) {} };\n"
    "enum class U8 : unsigned char { X = 200, Y = 1 };\n"
    "extern \"C\" {\n"
    "K long fd(D d, long x) { U(d); U(x); return 0; }\n"
    "K long fdflt(Dflt d, long x) { U(d); U(x); return 0; }\n"
    "K long fv(V v, long x) { U(v); U(x); return 0; }\n"
    "K long fo(Outer o, long x) { U(o); U(x); return 0; }\n"
    "K long fdel(Del d, long x) { U(d); U(x); return 0; }\n"
    "K long fcp(Cp c, long x) { U(c); U(x); return 0; }\n"
    "K long ftv(Tv t, long x) { U(t); U(x); return 0; }\n"
    "K long fhm(Hm h, long x) { U(h); U(x); return 0; }\n"
    "K long fref(long &r, const long &c, long &&m) { U(r); U(c); U(m); return 0; }\n"
    "K long fnul(decltype(nullptr) p, int a) { U(p); U(a); return 0; }\n"
    "K long fpm(long (Kl::*p)(int, double), long Kl::*q, Kl *k) { U(p); U(q); U(k); return 0; }\n"
    "K long fe(U8 u) { U(u); return 0; }\n"
    "K Outer ro(long x) { Outer r; r.b = x; return r; }\n"
    "}\n";

/* The expected line of a function (see render()); clang: another line from clang, when they
 * differ, clang2: from clang -O2 */
struct expect {
    const char *sym, *line, *clang, *clang2;
};

static const struct expect c_expect[] = {
    {"widths", "i8@ax | a:c1@di b:c1@si c:i2@dx d:u2@cx e:i4@r8 f:u4@r9"},
    {"wide", "u8@ax | a:i8@di b:u8@si c:i8@dx d:u8@cx e:b1@r8 f:c1@r9"},
    {"enums", "i8@ax | e:e4@di f:e4@si"},
    {"ptrs", "i8@ax | a:p8@di b:s8@si c:s8@dx d:s8@cx e:p8@r8 f:p8@r9"},
    /* the classes count their registers apart */
    {"mix", "f8@x0 | a:i4@di b:f8@x0 c:f4@x1 d:i8@si e:f8@x2"},
    {"i8", "i8@ax | a:i8@di b:i8@si c:i8@dx d:i8@cx e:i8@r8 f:i8@r9 g:i8@+8 h:i8@+16"},
    {"d10", "f8@x0 | a:f8@x0 b:f8@x1 c:f8@x2 d:f8@x3 e:f8@x4 f:f8@x5 g:f8@x6 h:f8@x7 i:f8@+8 "
            "j:f8@+16"},
    {"dimix", "f8@x0 | a:f8@x0 b:f8@x1 c:f8@x2 d:f8@x3 e:f8@x4 f:f8@x5 g:f8@x6 h:f8@x7 i:f8@+8 "
              "j:i4@di k:i4@si l:i4@dx m:i4@cx n:i4@r8 o:i4@r9 p:i4@+16"},
    /* {int,int}: INTEGER; {double,long}: SSE, INTEGER; {double,double}: SSE, SSE */
    {"s16", "i8@ax | s:S8@di[di:8] t:S16@x0[x0:8,si:8] u:S16@x1[x1:8,x2:8] "
            "v:S16@dx[dx:8,cx:8]"},
    {"s24", "i8@ax | s:S24@+8 a:i8@di"},
    /* {float x3}: SSE, SSE (4 bytes); {char[3], float}: INTEGER wins; a union of int and
     * float: INTEGER; bit-fields: INTEGER, in the eightbyte they are in */
    {"agg", "i8@ax | a:S12@x0[x0:8,x1:4] b:S8@di[di:8] c:S4@si[si:4] d:S8@dx[dx:8] "
            "e:S16@x2[x2:8,cx:8]"},
    {"packed", "i8@ax | p:S5@+8 a:i4@di"},
    /* an aggregate that does not fit in the registers left goes to the stack whole, and the
     * registers stay for what follows */
    {"short_int", "i8@ax | a:i8@di b:i8@si c:i8@dx d:i8@cx e:i8@r8 s:S16@+8[+8:8,+16:8] "
                  "g:i8@r9"},
    {"short_sse", "i8@ax | a:f8@x0 b:f8@x1 c:f8@x2 d:f8@x3 e:f8@x4 f:f8@x5 g:f8@x6 "
                  "s:S16@+8[+8:8,+16:8] h:f8@x7"},
    {"after6", "i8@ax | a:i4@di b:i4@si c:i4@dx d:i4@cx e:i4@r8 f:i4@r9 s:S8@+8[+8:8]"},
    /* returned in memory: rdi is the hidden pointer */
    {"r24", "S24@? | a:i8@si b:i8@dx"},
    {"rdl", "S16@x0[x0:8,ax:8] |"},
    {"rll", "S16@ax[ax:8,dx:8] |"},
    {"rdd", "S16@x0[x0:8,x1:8] |"},
    {"rs8", "S8@ax[ax:8] |"},
    {"rf", "f4@x0 |"},
    {"rb", "b1@ax |"},
    {"rc", "c1@ax |"},
    {"rs", "s8@ax |"},
    {"re", "e4@ax |"},
    {"rv", "?0@? | a:i4@di"},
    {"i128", "i16@ax[ax:8,dx:8] | a:i16@di[di:8,si:8] b:i8@dx"},
    {"i128s", "i8@ax | a:i8@di b:i8@si c:i8@dx d:i8@cx e:i8@r8 x:i16@+8[+8:8,+16:8] y:i8@r9"},
    /* 16-byte aligned on the stack */
    {"i128a", "i8@ax | a:i8@di b:i8@si c:i8@dx d:i8@cx e:i8@r8 f:i8@r9 g:i8@+8 "
              "h:i16@+24[+24:8,+32:8]"},
    {"ld", "i8@ax | x:?16@+8 a:i4@di"},
    {"rld", "?16@? |"},
    {"cd", "S16@x0[x0:8,x1:8] | a:S16@x0[x0:8,x1:8] b:S8@x2[x2:8]"},
    {"var", "i8@ax | n:i4@di fmt:s8@si ..."},
    /* K&R: a float arrives as a double */
    {"knr", "i8@ax | a:i4@di f:f8@x0"},
    {"td", "i8@ax | a:i8@di b:S8@si[si:8] c:s8@dx d:f8@x0"},
    /* from clang, a parameter without a location (unused, here) may have been dropped or
     * promoted: what follows is known where its location says the register computed; nothing
     * of an internal function is */
    {"unused", "i8@ax | a:i8@di b:i8@si c:i8@dx", NULL, "i8@ax | a:i8@di b:i8@? c:i8@dx"},
    {"st", "i8@ax | a:i8@di", "i8@ax | a:i8@?"},
    {"sio", "i8@ax | a:i8@di b:i8@si", "i8@ax | a:i8@? b:i8@?"},
    /* 18 parameters: the first 16 described */
    {"many", "i8@ax | a0:i4@di b0:i4@si c0:i4@dx a1:i4@cx b1:i4@r8 c1:i4@r9 a2:i4@+8 b2:i4@+16 "
             "c2:i4@+24 a3:i4@+32 b3:i4@+40 c3:i4@+48 a4:i4@+56 b4:i4@+64 c4:i4@+72 a5:i4@+80"},
};

static const struct expect cxx_expect[] = {
    {"_ZN2Kl1mEid", "i8@ax | T this:p8@di a:i4@si b:f8@x0"},
    {"_ZNK2Kl2mbEl", "S24@? | T this:p8@si x:i8@dx"},
    {"_ZN2Kl2stEl", "i8@ax | a:i8@di"},
    /* a user-provided destructor or copy constructor, a virtual table, a member with one:
     * by invisible reference */
    {"fd", "i8@ax | d:p8@di x:i8@si"},
    {"fdflt", "i8@ax | d:S8@di[di:8] x:i8@si"},
    {"fv", "i8@ax | v:p8@di x:i8@si"},
    {"fo", "i8@ax | o:p8@di x:i8@si"},
    /* a deleted copy constructor: only clang says (by value: the move constructor is trivial) */
    {"fdel", "i8@ax | d:S8@? x:i8@?", "i8@ax | d:S8@di[di:8] x:i8@si"},
    {"fcp", "i8@ax | c:p8@di x:i8@si"},
    {"ftv", "i8@ax | t:S8@di[di:8] x:i8@si"},
    /* clang describes a class only where a constructor is emitted (-fuse-ctor-homing); a
     * declaration alone is not understood */
    {"fhm", "i8@ax | h:S8@di[di:8] x:i8@si", "i8@ax | h:S0@? x:i8@?"},
    {"fref", "i8@ax | r:p8@di c:p8@si m:p8@dx"},
    {"fnul", "i8@ax | p:p8@di a:i4@si"},
    {"fpm", "i8@ax | p:S16@di[di:8,si:8] q:i8@dx k:p8@cx"},
    {"fe", "i8@ax | u:e1@di"},
    {"ro", "S16@? | x:i8@si"},
    {"_ZN2CpC2ERKS_", "?0@? | T this:p8@di o:p8@si"},
    {"_ZN2TvC2Ev", "?0@? | T this:p8@di"},
};

/* ---- rendering ---- */

static void render_param(char *out, size_t len, const struct ftr_dw_param *p, int ret)
{
    static const char cls[] = "?iubcepsfS";
    static const char *const ireg[] = {"di", "si", "dx", "cx", "r8", "r9"};
    static const char *const rreg[] = {"ax", "dx"};
    size_t n = 0;
    for (int i = -1; i < p->nparts && n < len; i++) {
        const struct ftr_dw_part *q = &p->parts[i < 0 ? 0 : i];
        int loc = i < 0 ? p->loc : q->loc, num = i < 0 ? p->n : q->n;
        char where[16] = "?";
        if (loc == FTR_PL_INT && num < (ret ? 2 : 6))
            snprintf(where, sizeof where, "%s", ret ? rreg[num] : ireg[num]);
        if (loc == FTR_PL_SSE) snprintf(where, sizeof where, "x%d", num);
        if (loc == FTR_PL_STACK) snprintf(where, sizeof where, "+%d", num);
        if (i < 0)
            n += (size_t)snprintf(out + n, len - n, "%c%u@%s", p->cls < 10 ? cls[p->cls] : '!',
                                  p->size, where);
        else
            n += (size_t)snprintf(out + n, len - n, "%s%s:%u%s", i ? "," : "[", where, q->size,
                                  i == p->nparts - 1 ? "]" : "");
    }
}

/* "<return> | [T] name:<param> ... [...]": a class letter (? i u b c e p s f S), the size,
 * @ and where: di si dx cx r8 r9 (ax dx for a return), x0..x7, +<stack offset>, ? (not
 * known); then the parts in [], where:size each */
static void render(char *out, size_t len, const struct ftr_dw_func *f)
{
    char p[128];
    render_param(p, sizeof p, &f->ret, 1);
    size_t n = (size_t)snprintf(out, len, "%s |%s", p, f->has_this ? " T" : "");
    for (int k = 0; k < f->nparams && n < len; k++) {
        render_param(p, sizeof p, &f->params[k], 0);
        n += (size_t)snprintf(out + n, len - n, " %s:%s", f->params[k].name, p);
    }
    if (f->variadic && n < len) snprintf(out + n, len - n, " ...");
}

/* ---- checks ---- */

/* What any result must be, whatever the file said */
static void check_shape(const struct ftr_dw_params *r)
{
    for (size_t i = 0; i < r->nfuncs; i++) {
        const struct ftr_dw_func *f = &r->funcs[i];
        cr_assert(i == 0 || r->funcs[i - 1].addr < f->addr, "sorted, unique");
        cr_assert(f->name && f->nparams <= FTR_DW_MAX_PARAMS && (f->nparams == 0 || f->params));
        cr_assert(ftr_dwarf_params_find(r, f->addr) == f);
        for (int k = 0; k <= f->nparams; k++) {
            const struct ftr_dw_param *p = k < f->nparams ? &f->params[k] : &f->ret;
            cr_assert(memchr(p->name, 0, sizeof p->name), "NUL-terminated");
            cr_assert(p->cls <= FTR_PC_STRUCT && p->loc <= FTR_PL_STACK && p->nparts <= 2);
            cr_assert(p->loc != FTR_PL_INT || p->n < 6);
            cr_assert(p->loc != FTR_PL_SSE || p->n < 8);
            cr_assert(p->cls != FTR_PC_ENUM || p->enum_id < r->nenums);
        }
    }
    for (size_t i = 0; i < r->nenums; i++) {
        const struct ftr_dw_enum *e = &r->enums[i];
        cr_assert(e->name && e->n <= 4096 && (!e->n || (e->values && e->names)));
        for (uint32_t k = 0; k < e->n; k++)
            cr_assert(e->names[k] && strlen(e->names[k]) < 256);
    }
}

static void params_of(Elf *elf, struct ftr_dw_params *r)
{
    char err[128] = "";
    cr_assert(ftr_dwarf_params(elf, r, err, sizeof err) == 0, "ftr_dwarf_params: %s", err);
    check_shape(r);
}

static const struct ftr_dw_func *func(Elf *elf, const struct ftr_dw_params *r, const char *sym,
                                      const char *what)
{
    uint64_t a = symbol(elf, sym);
    cr_assert(a, "%s: no symbol %s", what, sym);
    const struct ftr_dw_func *f = ftr_dwarf_params_find(r, a);
    cr_assert(f, "%s: %s not described", what, sym);
    cr_expect(!strcmp(f->name, sym), "%s: %s is named %s", what, sym, f->name);
    return f;
}

static const struct ftr_dw_enum *enum_of(const struct ftr_dw_params *r,
                                         const struct ftr_dw_param *p)
{
    cr_assert(p->cls == FTR_PC_ENUM && p->enum_id < r->nenums);
    return &r->enums[p->enum_id];
}

static void check_enum(const struct ftr_dw_enum *e, const char *name, int size, int sign,
                       uint32_t n, const int64_t *values, const char *const *names,
                       const char *what)
{
    cr_expect(!strcmp(e->name, name) && e->size == size && e->sign == sign && e->n == n,
              "%s: enum %s: %s size %u sign %u n %u", what, name, e->name, e->size, e->sign, e->n);
    for (uint32_t k = 0; k < n && k < e->n; k++)
        cr_expect(e->values[k] == values[k] && !strcmp(e->names[k], names[k]),
                  "%s: %s = %lld, not %s = %lld", what, e->names[k], (long long)e->values[k],
                  names[k], (long long)values[k]);
}

/* clang: 1 from clang, 2 from clang -O2 */
static void check_file(const char *path, const struct expect *e, size_t ne, int clang, int cxx,
                       const char *what)
{
    int fd = open(path, O_RDONLY);
    cr_assert(fd >= 0, "%s: not built", path);
    Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
    cr_assert(elf);
    struct ftr_dw_params r;
    params_of(elf, &r);
    for (size_t i = 0; i < ne; i++) {
        char line[512];
        const char *want = clang == 2 && e[i].clang2 ? e[i].clang2
                           : clang && e[i].clang     ? e[i].clang
                                                     : e[i].line;
        render(line, sizeof line, func(elf, &r, e[i].sym, what));
        cr_expect(!strcmp(line, want), "%s: %s:\n  got  %s\n  want %s", what, e[i].sym, line, want);
    }
    if (!cxx) {
        static const int64_t ev[] = {-1, 5, 200}, fv[] = {(int64_t)0xfffffff0u, 1};
        static const char *const en[] = {"EA", "EB", "EC"}, *const fn[] = {"FA", "FB"};
        const struct ftr_dw_func *f = func(elf, &r, "enums", what);
        check_enum(enum_of(&r, &f->params[0]), "E", 4, 1, 3, ev, en, what);
        check_enum(enum_of(&r, &f->params[1]), "F", 4, 0, 2, fv, fn, what);
        f = func(elf, &r, "re", what);
        cr_expect(enum_of(&r, &f->ret) == enum_of(&r, &func(elf, &r, "enums", what)->params[0]),
                  "%s: one enum E for the unit", what);
    } else {
        static const int64_t uv[] = {200, 1};
        static const char *const un[] = {"X", "Y"};
        const struct ftr_dw_func *f = func(elf, &r, "fe", what);
        check_enum(enum_of(&r, &f->params[0]), "U8", 1, 0, 2, uv, un, what);
    }
    ftr_dwarf_params_free(&r);
    cr_expect(r.nfuncs == 0 && r.funcs == NULL);
    elf_end(elf);
    close(fd);
}

struct config {
    const char *cc, *cxx, *flags;
};

static void build(const struct config *k, int n)
{
    char path[128], jobs[4096];
    size_t len = 0;
    for (int i = 0; i < n && len < sizeof jobs; i++)
        len += (size_t)snprintf(jobs + len, sizeof jobs - len,
                                "'%s %s -w -shared -fPIC a.c -o c%d.so'\n"
                                "'%s -std=c++17 %s -w -shared -fPIC b.cc -o x%d.so'\n",
                                k[i].cc, k[i].flags, i, k[i].cxx, k[i].flags, i);
    cr_assert(len < sizeof jobs);
    snprintf(path, sizeof path, "%s/a.c", tmpdir);
    write_file(path, c_source);
    snprintf(path, sizeof path, "%s/b.cc", tmpdir);
    write_file(path, cxx_source);
    run_jobs(jobs);
}

static int configs(struct config *k)
{
    static const char *const flags[] = {"-O0 -g", "-O2 -g", "-O2 -gdwarf-4", "-O0 -gdwarf-4"};
    int n = 0;
    for (int c = 0; c < 2; c++)
        for (int f = 0; f < 4; f++)
            if (have(c ? "clang++" : "g++") && have(c ? "clang" : "gcc"))
                k[n++] = (struct config){c ? "clang" : "gcc", c ? "clang++" : "g++", flags[f]};
    return n;
}

/* ---- descriptors ---- */

Test(dwarf_params, descriptors, .init = make_tmpdir, .fini = remove_tmpdir)
{
    elf_version(EV_CURRENT);
    struct config k[8];
    int n = configs(k);
    if (!n) cr_skip_test("no compiler");
    build(k, n);
    for (int i = 0; i < n; i++) {
        char path[128], what[96];
        int clang = strcmp(k[i].cc, "clang") ? 0 : strstr(k[i].flags, "-O2") ? 2 : 1;
        snprintf(what, sizeof what, "%s %s", k[i].cc, k[i].flags);
        snprintf(path, sizeof path, "%s/c%d.so", tmpdir, i);
        check_file(path, c_expect, sizeof c_expect / sizeof *c_expect, clang, 0, what);
        snprintf(what, sizeof what, "%s %s", k[i].cxx, k[i].flags);
        snprintf(path, sizeof path, "%s/x%d.so", tmpdir, i);
        check_file(path, cxx_expect, sizeof cxx_expect / sizeof *cxx_expect, clang, 1, what);
    }
}

/* No DWARF, another kind of file, no file: an empty result */
Test(dwarf_params, empty, .init = make_tmpdir, .fini = remove_tmpdir)
{
    elf_version(EV_CURRENT);
    struct ftr_dw_params r;
    char err[64] = "";
    cr_expect(ftr_dwarf_params(NULL, &r, err, sizeof err) == 0 && r.nfuncs == 0);
    cr_expect(ftr_dwarf_params_find(&r, 0) == NULL);
    ftr_dwarf_params_free(&r);
    if (!have("gcc")) cr_skip_test("no gcc");
    char path[128];
    snprintf(path, sizeof path, "%s/a.c", tmpdir);
    write_file(path, c_source);
    run_jobs("'gcc -O2 -g0 -w -shared -fPIC a.c -o g0.so'\n'gcc -O2 -g -w -c a.c -o a.o'\n"
             "'gcc -O2 -g1 -w -shared -fPIC a.c -o g1.so'\n");
    static const char *const files[] = {"g0.so", "a.o", "g1.so"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", tmpdir, files[i]);
        int fd = open(path, O_RDONLY);
        Elf *elf = elf_begin(fd, ELF_C_READ, NULL);
        params_of(elf, &r);
        cr_expect(r.nfuncs == 0 && r.nenums == 0, "%s: nothing", files[i]);
        ftr_dwarf_params_free(&r);
        elf_end(elf);
        close(fd);
    }
}

/* ---- robustness: truncated and corrupted DWARF ---- */

static void read_copy(uint8_t *img, size_t size)
{
    Elf *elf = elf_memory((char *)img, size);
    cr_assert(elf);
    struct ftr_dw_params r;
    params_of(elf, &r);
    ftr_dwarf_params_free(&r);
    elf_end(elf);
}

/* .debug_info cut at every length (in steps), then the corruptions test_dwarf_args uses */
static void truncate_info(const char *path)
{
    size_t size;
    uint8_t *img = read_all(path, &size);
    struct section s;
    cr_assert(find_section(img, size, ".debug_info", &s) && s.size);
    uint64_t orig = s.size;
    for (uint64_t n = 0; n < orig; n += 1 + orig / 97) {
        memcpy(img + s.hdr, &n, sizeof n);
        read_copy(img, size);
    }
    free(img);
}

Test(dwarf_params, malformed, .init = make_tmpdir, .fini = remove_tmpdir)
{
    elf_version(EV_CURRENT);
    struct config k[8];
    int n = configs(k), m = 0;
    for (int i = 0; i < n; i++) /* one of each compiler, DWARF 5 and 4 */
        if (strstr(k[i].flags, "-O2")) k[m++] = k[i];
    if (!m) cr_skip_test("no compiler");
    build(k, m);
    for (int i = 0; i < m; i++) {
        char path[128];
        for (int cxx = 0; cxx < 2; cxx++) {
            snprintf(path, sizeof path, "%s/%c%d.so", tmpdir, cxx ? 'x' : 'c', i);
            truncate_info(path);
            corrupt(path, read_copy);
        }
    }
}
