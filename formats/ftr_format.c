/*
 * ftr_format.c - encoder and payload decoders of the trace file format; its streaming reader
 * is ftr_reader.c. docs/format.md describes the bytes; these two files are the only code that
 * produces or parses them.
 *
 * Layout of this file:
 *   names       ftr_strerror() & co., generated from the X-macro tables of the header
 *   buffers     ftr_buf_*
 *   TLV tables  the tags of every metadata chunk type (X-macros), generic field (de)coding
 *   encoder     ftr_enc_*: build a payload in a scratch buffer, compress it behind a header
 *   events      the EVENTS payload: two varint streams (heads, tsc deltas)
 *   decoders    ftr_dec_*: bounds-checked parsing of decompressed payloads
 */
#include "ftr_format.h"

#include <stddef.h>
#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#define HDR FTR_CHUNK_HEADER_SIZE
#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* ======================================= names ======================================= */

#define X_MSG(name, msg) [name] = msg,
static const char *const err_msgs[] = {FTR_ERRORS(X_MSG)};
#undef X_MSG

const char *ftr_strerror(int err)
{
    if (err < 0) err = -err;
    if (err >= FTR_ERR__COUNT) return "unknown error";
    return err_msgs[err];
}

/* ftr_chunk_type_name(), ftr_event_kind_name(), ftr_special_name(), ftr_tsc_cal_name(),
 * ftr_end_how_name(): a switch over the table's values, "?" for any other value. */
#define X_CASE(name, val, str)                                                                     \
    case val:                                                                                      \
        return str;
#define NAME_FN(fn, TABLE)                                                                         \
    const char *fn(unsigned v)                                                                     \
    {                                                                                              \
        switch (v) {                                                                               \
            TABLE(X_CASE)                                                                          \
        }                                                                                          \
        return "?";                                                                                \
    }
NAME_FN(ftr_chunk_type_name, FTR_CHUNK_TYPES)
NAME_FN(ftr_event_kind_name, FTR_EVENT_KINDS)
NAME_FN(ftr_special_name, FTR_SPECIALS)
NAME_FN(ftr_tsc_cal_name, FTR_TSC_CALIBRATIONS)
NAME_FN(ftr_end_how_name, FTR_END_HOWS)
NAME_FN(ftr_mark_name, FTR_MARKS)
#undef NAME_FN
#undef X_CASE

/* ====================================== buffers ====================================== */

int ftr_buf_reserve(struct ftr_buf *b, size_t n)
{
    if (b->cap - b->len >= n) return FTR_OK;
    if (n > SIZE_MAX / 2 - b->len) return FTR_E_NOMEM;
    size_t cap = b->cap ? b->cap : 256;
    while (cap - b->len < n)
        cap *= 2;
    uint8_t *d = realloc(b->data, cap);
    if (!d) return FTR_E_NOMEM;
    b->data = d;
    b->cap = cap;
    return FTR_OK;
}

int ftr_buf_append(struct ftr_buf *b, const void *p, size_t n)
{
    int rc = ftr_buf_reserve(b, n);
    if (rc) return rc;
    if (n) memcpy(b->data + b->len, p, n);
    b->len += n;
    return FTR_OK;
}

void ftr_buf_free(struct ftr_buf *b)
{
    free(b->data);
    b->data = NULL;
    b->len = b->cap = 0;
}

/* ==================================== TLV tables ===================================== */
/*
 * Metadata payloads are a list of TLVs: u16 tag, u32 len, len bytes. Fixed-width integers have
 * exactly their width as len (i32 is stored as its u32 two's complement). STR values include a
 * terminating NUL (len >= 1, last byte 0) so that decoded strings can point into the payload.
 * Unknown tags are skipped by the decoders; a repeated tag replaces the earlier value except
 * PROC_ARG, which is repeated once per argument in order.
 * X(name, tag, type, member): member names the field of the matching ftr_*_info struct.
 */
#define PROCESS_TAGS(X)                                                                            \
    X(PROC_PID, 1, U32, pid)                                                                       \
    X(PROC_PPID, 2, U32, ppid)                                                                     \
    X(PROC_SESSION, 3, U64, session_id)                                                            \
    X(PROC_START_REALTIME, 4, U64, start_realtime_ns)                                              \
    X(PROC_START_TSC, 5, U64, start_tsc)                                                           \
    X(PROC_TSC_HZ, 6, U64, tsc_hz)                                                                 \
    X(PROC_TSC_CAL, 7, U32, tsc_calibration)                                                       \
    X(PROC_EXE, 8, STR, exe)                                                                       \
    X(PROC_ARG, 9, ARGV, argv) /* one per argument, in order; argc = their number */               \
    X(PROC_CLOCK_CHECK, 10, U32, clock_check)

#define MODULE_TAGS(X)                                                                             \
    X(MOD_ID, 1, U32, module_id)                                                                   \
    X(MOD_BASE, 2, U64, base)                                                                      \
    X(MOD_LOAD_TSC, 3, U64, load_tsc)                                                              \
    X(MOD_BUILD_ID, 4, BYTES, build_id) /* raw bytes, no NUL; build_id_len = len */                \
    X(MOD_PATH, 5, STR, path)

