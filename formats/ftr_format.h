/*
 * ftr_format.h - the ftrace-run trace file format: the only code that knows its bytes.
 *
 * Used by the writer (preload/, through ftr_enc_*) and by every reader (cli/, through ftr_rd_*).
 * This library depends on libzstd only; it never links the preload.
 * docs/format.md describes the same format byte by byte; keep the two in step and bump
 * FTR_FORMAT_MINOR (compatible additions) or FTR_FORMAT_MAJOR (incompatible) with every change.
 *
 * All multi-byte fields are little-endian and are read and written through ftr_rd_le* /
 * ftr_wr_le* only; no struct is ever written to the file as it lies in memory.
 *
 * File = file header (16 bytes) followed by chunks until end of file.
 * Chunk = chunk header (48 bytes; 40 in files of major version 1) + payload of payload_size bytes
 * (one zstd frame, checksummed).
 * Chunks are self-delimiting and each carries the pid and tid it belongs to, so a file may hold
 * several processes of one session (fork) and a reader can skip damage by scanning for the
 * next chunk magic.
 *
 * Implemented by ftr_format.c (names, buffers, encoder, payload decoders) and ftr_reader.c (the
 * streaming reader ftr_reader_*: chunk framing checks and resynchronisation on damage).
 */
#ifndef FTR_FORMAT_H
#define FTR_FORMAT_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FTR_FORMAT_MAJOR 2
#define FTR_FORMAT_MINOR 4

#define FTR_FILE_MAGIC "FTRACE\x1a\x01" /* 8 bytes */
#define FTR_FILE_HEADER_SIZE 16
#define FTR_CHUNK_MAGIC 0x4b484346u       /* "FCHK" as little-endian bytes 'F','C','H','K' */
#define FTR_CHUNK_HEADER_SIZE 48          /* what this version writes */
#define FTR_CHUNK_HEADER_SIZE_V1 40       /* files of major version 1 (no seq field) */
#define FTR_CHUNK_MAX_PAYLOAD (64u << 20) /* readers refuse larger payloads as corrupt */
#define FTR_CHUNK_MAX_RAW (256u << 20)    /* limit of a decompressed payload, likewise */
/* The deepest a thread's calls nest in a trace: the tracer's shadow stack holds at most this many
 * frames (FTRACE_SHADOW_DEPTH), so a trace never has more calls open at once in one thread.
 * Readers keep no deeper frame: what a damaged or forged file nests deeper is counted, not kept
 * (docs/format.md, "Nesting"). */
#define FTR_DEPTH_MAX (1u << 20)

/* ---- errors: one table, expanded into the enum and ftr_strerror() ---- */
#define FTR_ERRORS(X)                                                                              \
    X(FTR_OK, "success")                                                                           \
    X(FTR_E_IO, "I/O error")                                                                       \
    X(FTR_E_NOMEM, "out of memory")                                                                \
    X(FTR_E_NOT_TRACE, "not an ftrace-run trace file")                                             \
    X(FTR_E_VERSION, "trace file written by a newer, incompatible ftrace-run")                     \
    X(FTR_E_EMPTY, "empty trace file")                                                             \
    X(FTR_E_TRUNCATED, "trace file is truncated")                                                  \
    X(FTR_E_CORRUPT, "corrupt data in trace file")                                                 \
    X(FTR_E_ZSTD, "zstd (de)compression failed")                                                   \
    X(FTR_E_EOF, "end of file")                                                                    \
    X(FTR_E_TOO_BIG, "chunk too large: split it (see FTR_CHUNK_MAX_RAW)")

#define FTR_X_ENUM(name, msg) name,
enum ftr_err { FTR_ERRORS(FTR_X_ENUM) FTR_ERR__COUNT };
#undef FTR_X_ENUM
/*! ftr_strerror() : @return a static one-line description of err or -err (never NULL). */
const char *ftr_strerror(int err);

