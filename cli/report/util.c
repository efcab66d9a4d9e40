/*
 * util.c - the lowest layer of the report library (util.h): numbers and durations, the
 * buffered output, printable names, a hash map, growing arrays, a string arena, call stacks.
 * It knows no trace and calls no other file of the library.
 */
#define _GNU_SOURCE /* sigabbrev_np */
#include "util.h"

#include <errno.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *frp_signal_name(int sig, char *buf, size_t n)
{
    const char *abbrev = sig > 0 && sig < SIGRTMIN ? sigabbrev_np(sig) : NULL;
    if (abbrev)
        snprintf(buf, n, "SIG%s", abbrev);
    else if (sig >= SIGRTMIN && sig <= SIGRTMAX)
        snprintf(buf, n, sig == SIGRTMIN ? "SIGRTMIN" : "SIGRTMIN+%d", sig - SIGRTMIN);
    else
        snprintf(buf, n, "signal %d", sig);
    return buf;
}

char *frp_fmt_u64(char *p, uint64_t v)
{
    char tmp[20];
    int n = 0;
    do {
        tmp[n++] = (char)('0' + v % 10);
        v /= 10;
    } while (v);
    while (n)
        *p++ = tmp[--n];
    return p;
}

char frp_duration_marker(uint64_t ns)
{
    if (ns <= 10000) return ' ';
    if (ns <= 100000) return '+';
    if (ns <= 1000000) return '!';
    if (ns <= 10000000) return '#';
    if (ns <= 100000000) return '*';
    if (ns <= 1000000000) return '@';
    return '$';
}

size_t frp_fmt_duration(char *buf, uint64_t ns)
{
    char *p = buf;
    *p++ = ' ';
    *p++ = frp_duration_marker(ns);
    *p++ = ' ';
    unsigned frac = (unsigned)(ns % 1000);
    if (__builtin_expect(ns < 1000000, 1)) { /* below 1000 us: always 7 characters */
        unsigned us = (unsigned)(ns / 1000);
        p[0] = us >= 100 ? (char)('0' + us / 100) : ' ';
        p[1] = us >= 10 ? (char)('0' + us / 10 % 10) : ' ';
        p[2] = (char)('0' + us % 10);
        p += 3;
    } else {
        p = frp_fmt_u64(p, ns / 1000);
    }
    p[0] = '.';
    p[1] = (char)('0' + frac / 100);
    p[2] = (char)('0' + frac / 10 % 10);
    p[3] = (char)('0' + frac % 10);
    memcpy(p + 4, " us  |", 6);
    return (size_t)(p + 10 - buf);
}

int frp_out_init(struct frp_out *o, FILE *f, size_t cap)
{
    memset(o, 0, sizeof *o);
    o->f = f;
    o->buf = malloc(cap);
    if (!o->buf) return FTR_E_NOMEM;
    o->cap = cap;
    return FTR_OK;
}

void frp_out_flush(struct frp_out *o)
{
    if (o->len && !o->err && fwrite(o->buf, 1, o->len, o->f) != o->len) {
        o->err = 1;
        o->err_no = errno ? errno : EIO;
    }
    o->len = 0;
}

void frp_out_free(struct frp_out *o)
{
    if (o->buf) frp_out_flush(o);
    free(o->buf);
    o->buf = NULL;
}

void frp_out_write_slow(struct frp_out *o, const void *p, size_t n)
{
    frp_out_flush(o);
    if (n > o->cap) {
        if (!o->err && fwrite(p, 1, n, o->f) != n) {
            o->err = 1;
            o->err_no = errno ? errno : EIO;
        }
        return;
    }
    memcpy(o->buf, p, n);
    o->len = n;
}

void frp_out_spaces(struct frp_out *o, size_t n)
{
    while (n) {
        size_t k = n < 256 ? n : 256;
        memset(frp_out_room(o, k), ' ', k);
        o->len += k;
        n -= k;
    }
}