#define THREAD_TAGS(X)                                                                             \
    X(THR_TID, 1, U32, tid)                                                                        \
    X(THR_WHAT, 2, U32, what)                                                                      \
    X(THR_TSC, 3, U64, tsc)                                                                        \
    X(THR_NAME, 4, STR, name)

#define END_TAGS(X)                                                                                \
    X(END_TSC, 1, U64, tsc)                                                                        \
    X(END_HOW, 2, U32, how)                                                                        \
    X(END_CODE, 3, U32, code) /* int32 */                                                          \
    X(END_EVENTS, 4, U64, events)                                                                  \
    X(END_LOST, 5, U64, lost)                                                                      \
    X(END_SITES, 6, U64, sites)                                                                    \
    X(END_PATCHED, 7, U64, patched)                                                                \
    X(END_SKIPPED, 8, U64, skipped)                                                                \
    X(END_OVERRUNS, 9, U64, overruns)                                                              \
    X(END_BYTES_RAW, 10, U64, bytes_raw)                                                           \
    X(END_CALLS, 11, U64, calls)                                                                   \
    X(END_THROUGH, 12, U64, through)                                                               \
    X(END_LOST_CALLS, 13, U64, lost_calls)

#define MARK_TAGS(X)                                                                               \
    X(MARK_TSC, 1, U64, tsc)                                                                       \
    X(MARK_WHAT, 2, U32, what)                                                                     \
    X(MARK_VALUE, 3, U64, value)                                                                   \
    X(MARK_TEXT, 4, STR, text)

/* SITES: columns of count entries each; site i is (SITE[i], ADDR[i], FUNC[i], STRTAB+NAME[i]). */
#define SITES_TAGS(X)                                                                              \
    X(SITES_MODULE_ID, 1, U32, -)                                                                  \
    X(SITES_COUNT, 2, U32, -)                                                                      \
    X(SITES_SITE, 3, U32_ARRAY, -) /* process-wide site index */                                   \
    X(SITES_ADDR, 4, U64_ARRAY, -) /* runtime address of the site */                               \
    X(SITES_FUNC, 5, U64_ARRAY, -) /* runtime address of the function */                           \
    X(SITES_NAME, 6, U32_ARRAY, -) /* offset into SITES_STRTAB, 0xffffffff = no name */            \
    X(SITES_STRTAB, 7, BYTES, -)   /* NUL-terminated names, last byte is NUL */                    \
    X(SITES_KIND, 8, BYTES, -)     /* one byte each, enum ftr_site_kind; absent: all functions */

/* A field added to an ftr_*_info struct needs its tag here (and in docs/format.md). */
_Static_assert(sizeof(void *) != 8 || sizeof(struct ftr_process_info) == 72,
               "new process field: add a PROC_ tag");
_Static_assert(sizeof(void *) != 8 || sizeof(struct ftr_module_info) == 48,
               "new module field: add a MOD_ tag");
_Static_assert(sizeof(void *) != 8 || sizeof(struct ftr_site_info) == 40,
               "new site field: add a SITES_ tag");
_Static_assert(sizeof(void *) != 8 || sizeof(struct ftr_thread_info) == 24,
               "new thread field: add a THR_ tag");
_Static_assert(sizeof(struct ftr_end_info) == 96, "new end field: add an END_ tag");
_Static_assert(sizeof(void *) != 8 || sizeof(struct ftr_mark_info) == 32,
               "new mark field: add a MARK_ tag");

#define X_TAG_ENUM(name, tag, type, member) name = tag,
enum {
    PROCESS_TAGS(X_TAG_ENUM) MODULE_TAGS(X_TAG_ENUM) THREAD_TAGS(X_TAG_ENUM) END_TAGS(X_TAG_ENUM)
        MARK_TAGS(X_TAG_ENUM) SITES_TAGS(X_TAG_ENUM)
};
#undef X_TAG_ENUM

enum ftype { T_U32, T_U64, T_STR, T_BYTES, T_ARGV };
struct field {
    uint16_t tag;
    uint8_t type;
    uint16_t off;   /* of the member in its struct */
    uint16_t count; /* BYTES: offset of the length member; ARGV: of argc */
};
#define COUNT_U32(S, m) 0
#define COUNT_U64(S, m) 0
#define COUNT_STR(S, m) 0
#define COUNT_BYTES(S, m) offsetof(S, m##_len)
#define COUNT_ARGV(S, m) offsetof(S, argc)
#define FIELD(S, tag, type, m) {tag, T_##type, offsetof(S, m), COUNT_##type(S, m)},
#define X_PROC(name, tag, type, m) FIELD(struct ftr_process_info, tag, type, m)
#define X_MOD(name, tag, type, m) FIELD(struct ftr_module_info, tag, type, m)
#define X_THR(name, tag, type, m) FIELD(struct ftr_thread_info, tag, type, m)
#define X_END(name, tag, type, m) FIELD(struct ftr_end_info, tag, type, m)
#define X_MARK(name, tag, type, m) FIELD(struct ftr_mark_info, tag, type, m)
static const struct field process_fields[] = {PROCESS_TAGS(X_PROC)};
static const struct field module_fields[] = {MODULE_TAGS(X_MOD)};
static const struct field thread_fields[] = {THREAD_TAGS(X_THR)};
static const struct field end_fields[] = {END_TAGS(X_END)};
static const struct field mark_fields[] = {MARK_TAGS(X_MARK)};
#define FIELDS(t) t, ARRAY_SIZE(t)

