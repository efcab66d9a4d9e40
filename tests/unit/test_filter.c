/*
 * test_filter.c - the function filter grammar (patcher/filter.c, ftr_filter.h) on strings.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftr_filter.h"

static char err[256];

static struct ftr_filter *parse(const char *expr)
{
    err[0] = 'x', err[1] = '\0';
    struct ftr_filter *f = ftr_filter_parse(expr, err, sizeof err);
    cr_assert_not_null(f, "parse '%s': %s", expr, err);
    cr_assert_str_empty(err, "parse '%s' left a message: %s", expr, err);
    return f;
}

/* expr must fail with exactly the message want (NULL: any message) */
static void fails(const char *expr, const char *want)
{
    struct ftr_filter *f = ftr_filter_parse(expr, err, sizeof err);
    cr_assert_null(f, "parse '%s' should fail", expr);
    if (want) cr_expect_str_eq(err, want, "parse '%s'", expr);
    cr_expect_null(strchr(err, '\n'), "one line: %s", err);
}

/* a function of module "/usr/lib/libother.so.1" */
static int sel(const struct ftr_filter *f, const char *name)
{
    return ftr_filter_match(f, "/usr/lib/libother.so.1", name);
}

/* ---- selection ---- */

Test(filter, empty_expression_selects_everything)
{
    const char *exprs[] = {"", "   ", "\t \n", NULL};
    for (size_t i = 0; i < sizeof exprs / sizeof exprs[0]; i++) {
        struct ftr_filter *f = ftr_filter_parse(exprs[i], err, sizeof err);
        cr_assert_not_null(f, "%s", err);
        cr_expect_eq(ftr_filter_includes(f), 0);
        cr_expect(sel(f, "main"));
        cr_expect(ftr_filter_match(f, NULL, "anything"));
        cr_expect(ftr_filter_match_ex(f, "/bin/prog", 1, "x"));
        ftr_filter_free(f);
    }
    /* a NULL filter selects everything too */
    cr_expect(ftr_filter_match(NULL, NULL, "f"));
    cr_expect_eq(ftr_filter_includes(NULL), 0);
    ftr_filter_free(NULL);
}

Test(filter, globs)
{
    struct ftr_filter *f = parse("sheep_*,goat?,[cd]ow,[!a-y]z,fox[[:digit:]]");
    cr_expect_eq(ftr_filter_includes(f), 5);
    cr_expect(sel(f, "sheep_"));
    cr_expect(sel(f, "sheep_count"));
    cr_expect_not(sel(f, "sheep"));
    cr_expect_not(sel(f, "a_sheep_x"), "globs are anchored");
    cr_expect(sel(f, "goat1"));
    cr_expect_not(sel(f, "goat"));
    cr_expect_not(sel(f, "goat12"));
    cr_expect(sel(f, "cow"));
    cr_expect(sel(f, "dow"));
    cr_expect_not(sel(f, "bow"));
    cr_expect(sel(f, "zz"));
    cr_expect_not(sel(f, "az"));
    cr_expect(sel(f, "fox7"));
    cr_expect_not(sel(f, "foxy"));
    cr_expect_not(sel(f, "main"), "an including filter drops what it does not name");
    cr_expect_not(sel(f, NULL), "a NULL name is \"\"");
    ftr_filter_free(f);

    /* a ']' first in brackets is literal; an escaped '*' is literal */
    f = parse("[]x]y,a\\*b");
    cr_expect(sel(f, "]y"));
    cr_expect(sel(f, "xy"));
    cr_expect(sel(f, "a*b"));
    cr_expect_not(sel(f, "axb"));
    ftr_filter_free(f);
}

Test(filter, exclusions)
{
    struct ftr_filter *f = parse("sheep_*,-sheep_x*");
    cr_expect_eq(ftr_filter_includes(f), 1);
    cr_expect(sel(f, "sheep_a"));
    cr_expect_not(sel(f, "sheep_x"));
    cr_expect_not(sel(f, "sheep_xy"));
    cr_expect_not(sel(f, "goat"));
    ftr_filter_free(f);
}