int frp_stack_grow(struct frp_stack *s)
{
    uint32_t cap = s->cap ? s->cap * 2 : 64;
    struct frp_frame *f = realloc(s->f, (size_t)cap * sizeof *f);
    if (!f) return FTR_E_NOMEM;
    s->f = f;
    s->cap = cap;
    return FTR_OK;
}

/* Makes s printable and valid UTF-8, in place: control characters and invalid bytes -> '?'. */
void frp_sanitize(char *s, size_t n)
{
    unsigned char *p = (unsigned char *)s, *end = p + n;
    while (p < end) {
        unsigned c = *p;
        if (c < 0x80) {
            if (c < 0x20 || c == 0x7f) *p = '?';
            p++;
            continue;
        }
        size_t len = 0;
        unsigned lo = 0x80, hi = 0xbf;
        if (c >= 0xc2 && c <= 0xdf) {
            len = 2;
        } else if (c >= 0xe0 && c <= 0xef) {
            len = 3;
            lo = c == 0xe0 ? 0xa0 : 0x80;
            hi = c == 0xed ? 0x9f : 0xbf;
        } else if (c >= 0xf0 && c <= 0xf4) {
            len = 4;
            lo = c == 0xf0 ? 0x90 : 0x80;
            hi = c == 0xf4 ? 0x8f : 0xbf;
        }
        int ok = len && (size_t)(end - p) >= len && p[1] >= lo && p[1] <= hi;
        for (size_t i = 2; ok && i < len; i++)
            ok = p[i] >= 0x80 && p[i] <= 0xbf;
        if (!ok) {
            *p++ = '?';
            continue;
        }
        p += len;
    }
}

/* ---- more numbers ---- */
uint64_t frp_ns_to_ticks(uint64_t ns, double ns_per_tick)
{
    if (ns_per_tick <= 0) return ns;
    double t = (double)ns / ns_per_tick;
    if (t >= 18446744073709551615.0) return UINT64_MAX;
    uint64_t k = (uint64_t)t;
    return (double)k < t ? k + 1 : k;
}

size_t frp_fmt_time(char *buf, uint64_t ns)
{
    if (ns < 1000) return (size_t)snprintf(buf, 12, "%8llu ns", (unsigned long long)ns);
    static const struct {
        uint64_t div;
        const char *unit;
    } units[] = {{1000, "us"}, {1000000, "ms"}, {1000000000, " s"}};
    int u = ns < 1000000 ? 0 : ns < 1000000000 ? 1 : 2;
    uint64_t whole = ns / units[u].div;
    unsigned frac = (unsigned)((ns % units[u].div) / (units[u].div / 1000));
    return (size_t)snprintf(buf, 40, "%4llu.%03u %s", (unsigned long long)whole, frac,
                            units[u].unit);
}

int frp_parse_duration(const char *s, const char *end, uint64_t *ns)
{
    const char *p = s;
    uint64_t whole = 0, frac = 0, fscale = 1;
    int digits = 0;
    while (p < end && *p >= '0' && *p <= '9') {
        if (whole > UINT64_MAX / 10 - 10) return -1;
        whole = whole * 10 + (uint64_t)(*p++ - '0');
        digits++;
    }
    if (p < end && *p == '.') {
        p++;
        while (p < end && *p >= '0' && *p <= '9') {
            if (fscale < 1000000000000ull) {
                frac = frac * 10 + (uint64_t)(*p - '0');
                fscale *= 10;
            }
            p++;
            digits++;
        }
    }
    if (!digits) return -1;
    size_t ulen = (size_t)(end - p);
    uint64_t mul;
    if (ulen == 2 && !memcmp(p, "ns", 2))
        mul = 1;
    else if (ulen == 2 && !memcmp(p, "us", 2))
        mul = 1000;
    else if (ulen == 2 && !memcmp(p, "ms", 2))
        mul = 1000000;
    else if (ulen == 1 && *p == 's')
        mul = 1000000000;
    else if (ulen == 0 && whole == 0 && frac == 0)
        mul = 1;
    else
        return -1;
    if (whole > UINT64_MAX / mul) return -1;
    uint64_t v = whole * mul + frac * mul / fscale;
    if (v < whole * mul) return -1;
    *ns = v;
    return 0;
}

