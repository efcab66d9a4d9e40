/*
 * ftr_reader.c - the streaming reader of the trace file format (ftr_reader_*): a window over a
 * file descriptor, the framing check of every chunk and resynchronisation on damage, exactly as
 * docs/format.md ("Reading and damage") describes them. The encoder and the payload decoders
 * are in ftr_format.c.
 *
 * The window holds bytes [win_off, win_off + len) of the file; the file position of the
 * descriptor is always win_off + len. It starts at WIN_SIZE and grows, when a chunk needs it, up
 * to half as much again as the largest chunk with the header after it (at most WIN_LIMIT). A
 * chunk returned by ftr_reader_next() is in the window whole, with the header that follows it:
 * its framing is checked, and its payload decompressed, from memory, resynchronising inside a
 * damaged chunk needs no backward seek, and pipes are read like files.
 */
#include "ftr_format.h"

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#define WIN_SIZE (64u << 10) /* initial window, least read-ahead */
#define WIN_MAX                                                                                    \
    (2 * FTR_CHUNK_HEADER_SIZE + FTR_CHUNK_MAX_PAYLOAD) /* a chunk and the header after it */
#define WIN_LIMIT (WIN_MAX + WIN_MAX / 2)               /* the window's largest size */
#define ZSTD_MAGIC 0xfd2fb528u                          /* RFC 8878 frame magic */
#define ZSTD_FHD_CHECKSUM 0x04                          /* Content_Checksum_flag */

struct ftr_reader {
    int fd;
    int regular;
    size_t hdr;     /* chunk header size (ftr_chunk_hdr_size() of the file's major version) */
    uint64_t fsize; /* regular files: the size last seen */
    uint8_t *win;
    size_t cap, pos, len;
    uint64_t win_off;
    /* the chunk last returned by ftr_reader_next() */
    int have, bad_counted;
    struct ftr_chunk_hdr h;
    uint64_t chunk_off, next_off;
    int done; /* clean end or truncation reported */
    ZSTD_DCtx *dctx;
    uint8_t *scratch; /* output of the checking decompression, thrown away */
    size_t scratch_size;
    struct ftr_damage dmg;
};

static const uint8_t chunk_magic[4] = {FTR_CHUNK_MAGIC & 0xff, FTR_CHUNK_MAGIC >> 8 & 0xff,
                                       FTR_CHUNK_MAGIC >> 16 & 0xff, FTR_CHUNK_MAGIC >> 24};

/* The first chunk magic in p[0..n), or NULL: memchr (vectorised) on its first byte. */
static const uint8_t *find_magic(const uint8_t *p, size_t n)
{
    const uint8_t *end = p + n;
    while (end - p >= 4) {
        const uint8_t *q = memchr(p, chunk_magic[0], (size_t)(end - p) - 3);
        if (!q) return NULL;
        if (memcmp(q, chunk_magic, 4) == 0) return q;
        p = q + 1;
    }
    return NULL;
}

/* Makes need (<= WIN_MAX) bytes from pos available if the file has them, growing the window if
 * need be. The window is kept at least half as large again as need (up to WIN_LIMIT), and the
 * bytes before pos are dropped only when those wanted do not fit behind them: so, even while
 * scanning through overlapping claims of large chunks, a byte is moved at most about twice.
 * @return the bytes available from pos, -FTR_E_IO or -FTR_E_NOMEM */
static ssize_t rd_fill(struct ftr_reader *r, size_t need)
{
    if (r->len - r->pos >= need) return (ssize_t)(r->len - r->pos);
    size_t cap = need + need / 2;
    if (r->cap < cap && r->cap < WIN_LIMIT) {
        cap = cap > 2 * r->cap ? cap : 2 * r->cap;
        cap = cap < WIN_LIMIT ? cap : WIN_LIMIT; /* >= need */
        uint8_t *w = realloc(r->win, cap);
        if (!w) return -FTR_E_NOMEM;
        r->win = w;
        r->cap = cap;
    }
    if (r->cap - r->pos < need) {
        memmove(r->win, r->win + r->pos, r->len - r->pos);
        r->win_off += r->pos;
        r->len -= r->pos;
        r->pos = 0;
    }
    need += r->pos; /* from here on, from the window's start */
    while (r->len < need) {
        size_t want = need - r->len > WIN_SIZE ? need - r->len : WIN_SIZE;
        size_t room = r->cap - r->len;
        ssize_t got = read(r->fd, r->win + r->len, want < room ? want : room);
        if (got < 0 && errno == EINTR) continue;
        if (got < 0) return -FTR_E_IO;
        if (got == 0) break;
        r->len += (size_t)got;
    }
    return (ssize_t)(r->len - r->pos);
}

