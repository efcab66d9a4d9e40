/*
 * values.c - argument and return values as text (values.h).
 */
#include "values.h"

#include "ftr_values.h"

#include <inttypes.h>
#include <stdio.h>
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
        n = (size_t)snprintf(t, sizeof t, "%g", d);
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

size_t frp_values_text(const uint8_t *v, uint32_t len, char *buf, size_t cap)
{
    if (!cap) return 0;
    const uint8_t *p = v, *end = v + len;
    size_t n = 0;
    struct ftr_value x;
    int rc, first = 1;
    buf[0] = 0;
    while ((rc = ftr_values_next(&p, end, &x)) == 1) {
        if (!first && n + 2 < cap) {
            memcpy(buf + n, ", ", 2);
            n += 2;
        }
        first = 0;
        n += frp_value_text(&x, buf + n, cap - n);
    }
    if (rc < 0) {
        snprintf(buf, cap, "?");
        return strlen(buf);
    }
    buf[n < cap ? n : cap - 1] = 0;
    return n < cap ? n : cap - 1;
}
