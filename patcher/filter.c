/*
 * filter.c - the function filter of ftr_filter.h: parse an expression once into terms, then match
 * (module, name) pairs against them.
 *
 * Parsing, one term at a time:
 *  1. Split the expression at commas. "\," stands for a comma and does not split; any other
 *     backslash pair is kept as written, so "\\," is an escaped backslash followed by a split.
 *  2. Trim whitespace around the term; an empty term is an error. A leading '-' excludes
 *     (whitespace after it is ignored).
 *  3. A term that starts with '@' is a regular expression over the whole rest and has no module.
 *     Otherwise the module separator is the first ':' outside a bracket expression that is not
 *     part of "::" (so that C++ names such as ns::f need no module).
 *  4. Globs are checked here, because fnmatch(3) silently reads an unmatched '[' as a literal:
 *     unmatched '[', unknown [:class:], trailing backslash. Regular expressions are compiled
 *     with REG_EXTENDED | REG_NOSUB.
 * Matching walks the terms from the last to the first and stops at the first that matches.
 */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <regex.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wctype.h>

#include "ftr_filter.h"

#define ERR_TEXT_MAX 60 /* characters of a term quoted in an error message */

struct term {
    int exclude;
    int is_regex;
    int compiled;  /* re holds a compiled expression */
    char *module;  /* glob on the module's basename, or NULL: any module */
    char *pattern; /* glob or regular expression text (after '@'), unescaped */
    regex_t re;
};

struct ftr_filter {
    size_t n;
    size_t includes;
    struct term t[];
};

/* ---- parsing ---- */

static int is_space(char c)
{
    return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

static char *skip_space(char *s)
{
    while (is_space(*s))
        s++;
    return s;
}

static void trim_end(char *s)
{
    size_t n = strlen(s);
    while (n > 0 && is_space(s[n - 1]))
        s[--n] = '\0';
}

/* Writes "bad filter term N 'TEXT': REASON" into err; raw is the term as written. */
static void term_error(char *err, size_t errlen, size_t num, const char *raw, size_t rawlen,
                       const char *fmt, ...)
{
    if (!err || errlen == 0) return;
    while (rawlen > 0 && is_space(*raw))
        raw++, rawlen--;
    while (rawlen > 0 && is_space(raw[rawlen - 1]))
        rawlen--;
    int cut = rawlen > ERR_TEXT_MAX;
    int len = snprintf(err, errlen, "bad filter term %zu '%.*s%s': ", num,
                       (int)(cut ? ERR_TEXT_MAX : rawlen), raw, cut ? "..." : "");
    if (len < 0 || (size_t)len >= errlen) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err + len, errlen - (size_t)len, fmt, ap);
    va_end(ap);
}

/* p points at '['. @return the character after the closing ']', or NULL when there is none.
 * *badclass receives the start of an unknown [:class:] name (or NULL). Follows glibc fnmatch:
 * '!' or '^' negates, a ']' first is literal, a backslash escapes, [:c:] [.c.] [=c=] nest. */
static const char *bracket_end(const char *p, const char **badclass, size_t *badlen)
{
    p++;
    if (*p == '!' || *p == '^') p++;
    if (*p == ']') p++;
    for (;;) {
        if (*p == '\0') return NULL;
        if (*p == ']') return p + 1;
        if (*p == '\\' && p[1] != '\0') {
            p += 2;
        } else if (*p == '[' && (p[1] == ':' || p[1] == '.' || p[1] == '=')) {
            char kind = p[1];
            const char *name = p + 2, *q = name;
            while (*q && !(q[0] == kind && q[1] == ']'))
                q++;
            if (*q == '\0') return NULL;
            if (kind == ':' && badclass && !*badclass) {
                char buf[32];
                size_t len = (size_t)(q - name);
                if (len >= sizeof buf) {
                    *badclass = name, *badlen = len;
                } else {
                    memcpy(buf, name, len);
                    buf[len] = '\0';
                    if (wctype(buf) == 0) *badclass = name, *badlen = len;
                }
            }
            p = q + 2;
        } else {
            p++;
        }
    }
}

/* @return NULL when glob (a module's when module) is well formed for fnmatch, else a static
 * reason. For an unknown character class the reason is written into buf. */
static const char *glob_problem(const char *glob, int module, char *buf, size_t buflen)
{
    for (const char *p = glob; *p;) {
        if (*p == '\\') {
            if (p[1] == '\0') return module ? "trailing \\ in module glob" : "trailing \\ in glob";
            p += 2;
        } else if (*p == '[') {
            const char *bad = NULL;
            size_t badlen = 0;
            const char *end = bracket_end(p, &bad, &badlen);
            if (!end) return module ? "unmatched [ in module glob" : "unmatched [ in glob";
            if (bad) {
                snprintf(buf, buflen, "unknown character class [:%.*s:] in %sglob",
                         (int)(badlen > 20 ? 20 : badlen), bad, module ? "module " : "");
                return buf;
            }
            p = end;
        } else {
            p++;
        }
    }
    return NULL;
}