/* Moves to file offset off. @return FTR_OK, FTR_E_IO (a backward move on a pipe: ESPIPE) */
static int rd_goto(struct ftr_reader *r, uint64_t off)
{
    if (off >= r->win_off && off <= r->win_off + r->len) {
        r->pos = (size_t)(off - r->win_off);
        return FTR_OK;
    }
    if (r->regular) {
        if (lseek(r->fd, (off_t)off, SEEK_SET) < 0) return FTR_E_IO;
        r->win_off = off;
        r->pos = r->len = 0;
        return FTR_OK;
    }
    if (off < r->win_off) {
        errno = ESPIPE;
        return FTR_E_IO;
    }
    while (r->win_off + r->len < off) { /* a stream: read forward */
        r->pos = r->len;
        ssize_t got = rd_fill(r, 1);
        if (got < 0) return (int)-got;
        if (got == 0) break; /* end of file: stay there */
    }
    uint64_t end = r->win_off + r->len;
    r->pos = (size_t)((off < end ? off : end) - r->win_off);
    return FTR_OK;
}

int ftr_reader_open(const char *path, struct ftr_reader **out)
{
    *out = NULL;
    struct ftr_reader *r = calloc(1, sizeof(*r));
    if (!r) return FTR_E_NOMEM;
    r->fd = -1;
    r->cap = WIN_SIZE;
    r->win = malloc(r->cap);
    r->dctx = ZSTD_createDCtx();
    r->scratch_size = ZSTD_DStreamOutSize();
    r->scratch = malloc(r->scratch_size);
    int rc = FTR_E_NOMEM;
    if (!r->win || !r->dctx || !r->scratch) goto fail;
    rc = FTR_E_IO;
    r->fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    if (r->fd < 0 || fstat(r->fd, &st) < 0) goto fail;
    r->regular = S_ISREG(st.st_mode);
    r->fsize = (uint64_t)st.st_size;

    ssize_t n = rd_fill(r, FTR_FILE_HEADER_SIZE);
    if (n < 0) goto fail;
    const uint8_t *p = r->win;
    size_t m = (size_t)n < 8 ? (size_t)n : 8;
    if (n == 0)
        rc = FTR_E_EMPTY;
    else if (memcmp(p, FTR_FILE_MAGIC, m) != 0)
        rc = FTR_E_NOT_TRACE;
    else if (n < FTR_FILE_HEADER_SIZE)
        rc = FTR_E_TRUNCATED;
    else if (!(r->hdr = ftr_chunk_hdr_size(ftr_rd_le16(p + 8))))
        rc = FTR_E_VERSION;
    else
        rc = FTR_OK;
    if (rc) goto fail;
    r->pos = FTR_FILE_HEADER_SIZE;
    *out = r;
    return FTR_OK;
fail:;
    int saved = errno;
    ftr_reader_close(r);
    errno = saved;
    return rc;
}

void ftr_reader_close(struct ftr_reader *r)
{
    if (!r) return;
    if (r->fd >= 0) close(r->fd);
    free(r->win);
    free(r->scratch);
    ZSTD_freeDCtx(r->dctx);
    free(r);
}

void ftr_reader_damage(const struct ftr_reader *r, struct ftr_damage *d)
{
    *d = r->dmg;
}

/* Is z[0..n) exactly one zstd frame with a content size (<= FTR_CHUNK_MAX_RAW) and a content
 * checksum, that decompresses to that size with that checksum? The output is thrown away in
 * pieces of scratch_size, so the memory used is bounded by the frame's window. */
