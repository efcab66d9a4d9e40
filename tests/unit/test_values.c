/* test_values.c - argument specs (patcher/argspec.c), value lists (formats/ftr_values.c) and
 * their text (cli/report/values.c). */
#include <criterion/criterion.h>
#include <string.h>

#include "ftr_argspec.h"
#include "ftr_values.h"
#include "values.h"

static struct ftr_argspecs parse_ok(const char *text, int retval)
{
    struct ftr_argspecs s = {0};
    char err[256] = "";
    cr_assert_eq(ftr_argspecs_parse(text, retval, &s, err, sizeof err), 0, "%s: %s", text, err);
    return s;
}

static const char *item_text(const struct ftr_argitem *it)
{
    static char buf[32];
    ftr_argitem_text(it, buf, sizeof buf);
    return buf;
}

Test(argspec, items)
{
    struct ftr_argspecs s = parse_ok("f@arg1/d32,arg2/s,fparg1/32,arg7/x,retval/u16;g*", 0);
    cr_assert_eq(s.n, 2);
    const struct ftr_argspec *a = &s.v[0];
    cr_assert_eq(a->nitems, 5);
    cr_assert_str_eq(item_text(&a->items[0]), "arg1/d32");
    cr_assert_str_eq(item_text(&a->items[1]), "arg2/s");
    cr_assert_str_eq(item_text(&a->items[2]), "fparg1/32");
    cr_assert_str_eq(item_text(&a->items[3]), "arg7/x64");
    cr_assert_str_eq(item_text(&a->items[4]), "retval/u16");
    cr_assert(!a->from_dwarf);
    cr_assert(s.v[1].from_dwarf && s.v[1].nitems == 0);
    cr_assert_eq(ftr_argspecs_match(&s, NULL, 1, "f", NULL), &s.v[0]);
    cr_assert_eq(ftr_argspecs_match(&s, NULL, 1, "gx", NULL), &s.v[1]);
    cr_assert_null(ftr_argspecs_match(&s, NULL, 1, "h", NULL));
    ftr_argspecs_free(&s);
    /* -R without a list: the return value; a regex pattern keeps its '@' */
    s = parse_ok("@^db_", 1);
    cr_assert(s.v[0].from_dwarf && s.v[0].nitems == 1 && s.v[0].items[0].src == FTR_AS_RETVAL);
    cr_assert_not_null(ftr_argspecs_match(&s, NULL, 1, "db_open", NULL));
    ftr_argspecs_free(&s);
    s = parse_ok("@^db_@arg2/c", 0);
    cr_assert_eq(s.v[0].nitems, 1);
    cr_assert_str_eq(item_text(&s.v[0].items[0]), "arg2/c8");
    ftr_argspecs_free(&s);
}

Test(argspec, errors)
{
    static const char *const bad[][2] = {
        {"f@arg0", "argument numbers start at 1"},
        {"f@arg1/q", "unknown format"},
        {"f@arg1/d12", "sizes are 8, 16, 32 or 64 bits"},
        {"f@fparg9", "fparg goes up to fparg8"},
        {"f@arg1,", "empty item"},
        {"f@arg1/d32x", "junk after an item"},
        {"f@retval/f16", "floating point is 32 or 64 bits"},
        {"-f@arg1", "selects no function"},
        {"a;;b", "empty spec"},
        {"f@arg1,arg2,arg3,arg4,arg5,arg6,arg7,arg8,arg9,arg10,arg11,arg12,arg13", "more than 12"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
        struct ftr_argspecs s = {0};
        char err[256] = "";
        cr_assert_eq(ftr_argspecs_parse(bad[i][0], 0, &s, err, sizeof err), -1, "%s", bad[i][0]);
        cr_assert_not_null(strstr(err, bad[i][1]), "%s: %s", bad[i][0], err);
        cr_assert_not_null(strstr(err, "bad argument spec"), "%s", err);
        cr_assert_eq(s.n, 0);
        ftr_argspecs_free(&s);
    }
}

static const char *text_of(const uint8_t *v, uint32_t len)
{
    static char buf[FRP_VALUES_TEXT_MAX];
    frp_values_text(v, len, buf, sizeof buf);
    return buf;
}

Test(values, decode_and_text)
{
    uint8_t l[64] = {0};
    size_t n = 0;
    l[n++] = ftr_val_type(FTR_VF_SIGNED, 2), l[n++] = 1, l[n++] = 0xd4, l[n++] = 0xfe; /* -300 */
    l[n++] = ftr_val_type(FTR_VF_HEX, 4), l[n++] = 2;
    memcpy(l + n, "\x00\x28\x6b\xee", 4), n += 4;
    l[n++] = ftr_val_type(FTR_VF_STR, 8), l[n++] = 3, l[n++] = FTR_STR_TRUNCATED, l[n++] = 3;
    memcpy(l + n, "a\"\n", 3), n += 3;
    l[n++] = ftr_val_type(FTR_VF_STR, 8), l[n++] = 4, l[n++] = FTR_STR_BAD, l[n++] = 0;
    double d = -2.25;
    l[n++] = ftr_val_type(FTR_VF_FLOAT, 8), l[n++] = 5;
    memcpy(l + n, &d, 8), n += 8;
    l[n++] = ftr_val_type(FTR_VF_PTR, 8), l[n++] = 6;
    n += 8; /* 0: NULL */
    l[n++] = ftr_val_type(FTR_VF_BOOL, 1), l[n++] = 0, l[n++] = 1;
    size_t len = (n + 3) & ~(size_t)3;
    cr_assert_str_eq(text_of(l, (uint32_t)len),
                     "-300, 0xee6b2800, \"a\\\"\\n\"..., (bad), -2.25, NULL, true");
    /* cut short, an unknown format, a NULL string with bytes: "?" */
    cr_assert_str_eq(text_of(l, 3), "?");
    uint8_t u[4] = {0x80 | 9, 1, 0, 0};
    cr_assert_str_eq(text_of(u, 4), "?");
    uint8_t z[8] = {ftr_val_type(FTR_VF_STR, 8), 1, FTR_STR_NULL, 2, 'a', 'b', 0, 0};
    cr_assert_str_eq(text_of(z, 8), "?");
    /* padding only: no value */
    uint8_t pad[4] = {0};
    cr_assert_str_eq(text_of(pad, 4), "");
    struct ftr_value x = {.fmt = FTR_VF_SIGNED, .size = 1, .bits = 0xfb};
    cr_assert_eq(ftr_value_signed(&x), -5);
}

Test(values, dwarf_parts_in_braces)
{
    /* a struct's two register parts share their parameter's index: {a, b} (no names known) */
    uint8_t l[24] = {0};
    size_t n = 0;
    double d = 0.5;
    l[n++] = ftr_val_type(FTR_VF_FLOAT, 8), l[n++] = FTR_VAL_DWARF | 1;
    memcpy(l + n, &d, 8), n += 8;
    l[n++] = ftr_val_type(FTR_VF_HEX, 8), l[n++] = FTR_VAL_DWARF | 1, l[n++] = 9;
    n += 7;
    cr_assert(frp_values_typed(l, 20));
    char buf[128];
    frp_values_named(l, 20, NULL, buf, sizeof buf);
    cr_assert_str_eq(buf, "{0.5, 0x9}");
}