/* Appends tag and len, reserves len bytes. @return where the value goes, or NULL (no memory) */
static uint8_t *tlv_put(struct ftr_buf *b, unsigned tag, size_t len)
{
    if (len > UINT32_MAX || ftr_buf_reserve(b, 6 + len)) return NULL;
    uint8_t *p = b->data + b->len;
    ftr_wr_le16(p, (uint16_t)tag);
    ftr_wr_le32(p + 2, (uint32_t)len);
    b->len += 6 + len;
    return p + 6;
}

static int tlv_u32(struct ftr_buf *b, unsigned tag, uint32_t v)
{
    uint8_t *p = tlv_put(b, tag, 4);
    if (!p) return FTR_E_NOMEM;
    ftr_wr_le32(p, v);
    return FTR_OK;
}

static int tlv_u64(struct ftr_buf *b, unsigned tag, uint64_t v)
{
    uint8_t *p = tlv_put(b, tag, 8);
    if (!p) return FTR_E_NOMEM;
    ftr_wr_le64(p, v);
    return FTR_OK;
}

static int tlv_bytes(struct ftr_buf *b, unsigned tag, const void *v, size_t len)
{
    uint8_t *p = tlv_put(b, tag, len);
    if (!p) return FTR_E_NOMEM;
    if (len) memcpy(p, v, len);
    return FTR_OK;
}

/* A string with its NUL; NULL strings are left out. */
static int tlv_str(struct ftr_buf *b, unsigned tag, const char *s)
{
    return s ? tlv_bytes(b, tag, s, strlen(s) + 1) : FTR_OK;
}

/* Encodes the fields of struct s as TLVs, in table order. */
static int enc_fields(struct ftr_buf *b, const struct field *f, size_t nf, const void *s)
{
    int rc = FTR_OK;
    for (size_t i = 0; i < nf && rc == FTR_OK; i++) {
        const char *m = (const char *)s + f[i].off;
        uint32_t u32, cnt = 0;
        uint64_t u64;
        const void *ptr;
        if (f[i].type == T_BYTES || f[i].type == T_ARGV)
            memcpy(&cnt, (const char *)s + f[i].count, 4);
        switch (f[i].type) {
        case T_U32:
            memcpy(&u32, m, 4);
            rc = tlv_u32(b, f[i].tag, u32);
            break;
        case T_U64:
            memcpy(&u64, m, 8);
            rc = tlv_u64(b, f[i].tag, u64);
            break;
        case T_STR:
            memcpy(&ptr, m, sizeof(ptr));
            rc = tlv_str(b, f[i].tag, ptr);
            break;
        case T_BYTES: /* left out when empty */
            memcpy(&ptr, m, sizeof(ptr));
            if (ptr && cnt) rc = tlv_bytes(b, f[i].tag, ptr, cnt);
            break;
        case T_ARGV: /* one TLV per element; NULL elements are stored as "" */
            memcpy(&ptr, m, sizeof(ptr));
            for (uint32_t k = 0; ptr && k < cnt && rc == FTR_OK; k++) {
                const char *str = ((const char *const *)ptr)[k];
                rc = tlv_str(b, f[i].tag, str ? str : "");
            }
            break;
        }
    }
    return rc;
}

struct tlv_it {
    const uint8_t *p, *end;
};

/* @return 1 with the next TLV, 0 at the end, -1 when the list is cut. */
static int tlv_next(struct tlv_it *it, unsigned *tag, const uint8_t **v, uint32_t *len)
{
    size_t left = (size_t)(it->end - it->p);
    if (left == 0) return 0;
    if (left < 6) return -1;
    *tag = ftr_rd_le16(it->p);
    *len = ftr_rd_le32(it->p + 2);
    if (*len > left - 6) return -1;
    *v = it->p + 6;
    it->p += 6 + (size_t)*len;
    return 1;
}

static int is_cstr(const uint8_t *v, uint32_t len)
{
    return len >= 1 && v[len - 1] == 0;
}

/* Decodes a TLV list into struct s (zeroed first); ARGV elements go to argv[0..argv_cap).
 * @return FTR_OK or FTR_E_CORRUPT */