Test(filter, later_terms_win)
{
    struct ftr_filter *f = parse("sheep_*,-sheep_x,sheep_x");
    cr_expect(sel(f, "sheep_x"));
    cr_expect(sel(f, "sheep_y"));
    ftr_filter_free(f);

    f = parse("sheep_x,-sheep_*");
    cr_expect_not(sel(f, "sheep_x"), "the later exclusion wins");
    cr_expect_not(sel(f, "goat"));
    cr_expect_eq(ftr_filter_includes(f), 1);
    ftr_filter_free(f);

    f = parse("-*,main");
    cr_expect(sel(f, "main"));
    cr_expect_not(sel(f, "other"));
    ftr_filter_free(f);
}

Test(filter, only_exclusions_means_everything_else)
{
    struct ftr_filter *f = parse("-sheep_*,-@^goat");
    cr_expect_eq(ftr_filter_includes(f), 0);
    cr_expect_not(sel(f, "sheep_a"));
    cr_expect_not(sel(f, "goat_b"));
    cr_expect(sel(f, "a_goat"));
    cr_expect(sel(f, "main"));
    cr_expect(ftr_filter_match(f, NULL, "cow"));
    ftr_filter_free(f);
}

Test(filter, module_limited_terms)
{
    struct ftr_filter *f = parse("libfoo.so:*");
    cr_expect(ftr_filter_match(f, "/opt/lib/libfoo.so", "anything"));
    cr_expect(ftr_filter_match(f, "libfoo.so", "anything"), "a bare file name works too");
    cr_expect_not(ftr_filter_match(f, "/opt/lib/libfoo.so.1", "anything"));
    cr_expect_not(ftr_filter_match(f, "/libfoo.so/libbar.so", "x"), "basename only");
    cr_expect_not(ftr_filter_match(f, NULL, "anything"), "unknown module: no match");
    ftr_filter_free(f);

    f = parse("exe:main");
    cr_expect(ftr_filter_match_ex(f, "/usr/bin/prog", 1, "main"));
    cr_expect(ftr_filter_match_ex(f, NULL, 1, "main"), "is_main without a path");
    cr_expect_not(ftr_filter_match_ex(f, "/usr/bin/prog", 1, "other"));
    cr_expect_not(ftr_filter_match(f, "/usr/bin/prog", "main"), "not said to be the main one");
    cr_expect_not(ftr_filter_match(f, "/lib/libc.so.6", "main"));
    cr_expect(ftr_filter_match(f, "/some/dir/exe", "main"), "a module really named exe");
    ftr_filter_free(f);

    /* the main executable still matches by its own file name */
    f = parse("prog:main");
    cr_expect(ftr_filter_match_ex(f, "/usr/bin/prog", 1, "main"));
    cr_expect(ftr_filter_match(f, "/usr/bin/prog", "main"));
    ftr_filter_free(f);

    f = parse("lib*.so*:read_*");
    cr_expect(ftr_filter_match(f, "/lib/x86_64-linux-gnu/libc.so.6", "read_all"));
    cr_expect(ftr_filter_match(f, "libz.so", "read_x"));
    cr_expect_not(ftr_filter_match(f, "/lib/libc.so.6", "write_all"));
    cr_expect_not(ftr_filter_match_ex(f, "/usr/bin/prog", 1, "read_all"));
    cr_expect_not(ftr_filter_match(f, NULL, "read_all"));
    ftr_filter_free(f);

    /* module-limited exclusion, then a regex limited to a module, whitespace around ':' */
    f = parse("-libc.so*:*, exe : @^m , libm.so.6:@^(sin|cos)$");
    cr_expect_eq(ftr_filter_includes(f), 2);
    cr_expect(ftr_filter_match_ex(f, "/bin/prog", 1, "main"));
    cr_expect_not(ftr_filter_match_ex(f, "/bin/prog", 1, "xmain"));
    cr_expect(ftr_filter_match(f, "/lib/libm.so.6", "cos"));
    cr_expect_not(ftr_filter_match(f, "/lib/libm.so.6", "cosh"));
    cr_expect_not(ftr_filter_match(f, "/lib/libc.so.6", "malloc"));
    ftr_filter_free(f);

    /* only exclusions: a module-limited one leaves other modules alone */
    f = parse("-libc.so.6:*");
    cr_expect_not(ftr_filter_match(f, "/lib/libc.so.6", "malloc"));
    cr_expect(ftr_filter_match(f, "/lib/libm.so.6", "sin"));
    cr_expect(ftr_filter_match(f, NULL, "malloc"));
    ftr_filter_free(f);
}

