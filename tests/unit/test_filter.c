/*
 * test_filter.c - the function filter grammar (patcher/filter.c, ftr_filter.h) on strings.
 */
#define _GNU_SOURCE
#include <criterion/criterion.h>
#include <stdio.h>
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
