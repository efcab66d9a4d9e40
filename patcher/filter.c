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
 *     by ftr_regex.h (POSIX extended syntax as glibc's regcomp reads it; our own code, so that
 *     matching allocates nothing and never calls the program's malloc).
 *     Step 1 does not split at a comma inside (...) or <...> (a C++ parameter or template
 *     argument list: "ns::f(int, int)"), unless the bracket never closes before the end of the
 *     expression: then the first such comma splits, as without brackets.
 * Matching walks the terms from the last to the first and stops at the first that matches.
 *
 * C++ names. A mangled name (_Z...) is matched in several forms, demangled once (with
 * libsupc++'s allocation-free demangler, linked in: libftrace.so depends on no C++ runtime and
 * never calls the program's malloc for it); a term matches when one of its forms does:
 *   raw        _ZN2ns3Cls6methodEi                         always
 *   name       ns::Cls::method   (no return type, no parameters; clones as .isra.0)
 *   signature  ns::Cls::method(int)   full  int ns::f<int>(int)   only for a pattern with a
 *              parameter list: a glob with '(', a regex with "\(". Such a glob is matched with
 *              every space taken out of both sides, so "f(int,int)" is "f(int, int)".
 *   and, for a glob without '<', each of those without template arguments (ns::Box::get for
 *   ns::Box<int>::get), so that a template's name selects every instantiation as a function's
 *   name selects every overload.
 */
#define _GNU_SOURCE
#include <fnmatch.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <wctype.h>

#include "ftr_filter.h"
#include "ftr_regex.h"

#define ERR_TEXT_MAX 60 /* characters of a term quoted in an error message */

struct term {
    int exclude;
    int is_regex;
    int sig;       /* the pattern has a parameter list: '(' in a glob, "\\(" in a regex */
    int tmpl;      /* a glob that names template arguments ('<' outside an operator's name) */
    char *module;  /* glob on the module's basename, or NULL: any module */
    char *pattern; /* glob or regular expression text (after '@'), unescaped; a glob with a
                      parameter list has its spaces taken out */
    /* a regular expression's compiled form (ftr_regex.h) */
    struct ftr_re re;
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

static int is_ident(char c)
{
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_';
}

/* When p (inside s) starts the word "operator" of a C++ operator name: the length of
 * "operator" and of the operator's symbols after it ("operator<<" 10, "operator()" 10,
 * "operator new" 8: the rest is a word), else 0. A ',' is never taken (operator, is rare, and
 * "operator,main" is more likely two C functions). */
static size_t operator_len(const char *s, const char *p)
{
    if (strncmp(p, "operator", 8) != 0 || (p > s && is_ident(p[-1])) || is_ident(p[8])) return 0;
    const char *q = p + 8;
    while (*q == ' ')
        q++;
    if ((q[0] == '(' && q[1] == ')') || (q[0] == '[' && q[1] == ']')) return (size_t)(q + 2 - p);
    const char *r = q;
    while (*r && strchr("+-*/%^&|~!=<>", *r))
        r++;
    return r > q ? (size_t)(r - p) : 8;
}

/* The end of the term that starts at p: the ',' that ends it, or the final '\0'. A comma
 * inside (...) or <...> (escaped parentheses count too, outside [...]; an operator's own
 * symbols do not) belongs to the term, unless a bracket is still open at the end of the
 * expression: then the term ends at the first such comma. */
static const char *term_end(const char *p)
{
    const char *start = p, *soft = NULL;
    int depth = 0;
    while (*p && !(*p == ',' && depth == 0)) {
        size_t op;
        if (*p == '\\' && p[1] != '\0') {
            if (p[1] == '(') depth++;
            if (p[1] == ')' && depth > 0) depth--;
            p += 2;
        } else if (*p == '[') {
            const char *end = bracket_end(p, NULL, NULL);
            /* skipped whole (its '(' and '<' are characters), unless it holds a ',': that
             * splits, as it always did */
            p = end && !memchr(p, ',', (size_t)(end - p)) ? end : p + 1;
        } else if ((op = operator_len(start, p)) != 0) {
            p += op;
        } else {
            if (*p == '(' || *p == '<') depth++;
            if ((*p == ')' || *p == '>') && depth > 0) depth--;
            if (*p == ',' && !soft) soft = p;
            p++;
        }
    }
    return *p == '\0' && depth > 0 && soft ? soft : p;
}

/* The pattern's properties for C++ names: a parameter list (sig), template arguments (tmpl). */
static void cxx_pattern(struct term *t, const char *pat)
{
    for (const char *p = pat; *p;) {
        size_t op;
        if (*p == '\\' && p[1] != '\0') {
            if (p[1] == '(') t->sig = 1;
            p += 2;
        } else if (*p == '[' && !t->is_regex) {
            const char *end = bracket_end(p, NULL, NULL);
            p = end ? end : p + 1;
        } else if ((op = operator_len(pat, p)) != 0) {
            p += op;
        } else {
            if (!t->is_regex && *p == '(') t->sig = 1;
            if (*p == '<') t->tmpl = 1;
            p++;
        }
    }
}

/* A glob with a parameter list, without its spaces (not those inside [...]; "\\ " too). */
static void squeeze_glob(char *s)
{
    char *w = s;
    for (char *p = s; *p;) {
        if (*p == '\\' && p[1] == ' ') {
            p += 2;
        } else if (*p == '\\' && p[1] != '\0') {
            *w++ = *p++;
            *w++ = *p++;
        } else if (*p == '[') {
            const char *end = bracket_end(p, NULL, NULL);
            size_t n = end ? (size_t)(end - p) : 1;
            memmove(w, p, n);
            w += n, p += n;
        } else if (*p == ' ') {
            p++;
        } else {
            *w++ = *p++;
        }
    }
    *w = '\0';
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
        if (ftr_re_compile(&t->re, pat, why, sizeof why) != 0) {
            term_error(err, errlen, num, raw, rawlen, "bad regular expression: %s", why);
            return -1;
        }
    } else if ((problem = glob_problem(pat, 0, why, sizeof why))) {
        term_error(err, errlen, num, raw, rawlen, "%s", problem);
        return -1;
    }
    cxx_pattern(t, pat);
    if (!(t->pattern = strdup(pat))) goto nomem;
    if (t->sig && !t->is_regex) squeeze_glob(t->pattern);
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
        while (*(p = term_end(p)) == ',')
            nterms++, p++;
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
        const char *raw = p, *end = term_end(p);
        size_t len = 0;
        for (; p < end; p++) {
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
        ftr_re_free(&f->t[i].re);
        free(f->t[i].module);
        free(f->t[i].pattern);
    }
    free(f);
}

/* ---- C++ names ---- */

/* libsupc++'s demangler, linked in from libsupc++.a (CMakeLists.txt): it writes the name in
 * pieces through a callback and keeps its state on the stack, so it allocates nothing (the
 * process's __cxa_demangle would call the program's malloc from the preload). 0: demangled;
 * else not a mangled name it knows. */
int __gcclibcxx_demangle_callback(const char *mangled,
                                  void (*callback)(const char *, size_t, void *), void *opaque);

struct dm_out {
    char *buf;
    size_t len, cap;
    int nomem;
};

static void dm_put(const char *s, size_t n, void *opaque)
{
    struct dm_out *o = opaque;
    if (o->nomem) return;
    if (o->len + n + 1 > o->cap) {
        size_t cap = o->cap ? o->cap : 256;
        while (cap < o->len + n + 1)
            cap *= 2;
        char *b = realloc(o->buf, cap);
        if (!b) {
            o->nomem = 1;
            return;
        }
        o->buf = b;
        o->cap = cap;
    }
    memcpy(o->buf + o->len, s, n);
    o->len += n;
    o->buf[o->len] = 0;
}

/* Where the parts of a demangled name are: the name starts at start (after a template
 * function's return type), its parameter list is [open, close], the clone suffixes
 * (" [clone .isra.0]") start at end. params is 0 when there is no parameter list. */
struct cxx_parts {
    size_t start, open, close, end, n;
    int params;
};

/* Index just past the last space at nesting depth 0 in s[0..n) (0 when there is none). */
static size_t after_return_type(const char *s, size_t n)
{
    int depth = 0;
    size_t cut = 0;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (c == '<' || c == '(' || c == '[' || c == '{')
            depth++;
        else if ((c == '>' || c == ')' || c == ']' || c == '}') && depth > 0)
            depth--;
        else if (c == ' ' && depth == 0)
            cut = i + 1;
    }
    return cut;
}

static struct cxx_parts cxx_parts_of(const char *s)
{
    struct cxx_parts c = {0};
    c.n = strlen(s);
    const char *clone = strstr(s, " [clone ");
    c.end = clone ? (size_t)(clone - s) : c.n;
    /* the parameter list: the parentheses closed by the last ')' before the suffix */
    size_t close = c.end;
    while (close > 0 && s[close - 1] != ')')
        close--;
    if (close == 0) return c;
    close--;
    int depth = 0;
    size_t open = close + 1;
    for (size_t i = close + 1; i-- > 0;) {
        if (s[i] == ')') depth++;
        if (s[i] == '(' && --depth == 0) {
            open = i;
            break;
        }
    }
    if (open > close || open == 0) return c;
    /* the return type of a template function: before the last top-level space, which must
     * not be part of an operator's name ("operator new", "operator int") */
    const char *op = strstr(s, "operator");
    size_t name_end = op && (size_t)(op - s) < open ? (size_t)(op - s) : open;
    c.start = after_return_type(s, name_end);
    c.open = open, c.close = close, c.params = 1;
    return c;
}

/* The name form of a demangled name, into out (room for strlen(s) + 1):
 * "ret ns::f<T>(args) const [clone .isra.0] [clone .cold]" -> "ns::f<T>.isra.0.cold". */
static void name_form(const char *s, char *out)
{
    struct cxx_parts c = cxx_parts_of(s);
    if (!c.params) {
        memcpy(out, s, c.n + 1);
        return;
    }
    size_t len = c.open - c.start;
    memmove(out, s + c.start, len);
    /* " [clone .isra.0] [clone .cold]" -> ".isra.0.cold", as the suffixes of C symbols read */
    for (size_t i = c.end; i < c.n;) {
        if (strncmp(s + i, " [clone ", 8) != 0) break;
        i += 8;
        while (i < c.n && s[i] != ']')
            out[len++] = s[i++];
        i++;
    }
    out[len] = 0;
}

char *ftr_demangle(const char *sym, enum ftr_demangle_form form)
{
    if (!sym || sym[0] != '_' || sym[1] != 'Z') return NULL;
    struct dm_out o = {0};
    if (__gcclibcxx_demangle_callback(sym, dm_put, &o) != 0 || o.nomem || !o.len) {
        free(o.buf);
        return NULL;
    }
    char *d = o.buf;
    if (!d) return NULL;
    if (form == FTR_DEMANGLE_NAME) {
        name_form(d, d);
    } else if (form == FTR_DEMANGLE_SIGNATURE) {
        struct cxx_parts c = cxx_parts_of(d);
        memmove(d, d + c.start, c.n - c.start + 1);
    }
    return d;
}

/* s without its template argument lists (an operator's '<' and '>' stay), into out (room for
 * strlen(s) + 1). @return 1 when something was taken out. */
static int strip_templates(const char *s, char *out)
{
    int depth = 0, changed = 0;
    char *w = out;
    for (const char *p = s; *p;) {
        size_t op = operator_len(s, p);
        if (op) {
            if (depth == 0) memcpy(w, p, op), w += op;
            p += op;
        } else if (*p == '<') {
            depth++, p++, changed = 1;
        } else if (*p == '>' && depth > 0) {
            depth--, p++;
        } else {
            if (depth == 0) *w++ = *p;
            p++;
        }
    }
    *w = '\0';
    return changed;
}

static void squeeze(const char *s, char *out)
{
    for (; *s; s++)
        if (*s != ' ') *out++ = *s;
    *out = '\0';
}

/* The forms of one symbol, each made when a term first needs it. */
enum { F_NAME, F_SIG, F_FULL, F_NFORMS };
struct forms {
    const char *raw;
    const char *full; /* demangled, or NULL: not a C++ name */
    char *buf;        /* 4 * F_NFORMS slots of strlen(full) + 1 */
    size_t slot;
    const char *v[F_NFORMS][4]; /* see form_of() */
    uint8_t made[F_NFORMS];     /* bit i: v[k][i] is made (NULL: the same as variant i - 1) */
    int nomem;
};

static char *form_slot(struct forms *fs, int k, int variant)
{
    if (!fs->buf) {
        fs->slot = strlen(fs->full) + 1;
        if (!(fs->buf = malloc(4 * F_NFORMS * fs->slot))) {
            fs->nomem = 1;
            return NULL;
        }
    }
    return fs->buf + (size_t)(4 * k + variant) * fs->slot;
}

/* Form k of fs: variant 0 plain, 1 without template arguments, 2 plain without spaces, 3
 * without template arguments and spaces; NULL for 1 and 3 when there are no template
 * arguments (the same as 0 and 2). */
static const char *form_of(struct forms *fs, int k, int variant)
{
    if (!fs->full || fs->nomem) return NULL;
    if (fs->made[k] & (1u << variant)) return fs->v[k][variant];
    if (variant == 0) {
        if (k == F_FULL) {
            fs->v[k][0] = fs->full;
        } else if (k == F_SIG) {
            fs->v[k][0] = fs->full + cxx_parts_of(fs->full).start;
        } else {
            char *out = form_slot(fs, k, 0);
            if (!out) return NULL;
            name_form(fs->full, out);
            fs->v[k][0] = out;
        }
    } else {
        const char *from = form_of(fs, k, variant == 3 ? 2 : 0);
        char *out = from ? form_slot(fs, k, variant) : NULL;
        if (!out) return NULL;
        if (variant == 2)
            squeeze(from, out), fs->v[k][2] = out;
        else
            fs->v[k][variant] = strip_templates(from, out) ? out : NULL;
    }
    fs->made[k] |= (uint8_t)(1u << variant);
    return fs->v[k][variant];
}

static int text_matches(const struct term *t, const char *text)
{
    if (!text) return 0;
    if (t->is_regex) return ftr_re_match(&t->re, text);
    return fnmatch(t->pattern, text, 0) == 0;
}

static int name_matches(const struct term *t, struct forms *fs)
{
    if (text_matches(t, fs->raw)) return 1;
    if (!fs->full) return 0;
    if (t->is_regex) {
        if (text_matches(t, form_of(fs, F_NAME, 0))) return 1;
        return t->sig &&
               (text_matches(t, form_of(fs, F_SIG, 0)) || text_matches(t, form_of(fs, F_FULL, 0)));
    }
    if (!t->sig)
        return text_matches(t, form_of(fs, F_NAME, 0)) ||
               (!t->tmpl && text_matches(t, form_of(fs, F_NAME, 1)));
    for (int k = 0; k < F_NFORMS; k++)
        if (text_matches(t, form_of(fs, k, 2)) || (!t->tmpl && text_matches(t, form_of(fs, k, 3))))
            return 1;
    return 0;
}

/* ---- matching ---- */

static int term_matches(const struct term *t, const char *base, int is_main, struct forms *fs)
{
    if (t->module) {
        int ok = (base && fnmatch(t->module, base, 0) == 0) ||
                 (is_main && fnmatch(t->module, "exe", 0) == 0);
        if (!ok) return 0;
    }
    if (!t->pattern) return 0; /* a term left half-built by a failed parse */
    return name_matches(t, fs);
}

int ftr_filter_match_dem(const struct ftr_filter *f, const char *module, int is_main,
                         const char *name, const char *demangled)
{
    if (!f) return 1;
    if (!name) name = "";
    const char *base = NULL;
    if (module) {
        const char *slash = strrchr(module, '/');
        base = slash ? slash + 1 : module;
    }
    struct forms fs = {.raw = name, .full = demangled};
    int sel = f->includes == 0;
    for (size_t i = f->n; i-- > 0;)
        if (term_matches(&f->t[i], base, is_main, &fs)) {
            sel = !f->t[i].exclude;
            break;
        }
    free(fs.buf);
    return sel;
}

int ftr_filter_match_ex(const struct ftr_filter *f, const char *module, int is_main,
                        const char *name)
{
    if (!f || f->n == 0) return 1;
    char *dem = ftr_demangle(name, FTR_DEMANGLE_FULL);
    int sel = ftr_filter_match_dem(f, module, is_main, name, dem);
    free(dem);
    return sel;
}

int ftr_filter_match(const struct ftr_filter *f, const char *module, const char *name)
{
    return ftr_filter_match_ex(f, module, 0, name);
}

size_t ftr_filter_includes(const struct ftr_filter *f)
{
    return f ? f->includes : 0;
}

size_t ftr_filter_terms(const struct ftr_filter *f)
{
    return f ? f->n : 0;
}

int ftr_filter_waits_for_module(const struct ftr_filter *f, const char *const *loaded, size_t n)
{
    for (size_t i = 0; f && i < f->n; i++) {
        const struct term *t = &f->t[i];
        if (t->exclude || !t->module || fnmatch(t->module, "exe", 0) == 0) continue;
        int found = 0;
        for (size_t j = 0; j < n && !found; j++) {
            if (!loaded[j]) continue;
            const char *slash = strrchr(loaded[j], '/');
            found = fnmatch(t->module, slash ? slash + 1 : loaded[j], 0) == 0;
        }
        if (!found) return 1;
    }
    return 0;
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
    char **keys = calloc(k, sizeof *keys); /* what out[] is sorted by: the name, demangled */
    size_t *row = NULL, rowcap = 0, found = 0;
    int sig = 0;
    if (!lits || !dist || !keys) goto out;
    for (size_t i = 0; i < f->n; i++) {
        if (f->t[i].exclude) continue;
        if (!(lits[i] = literal_of(&f->t[i]))) goto out;
        sig |= f->t[i].sig && !f->t[i].is_regex;
    }

    for (size_t j = 0; j < n; j++) {
        const char *name = names[j];
        if (!name) continue;
        /* the texts to compare: the name, its demangled name, its squeezed signature */
        const char *text[3] = {name, NULL, NULL};
        char *dem = ftr_demangle(name, FTR_DEMANGLE_SIGNATURE), *dname = NULL;
        if (dem) {
            dname = malloc(strlen(dem) + 1);
            if (dname) name_form(dem, dname);
            text[1] = dname;
            if (sig) squeeze(dem, dem), text[2] = dem;
        }
        size_t best = (size_t)-1;
        for (int x = 0; x < 3; x++) {
            if (!text[x]) continue;
            size_t lb = strlen(text[x]);
            if (lb + 1 > rowcap) {
                size_t *r = realloc(row, (lb + 1) * sizeof *row);
                if (!r) continue;
                row = r, rowcap = lb + 1;
            }
            for (size_t i = 0; i < f->n; i++) {
                if (best == 0) break;
                if (!lits[i] || !lits[i][0]) continue;
                if (x == 2 && !(f->t[i].sig && !f->t[i].is_regex)) continue;
                size_t la = strlen(lits[i]);
                size_t limit = la / 2 > 3 ? la / 2 : 3;
                if (best != (size_t)-1 && best - 1 < limit) limit = best - 1; /* improvements */
                size_t d = edit_distance(lits[i], la, text[x], lb, limit, row);
                if (d <= limit) best = d;
            }
        }
        const char *key = dname ? dname : name;
        if (best == (size_t)-1) goto next;

        /* insert into out[0..found), kept sorted by (distance, key); skip duplicates */
        size_t pos = found;
        int dup = 0;
        for (size_t q = 0; q < found; q++) {
            int c = strcmp(key, keys[q]);
            if (c == 0) { /* the same name, or another overload of it */
                dup = 1;
                break;
            }
            if (pos == found && (best < dist[q] || (best == dist[q] && c < 0))) pos = q;
        }
        if (dup || pos >= k) goto next;
        char *kcopy = strdup(key);
        if (!kcopy) goto next;
        if (found == k) free(keys[k - 1]);
        size_t last = found < k ? found : k - 1;
        memmove(out + pos + 1, out + pos, (last - pos) * sizeof *out);
        memmove(dist + pos + 1, dist + pos, (last - pos) * sizeof *dist);
        memmove(keys + pos + 1, keys + pos, (last - pos) * sizeof *keys);
        out[pos] = name;
        dist[pos] = best;
        keys[pos] = kcopy;
        if (found < k) found++;
    next:
        free(dem);
        free(dname);
    }
out:
    if (lits)
        for (size_t i = 0; i < f->n; i++)
            free(lits[i]);
    if (keys)
        for (size_t i = 0; i < found; i++)
            free(keys[i]);
    free(lits);
    free(dist);
    free(keys);
    free(row);
    return found;
}