static int frame_ok(struct ftr_reader *r, const uint8_t *z, size_t n)
{
    unsigned long long raw = ZSTD_getFrameContentSize(z, n);
    if (n < 5 || ftr_rd_le32(z) != ZSTD_MAGIC || !(z[4] & ZSTD_FHD_CHECKSUM) ||
        raw == ZSTD_CONTENTSIZE_UNKNOWN || raw == ZSTD_CONTENTSIZE_ERROR ||
        raw > FTR_CHUNK_MAX_RAW || ZSTD_findFrameCompressedSize(z, n) != n)
        return 0;
    if (ZSTD_isError(ZSTD_DCtx_reset(r->dctx, ZSTD_reset_session_only))) return 0;
    ZSTD_inBuffer in = {z, n, 0};
    uint64_t got = 0;
    for (;;) {
        ZSTD_outBuffer out = {r->scratch, r->scratch_size, 0};
        size_t before = in.pos;
        size_t left = ZSTD_decompressStream(r->dctx, &out, &in);
        if (ZSTD_isError(left)) return 0; /* corrupt, or checksum mismatch */
        got += out.pos;
        if (left == 0) return in.pos == n && got == raw;
        if (got > raw || (in.pos == before && out.pos == 0)) return 0; /* no progress: cut */
    }
}

/* The offset (>= from) of the first valid chunk header that starts before to, in the avail
 * bytes at p; 0 when there is none. */
static size_t first_header(const struct ftr_reader *r, const uint8_t *p, size_t from, size_t to,
                           size_t avail)
{
    size_t lim = to + 3 < avail ? to + 3 : avail;
    struct ftr_chunk_hdr h;
    while (from + 4 <= lim) {
        const uint8_t *q = find_magic(p + from, lim - from);
        if (!q) break;
        size_t at = (size_t)(q - p);
        if (at + r->hdr <= avail && ftr_chunk_hdr_decode_sized(q, r->hdr, &h)) return at;
        from = at + 1;
    }
    return 0;
}

enum { CHUNK_OK, CHUNK_BAD, CHUNK_PAST_EOF };

/* The acceptance rule of docs/format.md for the valid header h at pos: the chunk is returned
 * when it is framed (the file ends at its end, or a valid header starts there) and no valid
 * header starts inside it, or else when its payload is a zstd frame that checks out. Otherwise
 * *resume is where to scan on, relative to pos. @return CHUNK_* or a negated error */
static int check_chunk(struct ftr_reader *r, const struct ftr_chunk_hdr *h, size_t *resume)
{
    size_t size = r->hdr + (size_t)h->payload_size;
    *resume = 1;
    if (r->regular && r->win_off + r->pos + size > r->fsize) {
        struct stat st; /* the file may have grown; else do not read what is not there */
        if (fstat(r->fd, &st) == 0) r->fsize = (uint64_t)st.st_size;
        if (r->win_off + r->pos + size > r->fsize) return CHUNK_PAST_EOF;
    }
    ssize_t avail = rd_fill(r, size + r->hdr);
    if (avail < 0) return (int)avail;
    if ((size_t)avail < size) return CHUNK_PAST_EOF;
    const uint8_t *p = r->win + r->pos;
    struct ftr_chunk_hdr nh;
    int framed = (size_t)avail == size || ((size_t)avail >= size + r->hdr &&
                                           ftr_chunk_hdr_decode_sized(p + size, r->hdr, &nh));
    size_t inside = first_header(r, p, 1, size, (size_t)avail);
    if (framed && !inside) return CHUNK_OK;
    if (frame_ok(r, p + r->hdr, h->payload_size)) return CHUNK_OK;
    if (inside) *resume = inside; /* no valid header before it: go straight there */
    return CHUNK_BAD;
}

/* Counts the bytes [from, to) as one stretch of skipped bytes, in which chunks valid headers. */
static void skipped(struct ftr_reader *r, uint64_t from, uint64_t to, uint64_t chunks)
{
    struct ftr_damage *d = &r->dmg;
    if (to <= from) return;
    d->skipped_bytes += to - from;
    d->skipped_chunks += chunks;
    if (d->skipped_runs++ == 0) {
        d->first_skip_off = from;
        d->first_skip_len = to - from;
    }
    d->last_skip_off = from;
    d->last_skip_len = to - from;
}

static int truncated(struct ftr_reader *r, uint64_t at)
{
    r->dmg.truncated = 1;
    r->dmg.truncated_off = at;
    r->done = 1;
    return FTR_E_TRUNCATED;
}

