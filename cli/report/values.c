/*
 * values.c - argument and return values as text (values.h).
 */
#include "values.h"

#include "ftr_values.h"
#include "names.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* C escapes of one byte into out (at least 5 bytes). @return the length */
static size_t esc(unsigned char c, char quote, char *out)
{
    static const char names[] = "\a\b\f\n\r\t\v";
    static const char letters[] = "abfnrtv";
    const char *e = c ? strchr(names, c) : NULL;
    if (e) return (size_t)sprintf(out, "\\%c", letters[e - names]);
    if (c == '\\' || c == (unsigned char)quote) return (size_t)sprintf(out, "\\%c", c);
    if (c < 0x20 || c >= 0x7f) return (size_t)sprintf(out, "\\x%02x", c);
    out[0] = (char)c;
    return 1;
}

size_t frp_value_text(const struct ftr_value *x, char *buf, size_t cap)
{
    char t[4 * FTR_VALUES_STR_MAX + 16];
    size_t n = 0;
    switch (x->fmt) {
    case FTR_VF_SIGNED:
    case FTR_VF_ENUM:
        n = (size_t)snprintf(t, sizeof t, "%" PRId64, ftr_value_signed(x));
        break;
    case FTR_VF_UNSIGNED:
        n = (size_t)snprintf(t, sizeof t, "%" PRIu64, x->bits);
        break;
    case FTR_VF_HEX:
        n = (size_t)snprintf(t, sizeof t, "%#" PRIx64, x->bits);
        break;
    case FTR_VF_PTR:
        n = x->bits ? (size_t)snprintf(t, sizeof t, "%#" PRIx64, x->bits)
                    : (size_t)snprintf(t, sizeof t, "NULL");
        break;
    case FTR_VF_BOOL:
        n = (size_t)snprintf(t, sizeof t, "%s", x->bits ? "true" : "false");
        break;
    case FTR_VF_CHAR:
        t[n++] = '\'';
        n += esc((unsigned char)x->bits, '\'', t + n);
        t[n++] = '\'';
        t[n] = 0;
        break;
    case FTR_VF_FLOAT: {
        double d;
        if (x->size == 4) {
            float f;
            uint32_t b = (uint32_t)x->bits;
            memcpy(&f, &b, sizeof f);
            d = f;
        } else {
            memcpy(&d, &x->bits, sizeof d);
        }
        /* the shortest text that reads back as the same number */
        n = (size_t)snprintf(t, sizeof t, "%.*g", x->size == 4 ? 9 : 17, d);
        for (int prec = 1; prec <= (x->size == 4 ? 9 : 17); prec++) {
            char s[40];
            snprintf(s, sizeof s, "%.*g", prec, d);
            if (x->size == 4 ? (float)strtod(s, NULL) == (float)d : strtod(s, NULL) == d) {
                n = (size_t)snprintf(t, sizeof t, "%s", s);
                break;
            }
        }
        break;
    }
    case FTR_VF_STR:
        if (x->str_state == FTR_STR_NULL) {
            n = (size_t)snprintf(t, sizeof t, "NULL");
            break;
        }
        if (x->str_state == FTR_STR_BAD) {
            n = (size_t)snprintf(t, sizeof t, "(bad)");
            break;
        }
        t[n++] = '"';
        for (uint32_t i = 0; i < x->str_len; i++)
            n += esc((unsigned char)x->str[i], '"', t + n);
        t[n++] = '"';
        if (x->str_state == FTR_STR_TRUNCATED) n += (size_t)sprintf(t + n, "...");
        t[n] = 0;
        break;
    default:
        n = (size_t)snprintf(t, sizeof t, "?");
    }
    if (cap) {
        size_t k = n < cap ? n : cap - 1;
        memcpy(buf, t, k);
        buf[k] = 0;
        return k;
    }
    return 0;
}

/* appends s to buf (cap bytes) at *n */
static void put(char *buf, size_t cap, size_t *n, const char *s)
{
    size_t l = strlen(s);
    if (*n + l >= cap) l = *n < cap - 1 ? cap - 1 - *n : 0;
    memcpy(buf + *n, s, l);
    *n += l;
    buf[*n] = 0;
}

int frp_values_typed(const uint8_t *v, uint32_t len)
{
    return len >= 2 && (v[1] & FTR_VAL_DWARF);
}

size_t frp_values_named(const uint8_t *v, uint32_t len, const struct frp_params *ps, char *buf,
                        size_t cap)
{
    if (!cap) return 0;
    const uint8_t *p = v, *end = v + len;
    size_t n = 0;
    struct ftr_value x, nx;
    int rc = ftr_values_next(&p, end, &x), open = 0;
    buf[0] = 0;
    for (int first = 1; rc == 1; first = 0) {
        const uint8_t *q = p;
        int nrc = ftr_values_next(&q, end, &nx);
        unsigned k = x.index & ~FTR_VAL_DWARF;
        int named = (x.index & FTR_VAL_DWARF) != 0;
        if (!open) {
            if (!first) put(buf, cap, &n, ", ");
            const char *nm = named && ps && k >= 1 && k <= ps->n ? ps->name[k] : NULL;
            if (nm) {
                put(buf, cap, &n, nm);
                put(buf, cap, &n, "=");
            }
            /* the register parts of one struct come one after the other, with one index */
            open = named && nrc == 1 && nx.index == x.index;
            if (open) put(buf, cap, &n, "{");
        } else {
            put(buf, cap, &n, ", ");
        }
        const char *en = NULL;
        if (named && x.fmt == FTR_VF_ENUM) { /* an unsigned enum's values are not negative */
            en = frp_enumerator(ps, k, ftr_value_signed(&x));
            if (!en) en = frp_enumerator(ps, k, (int64_t)x.bits);
        }
        char t[4 * FTR_VALUES_STR_MAX + 16];
        if (en)
            put(buf, cap, &n, en);
        else if (frp_value_text(&x, t, sizeof t))
            put(buf, cap, &n, t);
        if (open && !(nrc == 1 && nx.index == x.index)) {
            put(buf, cap, &n, "}");
            open = 0;
        }
        p = q;
        x = nx;
        rc = nrc;
    }
    if (rc < 0) {
        snprintf(buf, cap, "?");
        return strlen(buf);
    }
    return n;
}

size_t frp_values_text(const uint8_t *v, uint32_t len, char *buf, size_t cap)
{
    return frp_values_named(v, len, NULL, buf, cap);
}
