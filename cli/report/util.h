/*
 * util.h - the lowest layer of the report library (util.c): what knows nothing of traces.
 * Names with their length, tick and duration arithmetic and formatting, printable text,
 * buffered output, a hash map, growing arrays, a string arena and call stacks.
 */
#ifndef FTR_REPORT_UTIL_H
#define FTR_REPORT_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "ftr_format.h"

#ifdef __cplusplus
extern "C" {
#endif

/* A string with its length (names are printed for every event: no strlen on the hot path). */
struct frp_name {
    const char *s;
    uint32_t len;
};

/* ---- time ---- */
/*! frp_ticks_to_ns() : ticks * ns_per_tick, rounded to the nearest ns. */
static inline uint64_t frp_ticks_to_ns(uint64_t ticks, double ns_per_tick)
{
    double ns = (double)ticks * ns_per_tick + 0.5;
    return ns >= 18446744073709551615.0 ? UINT64_MAX : (uint64_t)ns;
}
/*! frp_ns_to_ticks() : the inverse, rounded up (so that "at least ns" stays true). */
uint64_t frp_ns_to_ticks(uint64_t ns, double ns_per_tick);
/*! frp_duration_marker() : the kernel's marker for a duration: '$' > 1 s, '@' > 100 ms,
 *  '*' > 10 ms, '#' > 1 ms, '!' > 100 us, '+' > 10 us, else ' '. */
char frp_duration_marker(uint64_t ns);
#define FRP_DURATION_MAX 40 /* room frp_fmt_duration() may need */
/*! frp_fmt_duration() : writes the duration column, from after "TID)" up to and including
 *  the '|': " M %7.3f us  |" (M the marker) = 16 characters, more for >= 1000 s.
 *  No NUL is written. @return the length written */
size_t frp_fmt_duration(char *buf, uint64_t ns);
/*! frp_fmt_time() : a duration with a unit that fits it, right-aligned in 11 characters:
 *  "     318 ns", "   1.402 us", "  12.206 ms", "   3.000  s". NUL-terminated. @return length */
size_t frp_fmt_time(char *buf, uint64_t ns);
/*! frp_sanitize() : makes s printable and valid UTF-8 in place (control characters and bytes
 *  of invalid sequences become '?'), so that names print on one line and JSON stays valid. */
void frp_sanitize(char *s, size_t n);
/*! frp_fmt_u64() : decimal digits of v at p. @return the end of what was written */
char *frp_fmt_u64(char *p, uint64_t v);
/*! frp_signal_name() : "SIGSEGV", "SIGRTMIN+2" (glibc's numbering: SIGRTMIN is 34), or
 *  "signal 70" for a number Linux does not have. NUL-terminated in buf (16 bytes are enough).
 *  @return buf */
char *frp_signal_name(int sig, char *buf, size_t n);
/*! frp_parse_duration() : "10us", "1.5ms", "2s", "300ns", "0" -> ns. @return 0 or -1 */
int frp_parse_duration(const char *s, const char *end, uint64_t *ns);

/* ---- buffered output (big blocks to a FILE *) ---- */
struct frp_out {
    FILE *f;
    char *buf;
    size_t len, cap;
    int err; /* a write failed (errno kept in err_no) */
    int err_no;
};
int frp_out_init(struct frp_out *o, FILE *f, size_t cap); /* FTR_OK or FTR_E_NOMEM */
void frp_out_flush(struct frp_out *o);                    /* to the FILE (not fflush) */
void frp_out_free(struct frp_out *o);                     /* flushes first */
void frp_out_write_slow(struct frp_out *o, const void *p, size_t n);
void frp_out_spaces(struct frp_out *o, size_t n);
/*! frp_out_printf() : formatted text (short pieces: at most 4096 bytes). */
void frp_out_printf(struct frp_out *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/*! frp_out_finish() : flushes the buffer and the FILE. @return 0, or -1 with errno when a write
 *  failed (now or before) */
int frp_out_finish(struct frp_out *o);
static inline void frp_out_write(struct frp_out *o, const void *p, size_t n)
{
    if (__builtin_expect(o->len + n <= o->cap, 1)) {
        __builtin_memcpy(o->buf + o->len, p, n);
        o->len += n;
    } else {
        frp_out_write_slow(o, p, n);
    }
}
#define frp_out_lit(o, s) frp_out_write((o), (s), sizeof(s) - 1)
static inline void frp_out_str(struct frp_out *o, const char *s)
{
    frp_out_write(o, s, __builtin_strlen(s));
}
/* Returns room for n bytes (n small next to cap) at the end of the buffer; the caller then
 * adds what it used to o->len. */
static inline char *frp_out_room(struct frp_out *o, size_t n)
{
    if (__builtin_expect(o->len + n > o->cap, 0)) frp_out_flush(o);
    return o->buf + o->len;
}

/* ---- hash map uint64 -> uint32 (open addressing) ---- */
struct frp_hmap {
    uint64_t *keys; /* key + 1; 0 = empty slot */
    uint32_t *vals;
    size_t cap, n;
};
uint64_t frp_hash64(uint64_t x);
uint64_t frp_hash_str(const char *s, size_t n);
static inline uint32_t *frp_hmap_get(const struct frp_hmap *m, uint64_t key)
{
    if (!m->cap) return NULL;
    for (size_t i = frp_hash64(key) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
        if (m->keys[i] == key + 1) return &m->vals[i];
        if (!m->keys[i]) return NULL;
    }
}
int frp_hmap_put(struct frp_hmap *m, uint64_t key, uint32_t val); /* FTR_OK or FTR_E_NOMEM */
void frp_hmap_free(struct frp_hmap *m);
/*! frp_grow() : makes room for need elements of elem bytes in *arr (capacity *cap doubles).
 *  @return FTR_OK or FTR_E_NOMEM */
int frp_grow(void **arr, size_t *cap, size_t need, size_t elem);

/* ---- string arena: copies that live until frp_arena_free() ---- */
struct frp_arena_blk;
struct frp_arena {
    struct frp_arena_blk *head;
};
/*! frp_arena_alloc() : n bytes (unaligned) from a. @return NULL when out of memory */
char *frp_arena_alloc(struct frp_arena *a, size_t n);
/*! frp_arena_str() : a sanitized (frp_sanitize), NUL-terminated copy of s[0..n) in a.
 *  @return NULL when out of memory */
const char *frp_arena_str(struct frp_arena *a, const char *s, size_t n);
void frp_arena_free(struct frp_arena *a);

/* ---- per-thread call stacks kept by the renderers ---- */
struct frp_frame {
    struct frp_name name;
    uint32_t site;
    uint64_t tsc;
};
struct frp_stack {
    struct frp_frame *f;
    uint32_t depth, cap;
};
int frp_stack_grow(struct frp_stack *s); /* FTR_OK or FTR_E_NOMEM */
static inline struct frp_frame *frp_stack_push(struct frp_stack *s)
{
    if (__builtin_expect(s->depth == s->cap, 0) && frp_stack_grow(s) != FTR_OK) return NULL;
    return &s->f[s->depth++];
}

#ifdef __cplusplus
}
#endif
#endif /* FTR_REPORT_UTIL_H */