Test(filter, cxx_names_need_no_module)
{
    struct ftr_filter *f = parse("ns::*,libfoo.so:a::b,lib[[:alpha:]]x.so:f");
    cr_expect(sel(f, "ns::f"));
    cr_expect(ftr_filter_match(f, "/l/libfoo.so", "a::b"));
    cr_expect_not(ftr_filter_match(f, "/l/libbar.so", "a::b"));
    cr_expect(ftr_filter_match(f, "/l/libqx.so", "f"), "':' inside [[:alpha:]] is no separator");
    cr_expect_not(ftr_filter_match(f, "/l/lib1x.so", "f"));
    ftr_filter_free(f);
}

Test(filter, regex)
{
    struct ftr_filter *f = parse("@^sheep_[0-9]+$,@goat");
    cr_expect(sel(f, "sheep_12"));
    cr_expect_not(sel(f, "sheep_12a"));
    cr_expect_not(sel(f, "a_sheep_1"));
    cr_expect(sel(f, "goat"), "unanchored");
    cr_expect(sel(f, "mountain_goat_2"), "unanchored");
    cr_expect_not(sel(f, "go_at"));
    ftr_filter_free(f);

    /* an escaped comma belongs to the regex */
    f = parse("@^a{1\\,2}$,b");
    cr_expect_eq(ftr_filter_includes(f), 2);
    cr_expect(sel(f, "a"));
    cr_expect(sel(f, "aa"));
    cr_expect_not(sel(f, "aaa"));
    cr_expect(sel(f, "b"));
    ftr_filter_free(f);

    f = parse("@^x\\,y$");
    cr_expect(sel(f, "x,y"));
    cr_expect_eq(ftr_filter_includes(f), 1);
    ftr_filter_free(f);

    /* "\\," is an escaped backslash, then the comma splits */
    f = parse("@^a\\\\,b");
    cr_expect_eq(ftr_filter_includes(f), 2);
    cr_expect(sel(f, "a\\"));
    cr_expect(sel(f, "b"));
    ftr_filter_free(f);

    /* a regex may hold ':' and is never split into a module */
    f = parse("@^std::.*,-@::_M_");
    cr_expect(sel(f, "std::vector::push_back"));
    cr_expect_not(sel(f, "std::vector::_M_realloc"));
    ftr_filter_free(f);
}

Test(filter, whitespace)
{
    struct ftr_filter *f = parse("  sheep_* ,\t- sheep_x ,\n goat  ");
    cr_expect_eq(ftr_filter_includes(f), 2);
    cr_expect(sel(f, "sheep_a"));
    cr_expect_not(sel(f, "sheep_x"));
    cr_expect(sel(f, "goat"));
    ftr_filter_free(f);
}

/* ---- errors ---- */

Test(filter, error_empty_term)
{
    fails("a,,b", "bad filter term 2 '': empty term");
    fails("a,", "bad filter term 2 '': empty term");
    fails(",a", "bad filter term 1 '': empty term");
    fails("a, ,b", "bad filter term 2 '': empty term");
}

Test(filter, error_lone_minus)
{
    fails("a,-", "bad filter term 2 '-': '-' without a pattern");
    fails(" - ,a", "bad filter term 1 '-': '-' without a pattern");
}

Test(filter, error_empty_module)
{
    fails(":main", "bad filter term 1 ':main': empty module name before ':'");
    fails("a,- :main", "bad filter term 2 '- :main': empty module name before ':'");
}

Test(filter, error_empty_pattern)
{
    fails("libc.so.6:", "bad filter term 1 'libc.so.6:': empty pattern after ':'");
    fails("x,@", "bad filter term 2 '@': empty pattern after '@'");
    fails("-libc.so.6:@", "bad filter term 1 '-libc.so.6:@': empty pattern after '@'");
}

Test(filter, error_bad_regex)
{
    fails("a,b,@a(", NULL); /* the reason is regerror()'s */
    const char *prefix = "bad filter term 3 '@a(': bad regular expression: ";
    cr_expect(strncmp(err, prefix, strlen(prefix)) == 0, "%s", err);
    cr_expect_gt(strlen(err), strlen(prefix), "%s", err);

    fails("@[z-a]", NULL);
    prefix = "bad filter term 1 '@[z-a]': bad regular expression: ";
    cr_expect(strncmp(err, prefix, strlen(prefix)) == 0, "%s", err);
}

