/*
 * argspec.c - the argument specs of -A and -R (ftr_argspec.h): parsing and matching.
 *
 * Plain C, malloc/free only (in libftrace.so: the tracer's own heap); at start and from the
 * control thread, never in a hook.
 */
#include "ftr_argspec.h"
#include "ftr_filter.h"
#include "ftr_format.h"
#include "ftr_values.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char fmt_letters[] = "duxcpbefs"; /* enum ftr_val_fmt order; 'i' reads as 'd' */

static int starts_item(const char *p)
{
    return !strncmp(p, "arg", 3) || !strncmp(p, "fparg", 5) || !strncmp(p, "retval", 6);
}

/* Reads "8|16|32|64" at *p into *bytes. @return 1 if there was a number (valid or not: then
 * *bytes is 0), 0 if none. */
static int read_size(const char **p, unsigned *bytes)
{
    if (**p < '0' || **p > '9') return 0;
    char *e;
    unsigned long bits = strtoul(*p, &e, 10);
    *p = e;
    *bytes = bits == 8 || bits == 16 || bits == 32 || bits == 64 ? (unsigned)bits / 8 : 0;
    return 1;
}

static int bad(char *err, size_t errlen, const char *spec, const char *why)
{
    snprintf(err, errlen, "bad argument spec '%s': %s", spec, why);
    return -1;
}

/* One item [p, e) of spec (for messages). */
static int parse_item(const char *p, const char *e, const char *spec, struct ftr_argitem *it,
                      char *err, size_t errlen)
{
    char one[64];
    size_t len = (size_t)(e - p);
    if (!len) return bad(err, errlen, spec, "empty item");
    if (len >= sizeof one) return bad(err, errlen, spec, "item too long");
    memcpy(one, p, len);
    one[len] = 0;
    const char *q = one;
    *it = (struct ftr_argitem){0};
    if (!strncmp(q, "fparg", 5)) {
        it->src = FTR_AS_FPARG;
        q += 5;
    } else if (!strncmp(q, "arg", 3)) {
        it->src = FTR_AS_ARG;
        q += 3;
    } else if (!strncmp(q, "retval", 6)) {
        it->src = FTR_AS_RETVAL;
        q += 6;
    } else {
        return bad(err, errlen, spec, "an item is argN, fpargN or retval");
    }
    if (it->src != FTR_AS_RETVAL) {
        if (*q < '0' || *q > '9') return bad(err, errlen, spec, "argument number missing");
        char *end;
        unsigned long n = strtoul(q, &end, 10);
        q = end;
        if (n == 0) return bad(err, errlen, spec, "argument numbers start at 1");
        if (it->src == FTR_AS_FPARG && n > 8)
            return bad(err, errlen, spec, "fparg goes up to fparg8 (xmm0..xmm7)");
        if (n > 32) return bad(err, errlen, spec, "argument number above 32");
        it->n = (uint8_t)n;
    }
    unsigned fmt = FTR_VF_SIGNED, bytes = 8;
    if (it->src == FTR_AS_FPARG) fmt = FTR_VF_FLOAT;
    if (*q == '/') {
        q++;
        unsigned sz = 0;
        if (it->src == FTR_AS_FPARG) {
            if (!read_size(&q, &sz))
                return bad(err, errlen, spec, "fparg takes a size: /32 or /64");
        } else {
            char c = *q == 'i' ? 'd' : *q;
            const char *l = c ? strchr(fmt_letters, c) : NULL;
            if (!l) return bad(err, errlen, spec, "unknown format (one of d i u x c p b e s f)");
            fmt = (unsigned)(l - fmt_letters);
            q++;
            bytes = fmt == FTR_VF_CHAR || fmt == FTR_VF_BOOL ? 1 : fmt == FTR_VF_ENUM ? 4 : 8;
            if (!read_size(&q, &sz)) sz = bytes;
        }
        if (!sz) return bad(err, errlen, spec, "sizes are 8, 16, 32 or 64 bits");
        bytes = sz;
        if (fmt == FTR_VF_FLOAT && bytes != 4 && bytes != 8)
            return bad(err, errlen, spec, "floating point is 32 or 64 bits");
        if (fmt == FTR_VF_STR) bytes = 8;
    }
    if (*q) return bad(err, errlen, spec, "junk after an item");
    it->fmt = (uint8_t)fmt;
    it->size = (uint8_t)bytes;
    return 0;
}

/* The start of the item list in [s, e): the last '@' after a non-empty pattern that starts an
 * item, or NULL. */
static const char *find_list(const char *s, const char *e)
{
    for (const char *p = e; p > s + 1;) {
        p--;
        if (*p == '@' && starts_item(p + 1)) return p;
    }
    return NULL;
}