/* ---- chunk types ---- */
#define FTR_CHUNK_TYPES(X)                                                                         \
    X(FTR_CHUNK_PROCESS, 1, "process") /* one per process: pid, command line, clocks */            \
    X(FTR_CHUNK_MODULE, 2, "module")   /* a loaded module (executable or library) */               \
    X(FTR_CHUNK_SITES, 3, "sites")     /* the function sites of one module, with names */          \
    X(FTR_CHUNK_EVENTS, 4, "events")   /* entry/exit events of one thread */                       \
    X(FTR_CHUNK_THREAD, 5, "thread")   /* a thread started or ended, its name */                   \
    X(FTR_CHUNK_END, 6, "end")         /* the process ended: how, and its counters */              \
    X(FTR_CHUNK_MARK, 7, "mark")       /* tracing switched, or its settings changed (ftrace-ctl) */

#define FTR_X_ENUM(name, val, str) name = val,
enum ftr_chunk_type { FTR_CHUNK_TYPES(FTR_X_ENUM) };
#undef FTR_X_ENUM
const char *ftr_chunk_type_name(unsigned type); /* "?" when unknown */
const char *ftr_event_kind_name(unsigned kind); /* "?" when unknown */
const char *ftr_special_name(unsigned special); /* "?" when unknown */

/* Chunk header as decoded. tsc_first/tsc_last bound the events of an EVENTS chunk (both 0 for
 * other chunk types), so a reader can merge threads in time order from the headers alone.
 * tid is the thread of EVENTS and THREAD chunks and 0 in the process-wide chunks. seq, in an
 * EVENTS chunk, is the position of its first record slot in its thread's stream of slots: a
 * thread's EVENTS chunks are in the order of their seq (their tsc_first need not be, nor their
 * place in the file). It is 0 in other chunk types and in files of major version 1. */
struct ftr_chunk_hdr {
    uint16_t type;
    uint16_t flags; /* reserved, 0 */
    uint32_t pid;
    uint32_t tid;
    uint32_t payload_size; /* stored (compressed) bytes following the header */
    uint64_t tsc_first;
    uint64_t tsc_last;
    uint64_t seq;
};

/*! ftr_chunk_hdr_decode() : decodes the FTR_CHUNK_HEADER_SIZE bytes at p into *h.
 *  @return 1 when they are a valid chunk header (magic, check, payload_size within
 *  FTR_CHUNK_MAX_PAYLOAD), else 0 (*h is then unspecified). */
int ftr_chunk_hdr_decode(const uint8_t *p, struct ftr_chunk_hdr *h);
/*! ftr_chunks_retarget() : the whole chunks in p[0..n) said to be process pid's, and only
 *  those whose type is in the mask keep (1 << type): the rest are cut out. @return the bytes
 *  left, or 0 when p does not hold whole valid chunks. */
size_t ftr_chunks_retarget(uint8_t *p, size_t n, uint32_t pid, uint32_t types);
/*! ftr_chunk_hdr_size() : the chunk header size of files of that major version (0: unknown). */
size_t ftr_chunk_hdr_size(unsigned major);
/*! ftr_chunk_hdr_decode_sized() : the same for a header of size bytes (ftr_chunk_hdr_size()). */
int ftr_chunk_hdr_decode_sized(const uint8_t *p, size_t size, struct ftr_chunk_hdr *h);

/* ---- event kinds (2 bits in each encoded event head) ---- */
#define FTR_EVENT_KINDS(X)                                                                         \
    X(FTR_EV_ENTRY, 0, "entry")   /* function site entered */                                      \
    X(FTR_EV_EXIT, 1, "exit")     /* function returned normally */                                 \
    X(FTR_EV_UNWIND, 2, "unwind") /* frame left without returning (longjmp, exception, ...) */     \
    X(FTR_EV_SPECIAL, 3, "special")

#define FTR_X_ENUM(name, val, str) name = val,
enum ftr_event_kind { FTR_EVENT_KINDS(FTR_X_ENUM) };
#undef FTR_X_ENUM