/* the reasons are ftr_regex.c's; glibc's back references are not taken */
Test(filter, error_bad_regex_reasons)
{
    fails("a,b,@a(", "bad filter term 3 '@a(': bad regular expression: unmatched (");
    fails("@[z-a]", "bad filter term 1 '@[z-a]': bad regular expression: invalid range z-a");
    fails("@*x", "bad filter term 1 '@*x': bad regular expression: nothing to repeat before '*'");
    fails("@^f(a)\\1$",
          "bad filter term 1 '@^f(a)\\1$': bad regular expression: back reference \\1 is not "
          "supported");
    fails("@a{1\\,x}", "bad filter term 1 '@a{1\\,x}': bad regular expression: invalid repetition "
                       "count in {...}");
}

Test(filter, regex_syntax)
{
    static const struct {
        const char *name;
        int sel;
    } names[] = {
        {"get_name", 1},   {"get_name2", 0}, {"reset_name", 0}, {"Write", 1},
        {"db::Write", 1},  {"db_Write", 0}, /* '_' is a word character: no word start */
        {"WriteBatch", 0}, {"xxx", 1},       {"x", 0},
    };
    struct ftr_filter *f = parse("@^(get|set)_[[:alpha:]]+$,@\\<Write\\>,@^x{2\\,}$");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
        cr_expect_eq(sel(f, names[i].name), names[i].sel, "%s", names[i].name);
    ftr_filter_free(f);

    /* no exponential backtracking on a long name */
    f = parse("@(a*)*b");
    char name[5000];
    memset(name, 'a', sizeof name - 1);
    name[sizeof name - 1] = '\0';
    cr_expect_not(sel(f, name));
    name[sizeof name - 2] = 'b';
    cr_expect(sel(f, name));
    ftr_filter_free(f);
}

Test(filter, error_bad_glob)
{
    fails("sheep_[ab", "bad filter term 1 'sheep_[ab': unmatched [ in glob");
    fails("a,[!]", "bad filter term 2 '[!]': unmatched [ in glob");
    fails("lib[c.so:f", "bad filter term 1 'lib[c.so:f': unmatched [ in module glob");
    fails("x[[:bogus:]]",
          "bad filter term 1 'x[[:bogus:]]': unknown character class [:bogus:] in glob");
    fails("abc\\", "bad filter term 1 'abc\\': trailing \\ in glob");
}

Test(filter, error_long_term_is_cut)
{
    char expr[200];
    memset(expr, 'a', sizeof expr);
    expr[0] = '[';
    expr[sizeof expr - 1] = '\0';
    cr_assert_null(ftr_filter_parse(expr, err, sizeof err));
    cr_expect_not_null(strstr(err, "...': unmatched [ in glob"), "%s", err);
    cr_expect_lt(strlen(err), 120);

    /* a short or NULL buffer is fine */
    char tiny[8];
    cr_expect_null(ftr_filter_parse("a,,b", tiny, sizeof tiny));
    cr_expect_str_eq(tiny, "bad fil");
    cr_expect_null(ftr_filter_parse("a,,b", NULL, 0));
}

/* ---- nearest names ---- */

static const char *const names[] = {"sheep_count", "sheep_counter", "sheep_cont",    "goat",
                                    "main",        "sheep_count",   "zzzzzzzzzzzzzz"};
#define NNAMES (sizeof names / sizeof names[0])

Test(filter, nearest_glob)
{
    struct ftr_filter *f = parse("sheep_cout*");
    const char *out[4];
    size_t n = ftr_filter_nearest(f, names, NNAMES, out, 4);
    cr_assert_eq(n, 3);
    /* distance 1: sheep_cont, sheep_count (alphabetical), then sheep_counter (3) */
    cr_expect_str_eq(out[0], "sheep_cont");
    cr_expect_str_eq(out[1], "sheep_count");
    cr_expect_str_eq(out[2], "sheep_counter");

    n = ftr_filter_nearest(f, names, NNAMES, out, 1);
    cr_assert_eq(n, 1);
    cr_expect_str_eq(out[0], "sheep_cont");
    cr_expect_eq(ftr_filter_nearest(f, names, NNAMES, out, 0), 0);
    ftr_filter_free(f);
}

Test(filter, nearest_regex_and_several_terms)
{
    struct ftr_filter *f = parse("-main,@^gaot$,libx.so:mian");
    const char *out[8];
    size_t n = ftr_filter_nearest(f, names, NNAMES, out, 8);
    cr_assert_eq(n, 2);
    cr_expect_str_eq(out[0], "goat"); /* "gaot": 2 */
    cr_expect_str_eq(out[1], "main"); /* "mian": 2, after goat alphabetically */
    ftr_filter_free(f);
}