/* @return the module separator of s (no leading '@'): the first ':' outside brackets and not
 * next to another ':', or NULL. */
static char *module_colon(char *s)
{
    for (char *p = s; *p;) {
        if (*p == '\\' && p[1] != '\0') {
            p += 2;
        } else if (*p == '[') {
            const char *end = bracket_end(p, NULL, NULL);
            p = end ? (char *)end : p + 1;
        } else if (*p == ':') {
            if (p[1] == ':') {
                p += 2;
                while (*p == ':')
                    p++;
            } else {
                return p;
            }
        } else {
            p++;
        }
    }
    return NULL;
}

/* Parses one term; s is its unescaped text (modified in place). @return 0, or -1 with err. */
static int parse_term(struct term *t, char *s, size_t num, const char *raw, size_t rawlen,
                      char *err, size_t errlen)
{
    char why[96];
    const char *problem;

    s = skip_space(s);
    trim_end(s);
    if (*s == '\0') {
        term_error(err, errlen, num, raw, rawlen, "empty term");
        return -1;
    }
    if (*s == '-') {
        t->exclude = 1;
        s = skip_space(s + 1);
        if (*s == '\0') {
            term_error(err, errlen, num, raw, rawlen, "'-' without a pattern");
            return -1;
        }
    }
    char *pat = s;
    if (*s != '@') {
        char *colon = module_colon(s);
        if (colon) {
            *colon = '\0';
            trim_end(s);
            if (*s == '\0') {
                term_error(err, errlen, num, raw, rawlen, "empty module name before ':'");
                return -1;
            }
            if ((problem = glob_problem(s, 1, why, sizeof why))) {
                term_error(err, errlen, num, raw, rawlen, "%s", problem);
                return -1;
            }
            if (!(t->module = strdup(s))) goto nomem;
            pat = skip_space(colon + 1);
            if (*pat == '\0') {
                term_error(err, errlen, num, raw, rawlen, "empty pattern after ':'");
                return -1;
            }
        }
    }
    if (*pat == '@') {
        t->is_regex = 1;
        pat++;
        if (*pat == '\0') {
            term_error(err, errlen, num, raw, rawlen, "empty pattern after '@'");
            return -1;
        }
        int rc = regcomp(&t->re, pat, REG_EXTENDED | REG_NOSUB);
        if (rc != 0) {
            regerror(rc, &t->re, why, sizeof why);
            term_error(err, errlen, num, raw, rawlen, "bad regular expression: %s", why);
            return -1;
        }
        t->compiled = 1;
    } else if ((problem = glob_problem(pat, 0, why, sizeof why))) {
        term_error(err, errlen, num, raw, rawlen, "%s", problem);
        return -1;
    }
    if (!(t->pattern = strdup(pat))) goto nomem;
    return 0;
nomem:
    term_error(err, errlen, num, raw, rawlen, "out of memory");
    return -1;
}

struct ftr_filter *ftr_filter_parse(const char *expr, char *err, size_t errlen)
{
    if (err && errlen) err[0] = '\0';
    if (!expr) expr = "";

    const char *p = skip_space((char *)expr);
    size_t nterms = 0;
    if (*p) {
        nterms = 1;
        for (; *p; p++) {
            if (*p == '\\' && p[1] != '\0')
                p++;
            else if (*p == ',')
                nterms++;
        }
    }

    struct ftr_filter *f = calloc(1, sizeof *f + nterms * sizeof f->t[0]);
    char *buf = malloc(strlen(expr) + 1);
    if (!f || !buf) {
        if (err && errlen) snprintf(err, errlen, "out of memory");
        free(f);
        free(buf);
        return NULL;
    }
    p = skip_space((char *)expr);
    for (size_t i = 0; i < nterms; i++) {
        const char *raw = p;
        size_t len = 0;
        for (; *p && *p != ','; p++) {
            if (*p == '\\' && p[1] == ',') {
                buf[len++] = ',';
                p++;
            } else if (*p == '\\' && p[1] != '\0') {
                buf[len++] = *p++;
                buf[len++] = *p;
            } else {
                buf[len++] = *p;
            }
        }
        buf[len] = '\0';
        size_t rawlen = (size_t)(p - raw);
        if (*p == ',') p++;
        f->n = i + 1;
        if (parse_term(&f->t[i], buf, i + 1, raw, rawlen, err, errlen) != 0) {
            free(buf);
            ftr_filter_free(f);
            return NULL;
        }
        if (!f->t[i].exclude) f->includes++;
    }
    free(buf);
    return f;
}

void ftr_filter_free(struct ftr_filter *f)
{
    if (!f) return;
    for (size_t i = 0; i < f->n; i++) {
        if (f->t[i].compiled) regfree(&f->t[i].re);
        free(f->t[i].module);
        free(f->t[i].pattern);
    }
    free(f);
}

/* ---- matching ---- */