/* FTR_EV_SPECIAL events carry a subtype in the site field and one argument. */
#define FTR_SPECIALS(X)                                                                            \
    X(FTR_SP_LOST, 0, "lost")         /* arg = number of events lost at this point */              \
    X(FTR_SP_OVERRUN, 1, "overrun")   /* arg = calls not hooked: shadow stack full */              \
    X(FTR_SP_TRACE_ON, 2, "trace-on") /* tracing switched on (arg unused) */                       \
    X(FTR_SP_TRACE_OFF, 3, "trace-off")                                                            \
    X(FTR_SP_INHERITED, 4, "inherited") /* arg = the next arg ENTRY events of the thread re-enter  \
                                           frames a fork child inherited: not calls of its own */  \
    X(FTR_SP_SUSPENDED, 5, "suspended") /* arg = the next arg UNWIND events leave frames of a      \
                                           coroutine that switched away: they may resume */        \
    X(FTR_SP_RESUMED, 6, "resumed")     /* arg = the next arg ENTRY events re-enter frames of a    \
                                           resumed coroutine: the same calls, not new ones */      \
    X(FTR_SP_VALUES, 7, "values") /* arg = site | nslots << 24: argument or return values of that  \
                                     site, 12 * nslots bytes (ftr_values.h, ftr_ev_iter.vals) */   \
    X(FTR_SP_ASIDE, 8, "aside")   /* the thread traces no further (the tracer stepped aside; arg   \
                                     unused): its later events are hooks it interrupted, finishing \
                                     with a stale view; readers end the thread here */

#define FTR_X_ENUM(name, val, str) name = val,
enum ftr_special { FTR_SPECIALS(FTR_X_ENUM) };
#undef FTR_X_ENUM

/* One decoded event. site is a process-wide site index (see SITES chunks) for ENTRY, EXIT and
 * UNWIND events; for SPECIAL events it is the ftr_special subtype and arg its argument. */
struct ftr_event {
    uint64_t tsc;
    uint32_t site;
    uint8_t kind;
    uint64_t arg;
};

/* ---- little-endian helpers (the only way fields are read or written) ---- */
static inline void ftr_wr_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void ftr_wr_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline void ftr_wr_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t ftr_rd_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | p[1] << 8);
}
static inline uint32_t ftr_rd_le32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint64_t ftr_rd_le64(const uint8_t *p)
{
    return (uint64_t)ftr_rd_le32(p) | (uint64_t)ftr_rd_le32(p + 4) << 32;
}

/* ---- in-memory record written by the tracing hot path, consumed by ftr_enc_events() ----
 * Not a file structure. head = site << 2 | kind (ftr_rec_head()); arg is 0 except for
 * FTR_EV_SPECIAL, where head = subtype << 2 | FTR_EV_SPECIAL (ftr_rec_head(subtype,
 * FTR_EV_SPECIAL)) and arg is the special's argument. Site 0 is never a real site, so a record
 * with head == 0 (normally all-zero) is an empty slot (reserved but never filled): skipped.
 * A VALUES record (arg = site | nslots << 24) is followed by nslots payload slots that carry
 * its list, 12 bytes each (tsc: bytes 0-7, arg: bytes 8-11, little-endian; head 0): readers
 * of records take them with their VALUES, and skip them (as empty) without it. */
struct ftr_rec {
    uint64_t tsc;
    uint32_t head;
    uint32_t arg;
};
_Static_assert(sizeof(struct ftr_rec) == 16, "ftr_rec is 16 bytes");
#define FTR_VALUES_SLOT_BYTES 12
static inline uint32_t ftr_values_slots(uint32_t arg)
{
    return arg >> 24;
}
static inline uint32_t ftr_rec_head(uint32_t site, unsigned kind)
{
    return site << 2 | kind;
}
#define FTR_SITE_MAX ((1u << 30) - 1)