Test(filter, nearest_limits)
{
    const char *out[8];
    /* nothing within max(3, len/2) */
    struct ftr_filter *f = parse("completely_different");
    cr_expect_eq(ftr_filter_nearest(f, names, NNAMES, out, 8), 0);
    ftr_filter_free(f);

    /* a long literal allows len/2: 14 z's vs 10 z's + "abcd" differ by 4 > 3 but <= 7 */
    const char *longs[] = {"zzzzzzzzzzabcd"};
    f = parse("zzzzzzzzzzzzzz");
    cr_expect_eq(ftr_filter_nearest(f, longs, 1, out, 8), 1);
    ftr_filter_free(f);

    /* only exclusions, or only metacharacters: nothing to compare with */
    f = parse("-sheep_count");
    cr_expect_eq(ftr_filter_nearest(f, names, NNAMES, out, 8), 0);
    ftr_filter_free(f);
    f = parse("*");
    cr_expect_eq(ftr_filter_nearest(f, names, NNAMES, out, 8), 0);
    ftr_filter_free(f);
    cr_expect_eq(ftr_filter_nearest(NULL, names, NNAMES, out, 8), 0);
}

/* ---- C++ names: demangled, with and without parameters, globs across "::" ---- */

/* the functions of tests/integration/progs/cxxnames.cpp, and a few more */
#define ADD1 "_ZN4shop4Cart3addEi"           /* shop::Cart::add(int) */
#define ADD2 "_ZN4shop4Cart3addEii"          /* shop::Cart::add(int, int) */
#define ADD3 "_ZN4shop4Cart3addERKNS_4ItemE" /* shop::Cart::add(shop::Item const&) */
#define TOTAL "_ZNK4shop4Cart5totalEv"       /* shop::Cart::total() const */
#define HELPER "_ZN4shop6detail6helperEi"    /* shop::detail::helper(int) */
#define BIGI "_ZN4shop7biggestIiEET_S1_S1_"  /* int shop::biggest<int>(int, int) */
#define BIGD "_ZN4shop7biggestIdEET_S1_S1_"  /* double shop::biggest<double>(double, ..) */
#define BOXI "_ZNK4shop3BoxIiE3getEv"        /* shop::Box<int>::get() const */
#define BOXL "_ZNK4shop3BoxIlE3getEv"        /* shop::Box<long>::get() const */
#define LESS "_ZN4shopltERKNS_4ItemES2_"     /* shop::operator<(shop::Item const&, ..) */
#define SHL "_ZN4shoplsERiRKNS_4ItemE"       /* shop::operator<<(int&, shop::Item const&) */
#define CALL "_ZNK4shop3FunclEi"             /* shop::Fun::operator()(int) const */
#define FREE "_Z7free_fni"                   /* free_fn(int) */
#define CLONE "_ZN4shop4Cart3addEi.isra.0"   /* shop::Cart::add(int) [clone .isra.0] */
#define ANON "_ZN12_GLOBAL__N_13fooEv"       /* (anonymous namespace)::foo() */
#define WRITE "_ZN7leveldb6DBImpl5WriteERKNS_12WriteOptionsEPNS_10WriteBatchE"
#define FIND                                                                                       \
    "_ZNSt3mapIiiSt4lessIiESaISt4pairIKiiEEE4findERS3_" /* std::map<int, int, ..>::find            \
                                                         */

static const char *const cxx[] = {ADD1, ADD2, ADD3, TOTAL, HELPER, BIGI,  BIGD, BOXI,   BOXL, LESS,
                                  SHL,  CALL, FREE, CLONE, ANON,   WRITE, FIND, "main", "add"};
#define NCXX (sizeof cxx / sizeof cxx[0])

/* expr selects exactly the names of want (a NULL-terminated list) among cxx[] */
static void selects(const char *expr, const char *const *want)
{
    struct ftr_filter *f = parse(expr);
    for (size_t i = 0; i < NCXX; i++) {
        int expected = 0;
        for (const char *const *w = want; *w; w++)
            expected |= !strcmp(*w, cxx[i]);
        cr_expect_eq(sel(f, cxx[i]), expected, "'%s' %s %s", expr,
                     expected ? "should select" : "should not select", cxx[i]);
    }
    ftr_filter_free(f);
}
#define SELECTS(expr, ...) selects(expr, (const char *const[]){__VA_ARGS__, NULL})