static int term_matches(const struct term *t, const char *base, int is_main, const char *name)
{
    if (t->module) {
        int ok = (base && fnmatch(t->module, base, 0) == 0) ||
                 (is_main && fnmatch(t->module, "exe", 0) == 0);
        if (!ok) return 0;
    }
    if (!t->pattern) return 0; /* a term left half-built by a failed parse */
    if (t->is_regex) return regexec(&t->re, name, 0, NULL, 0) == 0;
    return fnmatch(t->pattern, name, 0) == 0;
}

int ftr_filter_match_ex(const struct ftr_filter *f, const char *module, int is_main,
                        const char *name)
{
    if (!f) return 1;
    if (!name) name = "";
    const char *base = NULL;
    if (module) {
        const char *slash = strrchr(module, '/');
        base = slash ? slash + 1 : module;
    }
    for (size_t i = f->n; i-- > 0;)
        if (term_matches(&f->t[i], base, is_main, name)) return !f->t[i].exclude;
    return f->includes == 0;
}

int ftr_filter_match(const struct ftr_filter *f, const char *module, const char *name)
{
    return ftr_filter_match_ex(f, module, 0, name);
}

size_t ftr_filter_includes(const struct ftr_filter *f)
{
    return f ? f->includes : 0;
}

/* ---- nearest names ---- */

/* The literal part of a pattern: its text without glob or regex metacharacters. */
static char *literal_of(const struct term *t)
{
    const char *meta = t->is_regex ? "^$.*+?()[]{}|\\" : "*?[]\\";
    char *lit = malloc(strlen(t->pattern) + 1);
    if (!lit) return NULL;
    size_t n = 0;
    for (const char *p = t->pattern; *p; p++)
        if (!strchr(meta, *p)) lit[n++] = *p;
    lit[n] = '\0';
    return lit;
}

/* Levenshtein distance of a and b, or limit + 1 once it is certain to exceed limit.
 * row has room for lb + 1 entries. */
static size_t edit_distance(const char *a, size_t la, const char *b, size_t lb, size_t limit,
                            size_t *row)
{
    if ((la > lb ? la - lb : lb - la) > limit) return limit + 1;
    for (size_t j = 0; j <= lb; j++)
        row[j] = j;
    for (size_t i = 1; i <= la; i++) {
        size_t diag = row[0], lowest;
        row[0] = lowest = i;
        for (size_t j = 1; j <= lb; j++) {
            size_t up = row[j];
            size_t best = diag + (a[i - 1] != b[j - 1]);
            if (up + 1 < best) best = up + 1;
            if (row[j - 1] + 1 < best) best = row[j - 1] + 1;
            row[j] = best;
            diag = up;
            if (best < lowest) lowest = best;
        }
        if (lowest > limit) return limit + 1;
    }
    return row[lb] > limit ? limit + 1 : row[lb];
}

size_t ftr_filter_nearest(const struct ftr_filter *f, const char *const *names, size_t n,
                          const char **out, size_t k)
{
    if (!f || !names || !out || k == 0 || n == 0 || f->includes == 0) return 0;
    if (k > n) k = n;

    char **lits = calloc(f->n, sizeof *lits);
    size_t *dist = malloc(k * sizeof *dist);
    size_t *row = NULL, rowcap = 0, found = 0;
    if (!lits || !dist) goto out;
    for (size_t i = 0; i < f->n; i++) {
        if (f->t[i].exclude) continue;
        if (!(lits[i] = literal_of(&f->t[i]))) goto out;
    }

    for (size_t j = 0; j < n; j++) {
        const char *name = names[j];
        if (!name) continue;
        size_t lb = strlen(name);
        if (lb + 1 > rowcap) {
            size_t *r = realloc(row, (lb + 1) * sizeof *row);
            if (!r) continue;
            row = r, rowcap = lb + 1;
        }
        size_t best = (size_t)-1;
        for (size_t i = 0; i < f->n; i++) {
            if (best == 0) break;
            if (!lits[i] || !lits[i][0]) continue;
            size_t la = strlen(lits[i]);
            size_t limit = la / 2 > 3 ? la / 2 : 3;
            if (best != (size_t)-1 && best - 1 < limit) limit = best - 1; /* only improvements */
            size_t d = edit_distance(lits[i], la, name, lb, limit, row);
            if (d <= limit) best = d;
        }
        if (best == (size_t)-1) continue;

        /* insert into out[0..found), kept sorted by (distance, name); skip duplicates */
        size_t pos = found;
        int dup = 0;
        for (size_t q = 0; q < found; q++) {
            int c = strcmp(name, out[q]);
            if (c == 0) {
                dup = 1;
                break;
            }
            if (pos == found && (best < dist[q] || (best == dist[q] && c < 0))) pos = q;
        }
        if (dup || pos >= k) continue;
        size_t last = found < k ? found : k - 1;
        memmove(out + pos + 1, out + pos, (last - pos) * sizeof *out);
        memmove(dist + pos + 1, dist + pos, (last - pos) * sizeof *dist);
        out[pos] = name;
        dist[pos] = best;
        if (found < k) found++;
    }
out:
    if (lits)
        for (size_t i = 0; i < f->n; i++)
            free(lits[i]);
    free(lits);
    free(dist);
    free(row);
    return found;
}