static int dec_fields(const uint8_t *p, size_t n, const struct field *f, size_t nf, void *s,
                      size_t size, const char **argv, size_t argv_cap)
{
    memset(s, 0, size);
    struct tlv_it it = {p, p + n};
    unsigned tag;
    const uint8_t *v;
    uint32_t len, u32;
    uint64_t u64;
    int rc;
    while ((rc = tlv_next(&it, &tag, &v, &len)) > 0) {
        size_t i = 0;
        while (i < nf && f[i].tag != tag)
            i++;
        if (i == nf) continue; /* unknown tag: from a newer minor version */
        char *m = (char *)s + f[i].off, *cnt = (char *)s + f[i].count;
        switch (f[i].type) {
        case T_U32:
            if (len != 4) return FTR_E_CORRUPT;
            u32 = ftr_rd_le32(v);
            memcpy(m, &u32, 4);
            break;
        case T_U64:
            if (len != 8) return FTR_E_CORRUPT;
            u64 = ftr_rd_le64(v);
            memcpy(m, &u64, 8);
            break;
        case T_STR:
            if (!is_cstr(v, len)) return FTR_E_CORRUPT;
            memcpy(m, &v, sizeof(v));
            break;
        case T_BYTES:
            memcpy(m, &v, sizeof(v));
            memcpy(cnt, &len, 4);
            break;
        case T_ARGV:
            memcpy(&u32, cnt, 4);
            if (!is_cstr(v, len) || u32 == UINT32_MAX) return FTR_E_CORRUPT;
            if (argv && u32 < argv_cap) argv[u32] = (const char *)v;
            u32++;
            memcpy(cnt, &u32, 4);
            break;
        }
    }
    return rc < 0 ? FTR_E_CORRUPT : FTR_OK;
}

/* ====================================== encoder ====================================== */

struct ftr_enc {
    ZSTD_CCtx *cctx;
    struct ftr_buf raw;     /* the uncompressed payload being built */
    struct ftr_buf aux;     /* events: the deltas stream */
    uint64_t events, calls; /* of the last ftr_enc_events_at() */
};

struct ftr_enc *ftr_enc_new(int zstd_level)
{
    struct ftr_enc *e = calloc(1, sizeof(*e));
    if (!e) return NULL;
    e->cctx = ZSTD_createCCtx();
    if (!e->cctx || ZSTD_isError(ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_checksumFlag, 1)) ||
        ZSTD_isError(ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_contentSizeFlag, 1)) ||
        ftr_enc_set_level(e, zstd_level) != FTR_OK) {
        ftr_enc_free(e);
        return NULL;
    }
    return e;
}

void ftr_enc_free(struct ftr_enc *e)
{
    if (!e) return;
    ZSTD_freeCCtx(e->cctx);
    ftr_buf_free(&e->raw);
    ftr_buf_free(&e->aux);
    free(e);
}

int ftr_enc_set_level(struct ftr_enc *e, int zstd_level)
{
    size_t r = ZSTD_CCtx_setParameter(e->cctx, ZSTD_c_compressionLevel, zstd_level);
    return ZSTD_isError(r) ? FTR_E_ZSTD : FTR_OK;
}

int ftr_enc_file_header(struct ftr_buf *out)
{
    int rc = ftr_buf_reserve(out, FTR_FILE_HEADER_SIZE);
    if (rc) return rc;
    uint8_t *p = out->data + out->len;
    memcpy(p, FTR_FILE_MAGIC, 8);
    ftr_wr_le16(p + 8, FTR_FORMAT_MAJOR);
    ftr_wr_le16(p + 10, FTR_FORMAT_MINOR);
    ftr_wr_le32(p + 12, 0);
    out->len += FTR_FILE_HEADER_SIZE;
    return FTR_OK;
}

/* FNV-1a, 32 bits */
static uint32_t fnv1a(const uint8_t *p, size_t n)
{
    uint32_t h = 2166136261u;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 16777619u;
    return h;
}

static void write_chunk_hdr(uint8_t *p, const struct ftr_chunk_hdr *h)
{
    ftr_wr_le32(p, FTR_CHUNK_MAGIC);
    ftr_wr_le16(p + 4, h->type);
    ftr_wr_le16(p + 6, h->flags);
    ftr_wr_le32(p + 8, h->pid);
    ftr_wr_le32(p + 12, h->tid);
    ftr_wr_le32(p + 16, h->payload_size);
    ftr_wr_le64(p + 20, h->tsc_first);
    ftr_wr_le64(p + 28, h->tsc_last);
    ftr_wr_le64(p + 36, h->seq);
    ftr_wr_le32(p + HDR - 4, fnv1a(p, HDR - 4));
}

size_t ftr_chunk_hdr_size(unsigned major)
{
    return major == 1 ? FTR_CHUNK_HEADER_SIZE_V1 : major == FTR_FORMAT_MAJOR ? HDR : 0;
}

/* Both layouts share bytes 0..35; 2.x adds seq at 36; the check is the last 4 bytes. */
int ftr_chunk_hdr_decode_sized(const uint8_t *p, size_t size, struct ftr_chunk_hdr *h)
{
    if (ftr_rd_le32(p) != FTR_CHUNK_MAGIC || ftr_rd_le32(p + size - 4) != fnv1a(p, size - 4))
        return 0;
    h->type = ftr_rd_le16(p + 4);
    h->flags = ftr_rd_le16(p + 6);
    h->pid = ftr_rd_le32(p + 8);
    h->tid = ftr_rd_le32(p + 12);
    h->payload_size = ftr_rd_le32(p + 16);
    h->tsc_first = ftr_rd_le64(p + 20);
    h->tsc_last = ftr_rd_le64(p + 28);
    h->seq = size >= HDR ? ftr_rd_le64(p + 36) : 0;
    return h->payload_size <= FTR_CHUNK_MAX_PAYLOAD;
}