/* ---- growable byte buffer ---- */
struct ftr_buf {
    uint8_t *data;
    size_t len, cap;
};
/*! ftr_buf_reserve() : make room for n more bytes. @return FTR_OK or FTR_E_NOMEM */
int ftr_buf_reserve(struct ftr_buf *b, size_t n);
int ftr_buf_append(struct ftr_buf *b, const void *p, size_t n);
void ftr_buf_free(struct ftr_buf *b);

/* ---- metadata carried by the chunks (decoders point strings into the payload) ---- */
#define FTR_TSC_CALIBRATIONS(X)                                                                    \
    X(FTR_TSC_CAL_NONE, 0, "none")                                                                 \
    X(FTR_TSC_CAL_CPUID, 1, "cpuid leaf 0x15/0x16")                                                \
    X(FTR_TSC_CAL_KERNEL, 2, "kernel tsc_khz")                                                     \
    X(FTR_TSC_CAL_MEASURED, 3, "measured against CLOCK_MONOTONIC_RAW")                             \
    X(FTR_TSC_CAL_MONOTONIC, 4, "no TSC: CLOCK_MONOTONIC nanoseconds")
#define FTR_X_ENUM(name, val, str) name = val,
enum ftr_tsc_cal { FTR_TSC_CALIBRATIONS(FTR_X_ENUM) };
/* What the tracer found about the TSC at start (PROC_CLOCK_CHECK bits). */
#define FTR_CLOCK_CHECKED 1u   /* the checks ran */
#define FTR_CLOCK_INVARIANT 2u /* cpuid 0x80000007 edx[8]: constant and nonstop */
#define FTR_CLOCK_KERNEL 4u    /* the kernel offers tsc as a clocksource (synchronised, stable) */
#define FTR_CLOCK_FORCED 8u    /* FTRACE_CLOCK chose, whatever the checks said */
#undef FTR_X_ENUM
const char *ftr_tsc_cal_name(unsigned cal);

struct ftr_process_info {
    uint32_t pid, ppid;
    uint64_t session_id;        /* shared by every process of one ftrace-run session */
    uint64_t start_realtime_ns; /* CLOCK_REALTIME at start */
    uint64_t start_tsc;         /* TSC at the same moment */
    uint64_t tsc_hz;
    uint32_t tsc_calibration; /* enum ftr_tsc_cal */
    uint32_t clock_check;     /* FTR_CLOCK_* found at start (0: not recorded) */
    uint32_t argc;
    const char *const *argv;
    const char *exe; /* path of the executable */
};

struct ftr_module_info {
    uint32_t module_id; /* unique in the process; SITES chunks refer to it */
    uint64_t base;      /* load bias (dlpi_addr) */
    uint64_t load_tsc;  /* when it was patched in (0 = at start) */
    uint32_t build_id_len;
    const uint8_t *build_id;
    const char *path;
};

enum ftr_site_kind {
    FTR_SITE_FUNCTION = 0, /* a function's entry site */
    FTR_SITE_LIBCALL = 1,  /* a library call: addr is the caller's GOT slot, func the function
                              called, name its symbol (minor 2) */
};
struct ftr_site_info {
    uint32_t site;    /* process-wide site index, >= 1 */
    uint64_t addr;    /* runtime address of the call site */
    uint64_t func;    /* runtime address of the function's first byte */
    const char *name; /* symbol name, raw (not demangled) */
    uint8_t kind;     /* enum ftr_site_kind */
};

#define FTR_END_HOWS(X)                                                                            \
    X(FTR_END_UNKNOWN, 0, "unknown (killed?)")                                                     \
    X(FTR_END_EXIT, 1, "exited")                                                                   \
    X(FTR_END_SIGNAL, 2, "killed by signal")                                                       \
    X(FTR_END_EXEC, 3, "replaced by exec")                                                         \
    X(FTR_END_VANISHED, 4, "ended unseen: SIGKILL, a seccomp kill or a raw exit")
#define FTR_X_ENUM(name, val, str) name = val,
enum ftr_end_how { FTR_END_HOWS(FTR_X_ENUM) };
#undef FTR_X_ENUM
const char *ftr_end_how_name(unsigned how);