Test(filter, cxx_demangled_name_without_parameters_matches_every_overload)
{
    SELECTS("shop::Cart::add", ADD1, ADD2, ADD3);
    SELECTS("shop::Cart::total", TOTAL);
    SELECTS("free_fn", FREE);
    SELECTS("leveldb::DBImpl::Write", WRITE);
    SELECTS("(anonymous namespace)::foo", ANON);
    SELECTS("shop::Cart::add,main", ADD1, ADD2, ADD3, "main");
}

Test(filter, cxx_glob_star_crosses_scopes)
{
    SELECTS("leveldb::DBImpl::*", WRITE);
    SELECTS("leveldb::*", WRITE);
    SELECTS("shop::Cart::*", ADD1, ADD2, ADD3, TOTAL, CLONE);
    SELECTS("*::add", ADD1, ADD2, ADD3);
    SELECTS("shop::*::helper", HELPER);
    SELECTS("shop::Cart::ad?", ADD1, ADD2, ADD3);
    SELECTS("shop::Cart::[at]*", ADD1, ADD2, ADD3, TOTAL, CLONE);
    /* the clone has its own name, as a C function's clone does */
    SELECTS("shop::Cart::add*", ADD1, ADD2, ADD3, CLONE);
    SELECTS("shop::Cart::add.isra.0", CLONE);
}

Test(filter, cxx_parameter_list_selects_one_overload)
{
    SELECTS("shop::Cart::add(int)", ADD1);
    SELECTS("shop::Cart::add(int, int)", ADD2);
    SELECTS("shop::Cart::add(int,int)", ADD2); /* spaces do not matter */
    SELECTS("shop::Cart::add( int , int )", ADD2);
    SELECTS("shop::Cart::add(shop::Item const&)", ADD3);
    SELECTS("shop::Cart::add(shop::Item const &)", ADD3);
    SELECTS("shop::Cart::add(*)", ADD1, ADD2, ADD3);
    SELECTS("shop::Cart::add(int*)", ADD1, ADD2); /* a glob inside the list */
    SELECTS("shop::Cart::total() const", TOTAL);
    SELECTS("shop::Cart::total()*", TOTAL);
    SELECTS("leveldb::DBImpl::Write(leveldb::WriteOptions const&, leveldb::WriteBatch*)", WRITE);
    SELECTS("*(leveldb::WriteOptions const&, *)", WRITE);
    SELECTS("free_fn(int)", FREE);
    SELECTS("free_fn(long)", "none");
    SELECTS("(anonymous namespace)::foo()", ANON);
    /* the parameter list of a clone is followed by its clone suffix */
    SELECTS("shop::Cart::add(int) \\[clone .isra.0\\]", CLONE); /* [...] is a glob's */
    SELECTS("shop::Cart::add(int)*", ADD1, CLONE);
    /* a comma inside the list does not split the expression; after it, it does */
    SELECTS("shop::Cart::add(int, int),free_fn", ADD2, FREE);
    SELECTS("free_fn,shop::Cart::add(int, int),main", ADD2, FREE, "main");
}

Test(filter, cxx_templates)
{
    SELECTS("shop::biggest<int>", BIGI);
    SELECTS("shop::biggest<double>", BIGD);
    SELECTS("shop::biggest", BIGI, BIGD); /* every instantiation, like every overload */
    SELECTS("shop::biggest<*>", BIGI, BIGD);
    SELECTS("shop::biggest<int>(int, int)", BIGI);
    SELECTS("shop::biggest(double, double)", BIGD);
    SELECTS("int shop::biggest<int>(int, int)", BIGI); /* as --demangle=full writes it */
    SELECTS("shop::Box<int>::get", BOXI);
    SELECTS("shop::Box::get", BOXI, BOXL);
    SELECTS("shop::Box<long>::get() const", BOXL);
    SELECTS("std::map<int, int, *>::find", FIND); /* a comma inside <...> does not split */
    SELECTS("std::map::find", FIND);
    SELECTS("std::map::find(int const&),main", FIND, "main");
}