int ftr_chunk_hdr_decode(const uint8_t *p, struct ftr_chunk_hdr *h)
{
    return ftr_chunk_hdr_decode_sized(p, HDR, h);
}

size_t ftr_chunks_retarget(uint8_t *p, size_t n, uint32_t pid, uint32_t types)
{
    size_t in = 0, kept = 0;
    while (in < n) {
        struct ftr_chunk_hdr h;
        if (n - in < HDR || !ftr_chunk_hdr_decode(p + in, &h) || h.payload_size > n - in - HDR)
            return 0;
        size_t len = HDR + h.payload_size;
        if (h.type < 32 && (types >> h.type & 1)) {
            h.pid = pid;
            memmove(p + kept, p + in, len);
            write_chunk_hdr(p + kept, &h);
            kept += len;
        }
        in += len;
    }
    return kept;
}

int ftr_enc_chunk(struct ftr_enc *e, unsigned type, uint32_t pid, uint32_t tid, uint64_t tsc_first,
                  uint64_t tsc_last, uint64_t seq, const void *raw, size_t n, struct ftr_buf *out)
{
    if (n > FTR_CHUNK_MAX_RAW) return FTR_E_TOO_BIG;
    size_t bound = ZSTD_compressBound(n);
    int rc = ftr_buf_reserve(out, HDR + bound);
    if (rc) return rc;
    uint8_t *p = out->data + out->len;
    size_t zn = ZSTD_compress2(e->cctx, p + HDR, bound, raw, n);
    if (ZSTD_isError(zn)) return FTR_E_ZSTD;
    if (zn > FTR_CHUNK_MAX_PAYLOAD) return FTR_E_TOO_BIG;
    struct ftr_chunk_hdr h = {.type = (uint16_t)type,
                              .pid = pid,
                              .tid = tid,
                              .payload_size = (uint32_t)zn,
                              .tsc_first = tsc_first,
                              .tsc_last = tsc_last,
                              .seq = seq};
    write_chunk_hdr(p, &h);
    out->len += HDR + zn;
    return FTR_OK;
}

/* Compresses e->raw behind a chunk header appended to out. */
static int emit_chunk(struct ftr_enc *e, unsigned type, uint32_t pid, uint32_t tid,
                      uint64_t tsc_first, uint64_t tsc_last, uint64_t seq, struct ftr_buf *out)
{
    return ftr_enc_chunk(e, type, pid, tid, tsc_first, tsc_last, seq, e->raw.data, e->raw.len, out);
}

int ftr_enc_process(struct ftr_enc *e, const struct ftr_process_info *pi, struct ftr_buf *out)
{
    e->raw.len = 0;
    int rc = enc_fields(&e->raw, FIELDS(process_fields), pi);
    return rc ? rc : emit_chunk(e, FTR_CHUNK_PROCESS, pi->pid, 0, 0, 0, 0, out);
}

int ftr_enc_module(struct ftr_enc *e, uint32_t pid, const struct ftr_module_info *mi,
                   struct ftr_buf *out)
{
    e->raw.len = 0;
    int rc = enc_fields(&e->raw, FIELDS(module_fields), mi);
    return rc ? rc : emit_chunk(e, FTR_CHUNK_MODULE, pid, 0, 0, 0, 0, out);
}

int ftr_enc_thread(struct ftr_enc *e, uint32_t pid, const struct ftr_thread_info *ti,
                   struct ftr_buf *out)
{
    e->raw.len = 0;
    int rc = enc_fields(&e->raw, FIELDS(thread_fields), ti);
    return rc ? rc : emit_chunk(e, FTR_CHUNK_THREAD, pid, ti->tid, 0, 0, 0, out);
}

int ftr_enc_end(struct ftr_enc *e, uint32_t pid, const struct ftr_end_info *ei, struct ftr_buf *out)
{
    e->raw.len = 0;
    int rc = enc_fields(&e->raw, FIELDS(end_fields), ei);
    return rc ? rc : emit_chunk(e, FTR_CHUNK_END, pid, 0, 0, 0, 0, out);
}

int ftr_enc_mark(struct ftr_enc *e, uint32_t pid, const struct ftr_mark_info *mi,
                 struct ftr_buf *out)
{
    e->raw.len = 0;
    int rc = enc_fields(&e->raw, FIELDS(mark_fields), mi);
    return rc ? rc : emit_chunk(e, FTR_CHUNK_MARK, pid, 0, 0, 0, 0, out);
}