/* ---- more output ---- */
void frp_out_printf(struct frp_out *o, const char *fmt, ...)
{
    char tmp[4096];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(tmp, sizeof tmp, fmt, ap);
    va_end(ap);
    if (n < 0) return;
    frp_out_write(o, tmp, (size_t)n < sizeof tmp ? (size_t)n : sizeof tmp - 1);
}

int frp_out_finish(struct frp_out *o)
{
    frp_out_flush(o);
    if (!o->err && fflush(o->f) != 0) {
        o->err = 1;
        o->err_no = errno ? errno : EIO;
    }
    if (o->err) {
        errno = o->err_no;
        return -1;
    }
    return 0;
}

/* ---- hash map ---- */
uint64_t frp_hash64(uint64_t x)
{
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdull;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ull;
    return x ^ (x >> 33);
}

uint64_t frp_hash_str(const char *s, size_t n)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ (unsigned char)s[i]) * 0x100000001b3ull;
    return h;
}

int frp_hmap_put(struct frp_hmap *m, uint64_t key, uint32_t val)
{
    uint32_t *v = frp_hmap_get(m, key);
    if (v) {
        *v = val;
        return FTR_OK;
    }
    if ((m->n + 1) * 2 > m->cap) {
        struct frp_hmap g = {.cap = m->cap ? m->cap * 2 : 64};
        g.keys = calloc(g.cap, sizeof *g.keys);
        g.vals = malloc(g.cap * sizeof *g.vals);
        if (!g.keys || !g.vals) {
            free(g.keys);
            free(g.vals);
            return FTR_E_NOMEM;
        }
        for (size_t i = 0; i < m->cap; i++)
            if (m->keys[i]) frp_hmap_put(&g, m->keys[i] - 1, m->vals[i]);
        free(m->keys);
        free(m->vals);
        *m = g;
    }
    size_t i = frp_hash64(key) & (m->cap - 1);
    while (m->keys[i])
        i = (i + 1) & (m->cap - 1);
    m->keys[i] = key + 1;
    m->vals[i] = val;
    m->n++;
    return FTR_OK;
}

void frp_hmap_free(struct frp_hmap *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

int frp_grow(void **arr, size_t *cap, size_t need, size_t elem)
{
    if (need <= *cap) return FTR_OK;
    size_t n = *cap ? *cap * 2 : 16;
    while (n < need)
        n *= 2;
    if (n > SIZE_MAX / elem) return FTR_E_NOMEM;
    void *p = realloc(*arr, n * elem);
    if (!p) return FTR_E_NOMEM;
    *arr = p;
    *cap = n;
    return FTR_OK;
}

/* ---- string arena ---- */
struct frp_arena_blk {
    struct frp_arena_blk *next;
    size_t used, cap;
    char data[];
};

char *frp_arena_alloc(struct frp_arena *a, size_t n)
{
    struct frp_arena_blk *b = a->head;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > 65536 ? n : 65536;
        b = malloc(sizeof *b + cap);
        if (!b) return NULL;
        b->cap = cap;
        b->used = 0;
        if (n > 65536 / 4 && a->head) { /* big string: keep filling the current block */
            b->next = a->head->next;
            a->head->next = b;
        } else {
            b->next = a->head;
            a->head = b;
        }
    }
    char *p = b->data + b->used;
    b->used += n;
    return p;
}

const char *frp_arena_str(struct frp_arena *a, const char *s, size_t n)
{
    char *p = frp_arena_alloc(a, n + 1);
    if (!p) return NULL;
    memcpy(p, s, n);
    p[n] = 0;
    frp_sanitize(p, n);
    return p;
}

void frp_arena_free(struct frp_arena *a)
{
    while (a->head) {
        struct frp_arena_blk *b = a->head;
        a->head = b->next;
        free(b);
    }
}