/* MARK chunks: what ftrace-ctl changed in a running process, and when (process-wide: written by
 * the control thread, which is not traced). */
#define FTR_MARKS(X)                                                                               \
    X(FTR_MARK_ON, 1, "tracing on")                                                                \
    X(FTR_MARK_OFF, 2, "tracing off")                                                              \
    X(FTR_MARK_FILTER, 3, "filter")       /* text: the new filter ("" = every function) */         \
    X(FTR_MARK_DEPTH, 4, "max-depth")     /* value: the new depth (0 = unlimited) */               \
    X(FTR_MARK_THRESHOLD, 5, "threshold") /* value: the new threshold, ns (0 = none) */            \
    X(FTR_MARK_ARGS, 6, "args")           /* text: the new -A specs ("" = none) */                 \
    X(FTR_MARK_RETVAL, 7, "retval")       /* text: the new -R specs ("" = none) */                 \
    X(FTR_MARK_LIBCALL, 8, "libcall")     /* value: 1 library calls on, 0 off (minor 2) */
#define FTR_X_ENUM(name, val, str) name = val,
enum ftr_mark_what { FTR_MARKS(FTR_X_ENUM) };
#undef FTR_X_ENUM
const char *ftr_mark_name(unsigned what); /* "?" when unknown */

struct ftr_mark_info {
    uint64_t tsc;
    uint32_t what; /* enum ftr_mark_what */
    uint64_t value;
    const char *text; /* may be NULL */
};

struct ftr_thread_info {
    uint32_t tid;
    uint32_t what; /* 1 = started, 2 = ended */
    uint64_t tsc;
    const char *name; /* may be NULL */
};

struct ftr_end_info {
    uint64_t tsc;
    uint32_t how;   /* enum ftr_end_how */
    int32_t code;   /* exit status or signal number */
    uint64_t calls; /* entry events recorded */
    uint64_t events, lost, sites, patched, skipped, overruns, bytes_raw;
    uint64_t through;    /* of the patched sites, those called through */
    uint64_t lost_calls; /* of the lost events, calls whose ENTRY was lost (0 in older files) */
};

/* ---- encoder: builds complete chunks (header + zstd payload) appended to an ftr_buf ---- */
struct ftr_enc;
/*! ftr_enc_new() : @return an encoder compressing at zstd level (1 is a good default), or NULL */
struct ftr_enc *ftr_enc_new(int zstd_level);
void ftr_enc_free(struct ftr_enc *e);
/*! ftr_enc_file_header() : appends the 16-byte file header. */
int ftr_enc_file_header(struct ftr_buf *out);
int ftr_enc_process(struct ftr_enc *e, const struct ftr_process_info *pi, struct ftr_buf *out);
int ftr_enc_module(struct ftr_enc *e, uint32_t pid, const struct ftr_module_info *mi,
                   struct ftr_buf *out);
int ftr_enc_sites(struct ftr_enc *e, uint32_t pid, uint32_t module_id,
                  const struct ftr_site_info *s, size_t n, struct ftr_buf *out);
int ftr_enc_thread(struct ftr_enc *e, uint32_t pid, const struct ftr_thread_info *ti,
                   struct ftr_buf *out);
int ftr_enc_end(struct ftr_enc *e, uint32_t pid, const struct ftr_end_info *ei,
                struct ftr_buf *out);
int ftr_enc_mark(struct ftr_enc *e, uint32_t pid, const struct ftr_mark_info *mi,
                 struct ftr_buf *out);
/*! ftr_enc_events_at() : encodes n hot-path records of one thread as one EVENTS chunk, r[0]
 *  being slot seq of the thread's stream (the chunk header's seq). Empty records (head == 0)
 *  are skipped; a record whose tsc is below its predecessor's is stored with the predecessor's
 *  tsc (a signal landing between rdtsc and the slot reservation).
 *  @return FTR_OK (nothing appended when no record is valid) or an error. */