int ftr_enc_sites(struct ftr_enc *e, uint32_t pid, uint32_t module_id,
                  const struct ftr_site_info *s, size_t n, struct ftr_buf *out)
{
    size_t strtab = 0;
    for (size_t i = 0; i < n; i++)
        strtab += s[i].name ? strlen(s[i].name) + 1 : 0;
    if (n > FTR_CHUNK_MAX_RAW / 24 || strtab > FTR_CHUNK_MAX_RAW ||
        n * 24 + strtab + 64 > FTR_CHUNK_MAX_RAW)
        return FTR_E_TOO_BIG;

    struct ftr_buf *b = &e->raw;
    b->len = 0;
    int kinds = 0;
    for (size_t i = 0; i < n; i++)
        kinds |= s[i].kind != FTR_SITE_FUNCTION;
    if (ftr_buf_reserve(b, 8 * 6 + 8 + n * 25 + strtab)) return FTR_E_NOMEM;
    /* all reserved: the pointers below stay valid, each tlv_put just advances */
    tlv_u32(b, SITES_MODULE_ID, module_id);
    tlv_u32(b, SITES_COUNT, (uint32_t)n);
    uint8_t *site = tlv_put(b, SITES_SITE, n * 4), *addr = tlv_put(b, SITES_ADDR, n * 8);
    uint8_t *func = tlv_put(b, SITES_FUNC, n * 8), *name = tlv_put(b, SITES_NAME, n * 4);
    uint8_t *tab = tlv_put(b, SITES_STRTAB, strtab);
    uint8_t *kind = kinds ? tlv_put(b, SITES_KIND, n) : NULL;
    uint32_t off = 0;
    for (size_t i = 0; i < n; i++) {
        ftr_wr_le32(site + 4 * i, s[i].site);
        ftr_wr_le64(addr + 8 * i, s[i].addr);
        ftr_wr_le64(func + 8 * i, s[i].func);
        ftr_wr_le32(name + 4 * i, s[i].name ? off : UINT32_MAX);
        if (kind) kind[i] = s[i].kind;
        if (s[i].name) {
            size_t l = strlen(s[i].name) + 1;
            memcpy(tab + off, s[i].name, l);
            off += (uint32_t)l;
        }
    }
    return emit_chunk(e, FTR_CHUNK_SITES, pid, 0, 0, 0, 0, out);
}

/* ======================================= events ====================================== */
/*
 * EVENTS payload: u32 n_events, u32 heads_len, heads stream, deltas stream (to the end).
 * Per event, heads: varint(site << 2 | kind) [+ varint(arg) for SPECIAL];
 *            deltas: varint(tsc - previous tsc), the first previous tsc being tsc_first.
 * Varints are unsigned LEB128: 7 bits per byte, low bits first, high bit = more follows.
 */
#define VARINT_MAX 10

/* Heads and deltas are mostly 1 or 2 bytes, at random: a loop branching on the length would
 * mispredict half the time, so values below 2^14 take a branch-free path. */
static inline uint8_t *put_varint(uint8_t *p, uint64_t v)
{
    if (v < (1u << 14)) {
        unsigned two = v >= 0x80;
        p[0] = (uint8_t)(v | two << 7);
        p[1] = (uint8_t)(v >> 7);
        return p + 1 + two;
    }
    while (v >= 0x80) {
        *p++ = (uint8_t)(v | 0x80);
        v >>= 7;
    }
    *p++ = (uint8_t)v;
    return p;
}

/* @return 0 with *v, -1 when the varint runs past end or overflows 64 bits */
static inline int get_varint(const uint8_t **pp, const uint8_t *end, uint64_t *v)
{
    const uint8_t *p = *pp;
    if (end - p >= 2 && !(p[0] & p[1] & 0x80)) { /* 1 or 2 bytes, branch-free */
        unsigned two = p[0] >> 7;
        *v = (p[0] & 0x7fu) | ((p[1] & 0x7fu) << 7 & -two);
        *pp = p + 1 + two;
        return 0;
    }
    uint64_t r = 0;
    for (unsigned shift = 0;; shift += 7) {
        if (p >= end || shift > 63) return -1;
        uint8_t b = *p++;
        if (shift == 63 && b > 1) return -1;
        r |= (uint64_t)(b & 0x7f) << shift;
        if (!(b & 0x80)) break;
    }
    *v = r;
    *pp = p;
    return 0;
}

int ftr_enc_events(struct ftr_enc *e, uint32_t pid, uint32_t tid, const struct ftr_rec *r, size_t n,
                   struct ftr_buf *out)
{
    return ftr_enc_events_at(e, pid, tid, 0, r, n, out);
}