Test(filter, cxx_operators)
{
    SELECTS("shop::operator<", LESS);
    SELECTS("shop::operator<<", SHL);
    SELECTS("shop::operator<*", LESS, SHL);
    SELECTS("shop::operator<,free_fn", LESS, FREE); /* '<' of an operator opens nothing */
    SELECTS("shop::operator<<,free_fn", SHL, FREE);
    SELECTS("shop::operator<(shop::Item const&, shop::Item const&)", LESS);
    SELECTS("shop::Fun::operator()", CALL);
    SELECTS("shop::Fun::operator()(int) const", CALL);
    SELECTS("shop::Fun::operator()(int)*,main", CALL, "main");
}

Test(filter, cxx_mangled_names_still_match)
{
    SELECTS(ADD1, ADD1);
    SELECTS("_ZN4shop4Cart3add*", ADD1, ADD2, ADD3, CLONE);
    SELECTS("_ZN4shop*", ADD1, ADD2, ADD3, HELPER, BIGI, BIGD, LESS, SHL, CLONE);
    SELECTS("@^_ZNK", TOTAL, BOXI, BOXL, CALL);
}

Test(filter, cxx_regex)
{
    SELECTS("@^shop::Cart::add$", ADD1, ADD2, ADD3);
    SELECTS("@DBImpl::Wr", WRITE);
    SELECTS("@^shop::Cart::(add|total)$", ADD1, ADD2, ADD3, TOTAL);
    /* with \( the regex sees the parameter list */
    SELECTS("@^shop::Cart::add\\(int\\)$", ADD1);
    SELECTS("@^shop::Cart::add\\(int, int\\)$", ADD2); /* a comma inside (...) */
    SELECTS("@^shop::Cart::add\\(int\\, int\\)$", ADD2);
    SELECTS("@\\(leveldb::WriteOptions const&", WRITE);
    SELECTS("@^shop::biggest<int>$", BIGI);
    SELECTS("@^int shop::biggest<int>\\(", BIGI);
}

Test(filter, cxx_exclusions_and_last_match)
{
    SELECTS("shop::Cart::*,-shop::Cart::add(int)", ADD2, ADD3, TOTAL, CLONE);
    SELECTS("shop::Cart::*,-shop::Cart::add", TOTAL, CLONE);
    SELECTS("shop::Cart::*,-_ZN4shop4Cart3addEi", ADD2, ADD3, TOTAL, CLONE);
    SELECTS("-shop::Cart::add(int),shop::Cart::*", ADD1, ADD2, ADD3, TOTAL, CLONE); /* last wins */
    /* only exclusions: everything else */
    SELECTS("-shop::*,-leveldb::*", FREE, ANON, FIND, "main", "add");
    SELECTS("-shop::Cart::add(*)", TOTAL, HELPER, BIGI, BIGD, BOXI, BOXL, LESS, SHL, CALL, FREE,
            CLONE, ANON, WRITE, FIND, "main", "add");
}

Test(filter, cxx_with_module)
{
    struct ftr_filter *f = parse("libshop.so:shop::Cart::add(int, int),exe:shop::Box::*");
    cr_expect_eq(ftr_filter_includes(f), 2);
    cr_expect(ftr_filter_match(f, "/l/libshop.so", ADD2));
    cr_expect_not(ftr_filter_match(f, "/l/libshop.so", ADD1));
    cr_expect_not(ftr_filter_match(f, "/l/libother.so", ADD2));
    cr_expect(ftr_filter_match_ex(f, "/bin/prog", 1, BOXI));
    cr_expect_not(ftr_filter_match_ex(f, "/bin/prog", 0, BOXI));
    ftr_filter_free(f);
}

Test(filter, commas_inside_brackets_fall_back_when_unbalanced)
{
    /* an unclosed '(' or '<' does not swallow the rest of the expression */
    struct ftr_filter *f = ftr_filter_parse("a(,b", err, sizeof err);
    cr_assert_not_null(f, "%s", err);
    cr_expect_eq(ftr_filter_includes(f), 2);
    cr_expect(sel(f, "a("));
    cr_expect(sel(f, "b"));
    ftr_filter_free(f);
    f = parse("x<y,z");
    cr_expect_eq(ftr_filter_includes(f), 2);
    ftr_filter_free(f);
    f = parse("f(int, int),g(a,b),h");
    cr_expect_eq(ftr_filter_includes(f), 3);
    ftr_filter_free(f);
    /* a regex's group keeps its commas too */
    f = parse("@^(a,b)$,c");
    cr_expect_eq(ftr_filter_includes(f), 2);
    cr_expect(sel(f, "a,b"));
    cr_expect(sel(f, "c"));
    ftr_filter_free(f);
    /* a C function called operator is no C++ operator */
    f = parse("operator,main");
    cr_expect_eq(ftr_filter_includes(f), 2);
    ftr_filter_free(f);
    fails("f(int, ,g", "bad filter term 2 '': empty term");
}