int ftr_enc_events_at(struct ftr_enc *e, uint32_t pid, uint32_t tid, uint64_t seq,
                      const struct ftr_rec *r, size_t n, struct ftr_buf *out);
/*! ftr_enc_events() : ftr_enc_events_at() with seq 0 (a thread's chunks then tell no order
 *  but their time; for tests and tools). */
int ftr_enc_events(struct ftr_enc *e, uint32_t pid, uint32_t tid, const struct ftr_rec *r, size_t n,
                   struct ftr_buf *out);
/*! ftr_enc_last_counts() : the events, and of them the ENTRY events, that the last
 *  ftr_enc_events_at() / ftr_enc_events() encoded (0, 0 when it appended nothing). */
void ftr_enc_last_counts(const struct ftr_enc *e, uint64_t *events, uint64_t *calls);
/*! ftr_enc_set_level() : changes the zstd level of the following chunks (negative = faster).
 *  @return FTR_OK or FTR_E_ZSTD. */
int ftr_enc_set_level(struct ftr_enc *e, int zstd_level);
/*! ftr_enc_chunk() : a chunk of any type around a payload the caller encoded itself (raw[0..n),
 *  compressed here), for tools and tests that make what the other ftr_enc_* never would: the
 *  hostile files of the report's tests (one EVENTS chunk of tens of millions of events).
 *  @return FTR_OK or an error (nothing appended). */
int ftr_enc_chunk(struct ftr_enc *e, unsigned type, uint32_t pid, uint32_t tid, uint64_t tsc_first,
                  uint64_t tsc_last, uint64_t seq, const void *raw, size_t n, struct ftr_buf *out);
/* Every ftr_enc_* returns FTR_E_TOO_BIG (appending nothing) when the uncompressed payload would
 * exceed FTR_CHUNK_MAX_RAW: split the records, or the sites of a module into several SITES
 * chunks (each site carries its own index). */

/* ---- who still writes the file (ftr_lock.c) ---- */
/* A writer, from its open until its END is written (the lock goes with the last descriptor
 * of its open file description). @return 0, or -1 with errno (no lock: nothing says so). */
int ftr_lock_writer(int fd, uint32_t pid);
/* Without blocking: 1 (a writer's pid in *pid), 0 (none), -1 (cannot tell: errno). */
int ftr_lock_holder(int fd, uint32_t *pid);
/* Waits until no writer holds one. @return 0, or -1 (cannot tell: errno). */
int ftr_lock_wait(int fd);
/*! ftr_lock_release() : the writer's lock for pid let go (its END is written). */
int ftr_lock_release(int fd, uint32_t pid);

/* ---- reader: chunk by chunk, streaming ---- */
struct ftr_reader;
/*! ftr_reader_open() : opens and checks the file header. @return FTR_OK, FTR_E_IO (errno set),
 *  FTR_E_EMPTY, FTR_E_NOT_TRACE, FTR_E_TRUNCATED or FTR_E_VERSION. */
int ftr_reader_open(const char *path, struct ftr_reader **out);
void ftr_reader_close(struct ftr_reader *r);
/*! ftr_reader_next() : reads the next chunk header. A chunk is returned only when it holds
 *  together: a valid header, its payload_size ending at the end of the file or at another valid
 *  header, and no valid header inside it; or else a payload that is a zstd frame whose size and
 *  checksum check out (docs/format.md, "Reading and damage"). Anything else (a chunk cut short,
 *  a wrong size field, garbage, a hole of zeros) is skipped by scanning on, byte by byte, for
 *  the next chunk that does; the skipped bytes are counted (see _damage). The chunk returned is
 *  read whole into memory (up to FTR_CHUNK_MAX_PAYLOAD), not decompressed.
 *  @return FTR_OK, FTR_E_EOF at a clean end, FTR_E_TRUNCATED when the file ends inside a chunk,
 *  FTR_E_IO, FTR_E_NOMEM. *offset receives the chunk's file offset (for ftr_reader_seek). */