int ftr_enc_events_at(struct ftr_enc *e, uint32_t pid, uint32_t tid, uint64_t seq,
                      const struct ftr_rec *r, size_t n, struct ftr_buf *out)
{
    size_t i = 0;
    e->events = e->calls = 0;
    while (i < n && r[i].head == 0)
        i++; /* leading empty slots */
    if (i == n) return FTR_OK;
    if (n > (FTR_CHUNK_MAX_RAW - 8) / (3 * VARINT_MAX) || n - i > UINT32_MAX) return FTR_E_TOO_BIG;

    /* worst case: head 5 + arg 5 bytes, delta 10 bytes; the loop then needs no bound checks */
    e->raw.len = e->aux.len = 0;
    if (ftr_buf_reserve(&e->raw, 8 + n * 2 * VARINT_MAX) ||
        ftr_buf_reserve(&e->aux, n * VARINT_MAX))
        return FTR_E_NOMEM;
    uint8_t *const heads = e->raw.data + 8, *hp = heads;
    uint8_t *const deltas = e->aux.data, *dp = deltas;
    const uint64_t first = r[i].tsc;
    uint64_t prev = first;
    const size_t start = i;
    size_t empty = 0;
    uint32_t calls = 0;
    for (; i < n; i++) {
        const uint32_t head = r[i].head;
        uint64_t tsc = r[i].tsc, delta = tsc - prev;
        calls += (head & 3) == FTR_EV_ENTRY; /* an empty slot (head 0) is taken back below */
        /* The common cases: a delta below 128 ticks (one byte) and a head of one byte (a site
         * below 32) or two (below 4096), not a special. Steps fixed per branch keep the loop
         * free of a dependency chain through hp and dp. */
        if (__builtin_expect(delta < 0x80 && (head & 3) != FTR_EV_SPECIAL, 1)) {
            if (head - 1 < 0x7f) {
                *hp++ = (uint8_t)head;
                *dp++ = (uint8_t)delta;
                prev = tsc;
                continue;
            }
            if (head - 1 < 0x3fff) {
                hp[0] = (uint8_t)(head | 0x80);
                hp[1] = (uint8_t)(head >> 7);
                hp += 2;
                *dp++ = (uint8_t)delta;
                prev = tsc;
                continue;
            }
        }
        if (head == 0) {
            empty++;
            calls--;
            continue;
        }
        if (tsc < prev) tsc = prev; /* tsc - prev wrapped: stored as 0 */
        if (head == ftr_rec_head(FTR_SP_VALUES, FTR_EV_SPECIAL)) {
            /* its payload slots follow, raw; a list cut off by the array's end is left out */
            size_t ns = ftr_values_slots(r[i].arg);
            if (ns > n - i - 1) {
                empty += n - i;
                break;
            }
            hp = put_varint(hp, head);
            hp = put_varint(hp, r[i].arg);
            for (size_t k = 1; k <= ns; k++) {
                ftr_wr_le64(hp, r[i + k].tsc);
                ftr_wr_le32(hp + 8, r[i + k].arg);
                hp += FTR_VALUES_SLOT_BYTES;
            }
            dp = put_varint(dp, tsc - prev);
            prev = tsc;
            empty += ns;
            i += ns;
            continue;
        }
        hp = put_varint(hp, head);
        if ((head & 3) == FTR_EV_SPECIAL) hp = put_varint(hp, r[i].arg);
        dp = put_varint(dp, tsc - prev);
        prev = tsc;
    }
    const uint32_t count = (uint32_t)(n - start - empty);
    size_t heads_len = (size_t)(hp - heads), deltas_len = (size_t)(dp - deltas);
    ftr_wr_le32(e->raw.data, count);
    ftr_wr_le32(e->raw.data + 4, (uint32_t)heads_len);
    memcpy(hp, deltas, deltas_len);
    e->raw.len = 8 + heads_len + deltas_len;
    int rc = emit_chunk(e, FTR_CHUNK_EVENTS, pid, tid, first, prev, seq, out);
    if (rc == FTR_OK) e->events = count, e->calls = calls;
    return rc;
}

void ftr_enc_last_counts(const struct ftr_enc *e, uint64_t *events, uint64_t *calls)
{
    *events = e->events;
    *calls = e->calls;
}

int ftr_dec_events_begin(const struct ftr_chunk_hdr *h, const uint8_t *p, size_t n,
                         struct ftr_ev_iter *it)
{
    memset(it, 0, sizeof(*it));
    if (h->type != FTR_CHUNK_EVENTS || n < 8) return FTR_E_CORRUPT;
    uint32_t count = ftr_rd_le32(p), heads_len = ftr_rd_le32(p + 4);
    size_t rest = n - 8;
    /* every event has at least one byte in each stream */
    if (heads_len > rest || count > heads_len || count > rest - heads_len) return FTR_E_CORRUPT;
    it->heads = p + 8;
    it->heads_end = it->deltas = p + 8 + heads_len;
    it->deltas_end = p + n;
    it->tsc = h->tsc_first;
    it->tsc_last = h->tsc_last;
    it->left = count;
    return FTR_OK;
}

int ftr_dec_events_next(struct ftr_ev_iter *it, struct ftr_event *ev)
{
    if (it->left == 0) {
        if (it->heads != it->heads_end || it->deltas != it->deltas_end || it->tsc != it->tsc_last)
            return -FTR_E_CORRUPT;
        return 0;
    }
    uint64_t head, delta, arg = 0;
    if (get_varint(&it->heads, it->heads_end, &head) || head > UINT32_MAX) return -FTR_E_CORRUPT;
    if ((head & 3) == FTR_EV_SPECIAL && get_varint(&it->heads, it->heads_end, &arg))
        return -FTR_E_CORRUPT;
    if (head == ftr_rec_head(FTR_SP_VALUES, FTR_EV_SPECIAL)) {
        if (arg > UINT32_MAX) return -FTR_E_CORRUPT;
        size_t len = (size_t)ftr_values_slots((uint32_t)arg) * FTR_VALUES_SLOT_BYTES;
        if ((size_t)(it->heads_end - it->heads) < len) return -FTR_E_CORRUPT;
        it->vals = it->heads;
        it->vals_len = (uint32_t)len;
        it->heads += len;
    }
    if (get_varint(&it->deltas, it->deltas_end, &delta) || it->tsc + delta < it->tsc)
        return -FTR_E_CORRUPT;
    it->tsc += delta;
    it->left--;
    ev->tsc = it->tsc;
    ev->site = (uint32_t)(head >> 2);
    ev->kind = (uint8_t)(head & 3);
    ev->arg = arg;
    return 1;
}