Test(filter, cxx_nearest_compares_demangled_names)
{
    const char *out[4];
    struct ftr_filter *f = parse("shop::Cart::ad");
    size_t n = ftr_filter_nearest(f, cxx, NCXX, out, 4);
    cr_assert_geq(n, 1);
    /* out[] points into names[]: the mangled names whose demangled form is nearest */
    cr_expect(!strcmp(out[0], ADD1) || !strcmp(out[0], ADD2) || !strcmp(out[0], ADD3), "%s",
              out[0]);
    /* the overloads have one name: suggested once */
    for (size_t i = 1; i < n; i++)
        cr_expect(strcmp(out[i], ADD1) && strcmp(out[i], ADD2) && strcmp(out[i], ADD3),
                  "overload suggested twice: %s", out[i]);
    ftr_filter_free(f);
    f = parse("leveldb::DBImpl::Wirte");
    n = ftr_filter_nearest(f, cxx, NCXX, out, 4);
    cr_assert_eq(n, 1);
    cr_expect_str_eq(out[0], WRITE);
    ftr_filter_free(f);
}

Test(filter, demangle_forms)
{
    static const struct {
        const char *sym, *name, *sig, *full;
    } cases[] = {
        {ADD2, "shop::Cart::add", "shop::Cart::add(int, int)", "shop::Cart::add(int, int)"},
        {TOTAL, "shop::Cart::total", "shop::Cart::total() const", "shop::Cart::total() const"},
        {BIGI, "shop::biggest<int>", "shop::biggest<int>(int, int)",
         "int shop::biggest<int>(int, int)"},
        {CALL, "shop::Fun::operator()", "shop::Fun::operator()(int) const",
         "shop::Fun::operator()(int) const"},
        {CLONE, "shop::Cart::add.isra.0", "shop::Cart::add(int) [clone .isra.0]",
         "shop::Cart::add(int) [clone .isra.0]"},
        {ANON, "(anonymous namespace)::foo", "(anonymous namespace)::foo()",
         "(anonymous namespace)::foo()"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *want[3] = {cases[i].name, cases[i].sig, cases[i].full};
        enum ftr_demangle_form forms[3] = {FTR_DEMANGLE_NAME, FTR_DEMANGLE_SIGNATURE,
                                           FTR_DEMANGLE_FULL};
        for (int k = 0; k < 3; k++) {
            char *d = ftr_demangle(cases[i].sym, forms[k]);
            cr_assert_not_null(d, "%s", cases[i].sym);
            cr_expect_str_eq(d, want[k], "%s form %d", cases[i].sym, k);
            free(d);
        }
    }
    cr_expect_null(ftr_demangle("main", FTR_DEMANGLE_FULL), "not a C++ name");
    cr_expect_null(ftr_demangle("_Zgarbage", FTR_DEMANGLE_NAME), "not a valid mangling");
    cr_expect_null(ftr_demangle(NULL, FTR_DEMANGLE_NAME));
}

/* a filter limited to a library that is not loaded yet may select its functions later */
Test(filter, waits_for_module)
{
    const char *loaded[] = {"/bin/prog", "/lib/x86_64-linux-gnu/libc.so.6", "libm.so.6", NULL};
    struct ftr_filter *f = parse("libplugin.so:*");
    cr_expect(ftr_filter_waits_for_module(f, loaded, 4));
    ftr_filter_free(f);
    f = parse("libc.so*:*,libm.so.6:sin");
    cr_expect_not(ftr_filter_waits_for_module(f, loaded, 4), "both are loaded");
    ftr_filter_free(f);
    f = parse("prog:main,exe:f,ns::f,@x");
    cr_expect_not(ftr_filter_waits_for_module(f, loaded, 4), "the executable is always there");
    ftr_filter_free(f);
    f = parse("-libplugin.so:*,main");
    cr_expect_not(ftr_filter_waits_for_module(f, loaded, 4), "an exclusion waits for nothing");
    ftr_filter_free(f);
    f = parse("main,libp*.so:x");
    cr_expect(ftr_filter_waits_for_module(f, loaded, 4));
    cr_expect(ftr_filter_waits_for_module(f, NULL, 0));
    ftr_filter_free(f);
}