static int parse_one(const char *s, const char *e, int retval, struct ftr_argspec *sp, char *err,
                     size_t errlen)
{
    while (s < e && (*s == ' ' || *s == '\t'))
        s++;
    while (e > s && (e[-1] == ' ' || e[-1] == '\t'))
        e--;
    char *text = malloc((size_t)(e - s) + 1);
    if (!text) return bad(err, errlen, "", "out of memory");
    memcpy(text, s, (size_t)(e - s));
    text[e - s] = 0;
    *sp = (struct ftr_argspec){.text = text};
    if (!*text) {
        free(text);
        return bad(err, errlen, "", "empty spec");
    }
    const char *at = find_list(text, text + strlen(text));
    size_t plen = at ? (size_t)(at - text) : strlen(text);
    char *pat = malloc(plen + 1);
    if (!pat) goto nomem;
    memcpy(pat, text, plen);
    pat[plen] = 0;
    char ferr[256];
    sp->filter = ftr_filter_parse(pat, ferr, sizeof ferr);
    free(pat);
    if (!sp->filter) {
        bad(err, errlen, text, ferr);
        goto fail;
    }
    if (!ftr_filter_includes(sp->filter)) {
        bad(err, errlen, text, "the pattern selects no function by name");
        goto fail;
    }
    if (!at) {
        sp->from_dwarf = 1;
        if (retval) {
            sp->nitems = 1;
            sp->items[0] = (struct ftr_argitem){FTR_AS_RETVAL, 0, FTR_VF_SIGNED, 8};
        }
        return 0;
    }
    for (const char *p = at + 1;;) {
        const char *c = strchr(p, ',');
        const char *ie = c ? c : p + strlen(p);
        if (sp->nitems == FTR_ARGSPEC_MAX) {
            bad(err, errlen, text, "more than 12 items");
            goto fail;
        }
        if (parse_item(p, ie, text, &sp->items[sp->nitems], err, errlen)) goto fail;
        sp->nitems++;
        if (ftr_argitems_bytes(sp->items, sp->nitems) > FTR_VALUES_MAX_BYTES) {
            bad(err, errlen, text,
                "more values than one call's list holds (264 bytes; a string "
                "takes up to 53)");
            goto fail;
        }
        if (!c) break;
        p = c + 1;
    }
    return 0;
nomem:
    bad(err, errlen, text, "out of memory");
fail:
    ftr_filter_free(sp->filter);
    free(sp->text);
    *sp = (struct ftr_argspec){0};
    return -1;
}

int ftr_argspecs_parse(const char *text, int retval, struct ftr_argspecs *out, char *err,
                       size_t errlen)
{
    if (!text || !*text) return 0;
    size_t cnt = 1;
    for (const char *p = text; *p; p++)
        cnt += *p == ';';
    struct ftr_argspec *v = realloc(out->v, (out->n + cnt) * sizeof *v);
    if (!v) return bad(err, errlen, text, "out of memory");
    out->v = v;
    size_t n0 = out->n;
    for (const char *p = text;;) {
        const char *e = strchr(p, ';');
        if (!e) e = p + strlen(p);
        if (parse_one(p, e, retval, &v[out->n], err, errlen)) {
            while (out->n > n0) {
                out->n--;
                ftr_filter_free(v[out->n].filter);
                free(v[out->n].text);
            }
            return -1;
        }
        out->n++;
        if (!*e) break;
        p = e + 1;
    }
    return 0;
}

void ftr_argspecs_free(struct ftr_argspecs *s)
{
    for (size_t i = 0; i < s->n; i++) {
        ftr_filter_free(s->v[i].filter);
        free(s->v[i].text);
    }
    free(s->v);
    *s = (struct ftr_argspecs){0};
}

const struct ftr_argspec *ftr_argspecs_match(const struct ftr_argspecs *s, const char *module,
                                             int is_main, const char *name, const char *demangled)
{
    for (size_t i = s->n; i-- > 0;)
        if (ftr_filter_match_dem(s->v[i].filter, module, is_main, name, demangled)) return &s->v[i];
    return NULL;
}

size_t ftr_argitems_bytes(const struct ftr_argitem *it, size_t n)
{
    size_t b = 0;
    for (size_t i = 0; i < n; i++)
        b += it[i].fmt == FTR_VF_STR ? 4 + FTR_VALUES_STR_MAX + 1 : 2 + (size_t)it[i].size;
    return (b + FTR_VALUES_SLOT_BYTES - 1) / FTR_VALUES_SLOT_BYTES * FTR_VALUES_SLOT_BYTES;
}

void ftr_argitem_text(const struct ftr_argitem *it, char *buf, size_t len)
{
    static const char *const src[] = {"arg", "fparg", "retval"};
    char num[8] = "";
    if (it->src != FTR_AS_RETVAL) snprintf(num, sizeof num, "%u", it->n);
    if (it->src == FTR_AS_FPARG)
        snprintf(buf, len, "fparg%s/%u", num, it->size * 8u);
    else if (it->fmt == FTR_VF_STR)
        snprintf(buf, len, "%s%s/s", src[it->src], num);
    else
        snprintf(buf, len, "%s%s/%c%u", src[it->src], num,
                 it->fmt < FTR_VF__COUNT ? fmt_letters[it->fmt] : '?', it->size * 8u);
}