int ftr_reader_next(struct ftr_reader *r, struct ftr_chunk_hdr *h, uint64_t *offset)
{
    if (r->done) return FTR_E_EOF;
    if (r->have) {
        r->have = 0;
        if (rd_goto(r, r->next_off)) return FTR_E_IO;
    }
    /* start: where this call began; trunc: the last incomplete chunk (or header) seen */
    uint64_t start = r->win_off + r->pos, trunc = UINT64_MAX;
    uint64_t dropped = 0, dropped_before_trunc = 0;
    struct ftr_chunk_hdr hh;
    for (;;) {
        ssize_t avail = rd_fill(r, r->hdr);
        if (avail < 0) return (int)-avail;
        if (avail == 0) break;
        const uint8_t *p = r->win + r->pos;
        size_t skip;
        if ((size_t)avail >= r->hdr && ftr_chunk_hdr_decode_sized(p, r->hdr, &hh)) {
            int v = check_chunk(r, &hh, &skip);
            if (v < 0) return -v;
            if (v == CHUNK_OK) break;
            if (v == CHUNK_PAST_EOF) {
                trunc = r->win_off + r->pos;
                dropped_before_trunc = dropped;
            }
            dropped++;
        } else if ((size_t)avail < r->hdr &&
                   memcmp(p, chunk_magic, avail < 4 ? (size_t)avail : 4) == 0) {
            trunc = r->win_off + r->pos; /* the file ends inside this header */
            dropped_before_trunc = dropped;
            r->pos += (size_t)avail;
            continue;
        } else { /* scan forward for the next magic, keeping 3 bytes that may start one */
            const uint8_t *q = find_magic(p + 1, (size_t)avail - 1);
            skip = q ? (size_t)(q - p) : (size_t)avail > 4 ? (size_t)avail - 3 : 1;
        }
        r->pos += skip;
    }
    uint64_t off = r->win_off + r->pos;
    if (r->pos == r->len) { /* end of file */
        r->done = 1;
        if (trunc == UINT64_MAX) {
            skipped(r, start, off, dropped);
            return FTR_E_EOF;
        }
        skipped(r, start, trunc, dropped_before_trunc);
        return truncated(r, trunc);
    }
    skipped(r, start, off, dropped);
    r->have = 1;
    r->bad_counted = 0;
    r->h = hh;
    r->chunk_off = off;
    r->next_off = off + r->hdr + hh.payload_size;
    *h = hh;
    if (offset) *offset = off;
    return FTR_OK;
}

static int bad_chunk(struct ftr_reader *r, int rc)
{
    if (!r->bad_counted) r->dmg.bad_chunks++;
    r->bad_counted = 1;
    return rc;
}

int ftr_reader_payload(struct ftr_reader *r, struct ftr_buf *out)
{
    if (!r->have) {
        errno = EINVAL;
        return FTR_E_IO;
    }
    size_t zn = r->h.payload_size;
    if (rd_goto(r, r->chunk_off)) return FTR_E_IO; /* in the window since ftr_reader_next() */
    ssize_t avail = rd_fill(r, r->hdr + zn);
    if (avail < 0) return (int)-avail;
    if ((size_t)avail < r->hdr + zn) return truncated(r, r->chunk_off); /* the file shrank */
    const uint8_t *z = r->win + r->pos + r->hdr;
    unsigned long long raw = ZSTD_getFrameContentSize(z, zn);
    if (raw == ZSTD_CONTENTSIZE_UNKNOWN || raw == ZSTD_CONTENTSIZE_ERROR ||
        raw > FTR_CHUNK_MAX_RAW || ZSTD_findFrameCompressedSize(z, zn) != zn)
        return bad_chunk(r, FTR_E_CORRUPT);
    out->len = 0;
    if (ftr_buf_reserve(out, (size_t)raw + 1)) return FTR_E_NOMEM;
    size_t got = ZSTD_decompressDCtx(r->dctx, out->data, (size_t)raw, z, zn);
    if (ZSTD_isError(got)) return bad_chunk(r, FTR_E_ZSTD);
    if (got != raw) return bad_chunk(r, FTR_E_CORRUPT);
    out->len = got;
    return FTR_OK;
}

int ftr_reader_seek(struct ftr_reader *r, uint64_t offset)
{
    r->have = 0;
    r->done = 0;
    return rd_goto(r, offset);
}