int ftr_reader_next(struct ftr_reader *r, struct ftr_chunk_hdr *h, uint64_t *offset);
/*! ftr_reader_payload() : decompresses the payload of the chunk last returned by
 *  ftr_reader_next() into out (replacing its contents). @return FTR_OK, FTR_E_CORRUPT or
 *  FTR_E_ZSTD (the chunk is then counted in bad_chunks; go on with ftr_reader_next()),
 *  FTR_E_NOMEM, FTR_E_IO, FTR_E_TRUNCATED (the file shrank). */
int ftr_reader_payload(struct ftr_reader *r, struct ftr_buf *out);
/*! ftr_reader_seek() : positions the reader so that the next ftr_reader_next() returns the chunk
 *  at offset (as returned earlier). */
int ftr_reader_seek(struct ftr_reader *r, uint64_t offset);
/* Damage met so far (cumulative; re-reading a damaged stretch after a seek counts it again). */
struct ftr_damage {
    uint64_t skipped_bytes; /* bytes passed over while looking for a chunk that holds together */
    uint64_t bad_chunks;    /* chunks returned whose payload then did not decode */
    int truncated;          /* the file ended inside a chunk */
    /* valid chunk headers among the skipped bytes: chunks cut short, or whose size field or
     * payload did not hold (their bytes are in skipped_bytes) */
    uint64_t skipped_chunks;
    uint64_t skipped_runs;                   /* separate stretches of skipped bytes */
    uint64_t first_skip_off, first_skip_len; /* the first stretch: file offset, bytes */
    uint64_t last_skip_off, last_skip_len;   /* the last one */
    uint64_t truncated_off; /* when truncated: where the incomplete chunk (or header) starts */
};
void ftr_reader_damage(const struct ftr_reader *r, struct ftr_damage *d);

/* ---- payload decoders (strings and argv point into the payload buffer) ---- */
/* Every decoder returns FTR_OK or FTR_E_CORRUPT; fields whose tag is absent are 0 / NULL.
 * argv is filled up to argv_cap entries (pi->argc tells the real count; pi->argv = argv). */
int ftr_dec_process(const uint8_t *p, size_t n, struct ftr_process_info *pi, const char **argv,
                    size_t argv_cap);
int ftr_dec_module(const uint8_t *p, size_t n, struct ftr_module_info *mi);
/* sites: with s == NULL only *count is set (the number of sites), so a caller can size the
 * array, then call again with cap >= count (at most cap entries are filled). */
int ftr_dec_sites(const uint8_t *p, size_t n, uint32_t *module_id, struct ftr_site_info *s,
                  size_t cap, size_t *count);
int ftr_dec_thread(const uint8_t *p, size_t n, struct ftr_thread_info *ti);
int ftr_dec_end(const uint8_t *p, size_t n, struct ftr_end_info *ei);
int ftr_dec_mark(const uint8_t *p, size_t n, struct ftr_mark_info *mi);

struct ftr_ev_iter {
    const uint8_t *heads, *heads_end, *deltas, *deltas_end;
    uint64_t tsc, tsc_last;
    uint32_t left;
    /* the value list of the VALUES event returned last (into the payload) */
    const uint8_t *vals;
    uint32_t vals_len;
};
/*! ftr_dec_events_begin() : starts decoding an EVENTS payload of the chunk h.
 *  @return FTR_OK or FTR_E_CORRUPT. */
int ftr_dec_events_begin(const struct ftr_chunk_hdr *h, const uint8_t *p, size_t n,
                         struct ftr_ev_iter *it);
/*! ftr_dec_events_next() : @return 1 with *ev filled, 0 at the end, FTR_E_CORRUPT (negated) on
 *  damage: -FTR_E_CORRUPT (stop there). The end also checks that both streams were consumed
 *  exactly and that the last tsc equals h->tsc_last. */
int ftr_dec_events_next(struct ftr_ev_iter *it, struct ftr_event *ev);

#ifdef __cplusplus
}
#endif
#endif /* FTR_FORMAT_H */
