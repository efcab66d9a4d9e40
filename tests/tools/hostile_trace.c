/* hostile-trace: writes the trace files that ftrace-report must survive with bounded memory
 * (tests/integration/report_hostile_tests.py), with the format's own encoder (formats/):
 *
 *   hostile-trace nested N OUT   one thread whose one EVENTS chunk is N entries of one function
 *                                at one time, never left: tens of millions of nested calls in a
 *                                few kilobytes (issue 29: 60 million in 4.7 KB). The encoder of
 *                                the tracer makes chunks of at most ~9 million events, so this
 *                                one's payload is laid out here (docs/format.md, "EVENTS
 *                                payload") and wrapped by ftr_enc_chunk().
 *   hostile-trace chain D OUT    one thread: D nested calls, then their D returns, 1 us apart,
 *                                in chunks of at most 2^20 events (ftr_enc_events_at, as the
 *                                tracer writes them): a recursion D deep.
 *
 * Both files hold a whole process (PROCESS, MODULE, SITES, EVENTS, END; clock 1 GHz).
 * Exit status 0, or 1 with a message on stderr.
 */
#include "ftr_format.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PID 4242
#define FN_SITE 1 /* "hostile_fn" */
#define PIECE (1u << 20)

static void die(const char *what, int rc)
{
    fprintf(stderr, "hostile-trace: %s: %s\n", what, ftr_strerror(rc));
    exit(1);
}

static void check(const char *what, int rc)
{
    if (rc != FTR_OK) die(what, rc);
}

/* The chunks before the events: the process, its executable, the function's site. */
static void prologue(struct ftr_enc *e, struct ftr_buf *f, const char *cmd)
{
    const char *argv[] = {"hostile", cmd};
    struct ftr_process_info pi = {.pid = PID,
                                  .ppid = 1,
                                  .start_tsc = 1000,
                                  .start_realtime_ns = 1700000000000000000ull,
                                  .tsc_hz = 1000000000,
                                  .tsc_calibration = FTR_TSC_CAL_MEASURED,
                                  .argc = 2,
                                  .argv = argv,
                                  .exe = "/bin/hostile"};
    struct ftr_module_info mi = {.module_id = 1, .base = 0x400000, .path = "/bin/hostile"};
    struct ftr_site_info si = {FN_SITE, 0x401000, 0x401000, "hostile_fn", FTR_SITE_FUNCTION};
    check("file header", ftr_enc_file_header(f));
    check("process", ftr_enc_process(e, &pi, f));
    check("module", ftr_enc_module(e, PID, &mi, f));
    check("sites", ftr_enc_sites(e, PID, 1, &si, 1, f));
}

static void epilogue(struct ftr_enc *e, struct ftr_buf *f, uint64_t tsc, uint64_t calls,
                     uint64_t events)
{
    struct ftr_end_info ei = {.tsc = tsc,
                              .how = FTR_END_EXIT,
                              .calls = calls,
                              .events = events,
                              .sites = 1,
                              .patched = 1};
    check("end", ftr_enc_end(e, PID, &ei, f));
}

/* One EVENTS chunk of n ENTRY events of FN_SITE at tsc: heads and deltas of one byte each. */
static void nested(struct ftr_enc *e, struct ftr_buf *f, uint64_t n)
{
    uint64_t tsc = 2000;
    if (n == 0 || n > (FTR_CHUNK_MAX_RAW - 8) / 2) die("nested", FTR_E_TOO_BIG);
    size_t len = 8 + 2 * (size_t)n;
    uint8_t *raw = malloc(len);
    if (!raw) die("nested", FTR_E_NOMEM);
    ftr_wr_le32(raw, (uint32_t)n);
    ftr_wr_le32(raw + 4, (uint32_t)n);
    memset(raw + 8, (int)ftr_rec_head(FN_SITE, FTR_EV_ENTRY), (size_t)n); /* varint < 128 */
    memset(raw + 8 + n, 0, (size_t)n);                                    /* deltas: 0 */
    check("events", ftr_enc_chunk(e, FTR_CHUNK_EVENTS, PID, PID, tsc, tsc, 0, raw, len, f));
    free(raw);
    epilogue(e, f, tsc, n, n);
}

/* d entries then d exits of FN_SITE, 1000 ticks apart, in pieces of PIECE records. */
static void chain(struct ftr_enc *e, struct ftr_buf *f, uint64_t d)
{
    struct ftr_rec *r = malloc(PIECE * sizeof *r);
    if (!r) die("chain", FTR_E_NOMEM);
    uint64_t total = 2 * d, tsc = 2000;
    for (uint64_t seq = 0; seq < total; seq += PIECE) {
        size_t n = total - seq < PIECE ? (size_t)(total - seq) : PIECE;
        for (size_t i = 0; i < n; i++, tsc += 1000) {
            unsigned kind = seq + i < d ? FTR_EV_ENTRY : FTR_EV_EXIT;
            r[i] = (struct ftr_rec){tsc, ftr_rec_head(FN_SITE, kind), 0};
        }
        check("events", ftr_enc_events_at(e, PID, PID, seq, r, n, f));
    }
    free(r);
    epilogue(e, f, tsc, d, total);
}

int main(int argc, char **argv)
{
    char *end;
    errno = 0;
    unsigned long long n = argc == 4 ? strtoull(argv[2], &end, 10) : 0;
    int is_nested = argc == 4 && strcmp(argv[1], "nested") == 0;
    if (argc != 4 || (!is_nested && strcmp(argv[1], "chain") != 0) || errno || *end || !n) {
        fputs("usage: hostile-trace nested N OUT | chain D OUT\n", stderr);
        return 1;
    }
    struct ftr_enc *e = ftr_enc_new(3);
    if (!e) die("encoder", FTR_E_NOMEM);
    struct ftr_buf f = {0};
    prologue(e, &f, argv[1]);
    if (is_nested)
        nested(e, &f, n);
    else
        chain(e, &f, n);
    ftr_enc_free(e);
    FILE *out = fopen(argv[3], "wb");
    if (!out || fwrite(f.data, 1, f.len, out) != f.len || fclose(out) != 0) {
        fprintf(stderr, "hostile-trace: %s: %s\n", argv[3], strerror(errno));
        return 1;
    }
    ftr_buf_free(&f);
    return 0;
}