/* ====================================== decoders ===================================== */

int ftr_dec_process(const uint8_t *p, size_t n, struct ftr_process_info *pi, const char **argv,
                    size_t argv_cap)
{
    int rc = dec_fields(p, n, FIELDS(process_fields), pi, sizeof(*pi), argv, argv_cap);
    pi->argv = argv;
    return rc;
}

int ftr_dec_module(const uint8_t *p, size_t n, struct ftr_module_info *mi)
{
    return dec_fields(p, n, FIELDS(module_fields), mi, sizeof(*mi), NULL, 0);
}

int ftr_dec_thread(const uint8_t *p, size_t n, struct ftr_thread_info *ti)
{
    return dec_fields(p, n, FIELDS(thread_fields), ti, sizeof(*ti), NULL, 0);
}

int ftr_dec_end(const uint8_t *p, size_t n, struct ftr_end_info *ei)
{
    return dec_fields(p, n, FIELDS(end_fields), ei, sizeof(*ei), NULL, 0);
}

int ftr_dec_mark(const uint8_t *p, size_t n, struct ftr_mark_info *mi)
{
    return dec_fields(p, n, FIELDS(mark_fields), mi, sizeof(*mi), NULL, 0);
}

int ftr_dec_sites(const uint8_t *p, size_t n, uint32_t *module_id, struct ftr_site_info *s,
                  size_t cap, size_t *count)
{
    /* the columns, by tag; absent columns decode as zeros / NULL names */
    const uint8_t *col[SITES_KIND + 1] = {0};
    uint32_t col_len[SITES_KIND + 1] = {0};
    struct tlv_it it = {p, p + n};
    unsigned tag;
    const uint8_t *v;
    uint32_t len;
    int rc;
    while ((rc = tlv_next(&it, &tag, &v, &len)) > 0) {
        if (tag < SITES_MODULE_ID || tag > SITES_KIND) continue; /* unknown */
        col[tag] = v;
        col_len[tag] = len;
    }
    if (rc < 0 || !col[SITES_COUNT] || col_len[SITES_COUNT] != 4) return FTR_E_CORRUPT;
    if (col[SITES_MODULE_ID] && col_len[SITES_MODULE_ID] != 4) return FTR_E_CORRUPT;
    uint64_t cnt = ftr_rd_le32(col[SITES_COUNT]);
    if (cnt && !col[SITES_SITE]) return FTR_E_CORRUPT; /* it bounds cnt by the payload size */
    static const uint8_t width[SITES_STRTAB + 1] = {
        [SITES_SITE] = 4, [SITES_ADDR] = 8, [SITES_FUNC] = 8, [SITES_NAME] = 4};
    for (unsigned t = SITES_SITE; t <= SITES_NAME; t++)
        if (col[t] && col_len[t] != cnt * width[t]) return FTR_E_CORRUPT;
    if (col[SITES_KIND] && col_len[SITES_KIND] != cnt) return FTR_E_CORRUPT;
    const uint8_t *tab = col[SITES_STRTAB];
    uint32_t tab_len = col_len[SITES_STRTAB];
    if (tab && tab_len && tab[tab_len - 1] != 0) return FTR_E_CORRUPT;
    if (col[SITES_NAME]) /* every name offset must land in the string table */
        for (uint64_t i = 0; i < cnt; i++) {
            uint32_t off = ftr_rd_le32(col[SITES_NAME] + 4 * i);
            if (off != UINT32_MAX && (!tab || off >= tab_len)) return FTR_E_CORRUPT;
        }

    if (module_id) *module_id = col[SITES_MODULE_ID] ? ftr_rd_le32(col[SITES_MODULE_ID]) : 0;
    *count = (size_t)cnt;
    if (!s) return FTR_OK;
    for (size_t i = 0; i < cnt && i < cap; i++) {
        uint32_t off = col[SITES_NAME] ? ftr_rd_le32(col[SITES_NAME] + 4 * i) : UINT32_MAX;
        s[i].site = col[SITES_SITE] ? ftr_rd_le32(col[SITES_SITE] + 4 * i) : 0;
        s[i].addr = col[SITES_ADDR] ? ftr_rd_le64(col[SITES_ADDR] + 8 * i) : 0;
        s[i].func = col[SITES_FUNC] ? ftr_rd_le64(col[SITES_FUNC] + 8 * i) : 0;
        s[i].name = off == UINT32_MAX ? NULL : (const char *)tab + off;
        s[i].kind = col[SITES_KIND] ? col[SITES_KIND][i] : FTR_SITE_FUNCTION;
    }
    return FTR_OK;
}
