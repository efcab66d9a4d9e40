/*
 * recorder.h - the recorder process: the session's writer, outside the program.
 *
 * docs/design.md, "Where the machinery lives". An image that finds no recorder in its
 * environment starts one (ftr_recorder_start: a double fork, so that it is neither the
 * program's child nor its parent, in a session of its own) and every traced image of the
 * session connects to it over a Unix stream socket in the abstract namespace (its name in
 * FTRACE_RECORDER) once, to send its HELLO with its region's memfd (SCM_RIGHTS), and closes
 * the connection: everything else goes through the region (region.h: the chunks, the threads'
 * slots, the metadata log, the count of forks, the end). The recorder reads the region
 * (drain.c) and writes the file; it learns an image's end from the region's header (the
 * process wrote it) or from a pidfd (the process is gone), and then writes the END itself.
 * The process never waits for the recorder but at its end (bounded), and a hook never talks
 * to it: a full chunk is a futex wake on the region's header.
 */
#ifndef FTR_RECORDER_H
#define FTR_RECORDER_H

#include <stddef.h>
#include <stdint.h>

#include "ftr_format.h"

/* ---- the HELLO: struct ftr_msg_hello, then argc NUL-terminated arguments and the
 * executable's path; the region's memfd comes with it (SCM_RIGHTS) ---- */
struct ftr_msg_hello {
    uint32_t size; /* of the whole message */
    uint32_t pid, ppid;
    uint32_t fork_of;   /* a fork child: its parent's pid (the modules are the parent's) */
    uint64_t fork_meta; /* ... as the first fork_meta bytes of its parent's metadata log */
    uint64_t session_id, start_realtime_ns, start_tsc;
    uint64_t cal_raw_ns, cal_tsc; /* the calibration base: CLOCK_MONOTONIC_RAW and ticks then */
    uint64_t tsc_hz;              /* known already (CLOCK_MONOTONIC ticks; a fork child), or 0 */
    uint32_t tsc_calibration, clock_check;
    uint32_t clock_mono, lossless, zstd_level, flush_ms;
    uint32_t chunk_nrec; /* records per chunk */
    uint32_t argc;
};

#define FTR_RECORDER_NAME_MAX 64 /* the socket's abstract name, in FTRACE_RECORDER */

/* ---- the process's side (recorder_client.c) ---- */

/* This image joins the session's recorder, or starts one (trace_fd: the file, opened; the
 * recorder writes it from now on, and the caller may close its descriptor). @return 0, or -1:
 * no recorder (the caller writes the file itself, as a writer thread). */
int ftr_recorder_join(int trace_fd) __attribute__((visibility("hidden")));
int ftr_recorder_on(void) __attribute__((visibility("hidden")));
/* pre-encoded chunks to the recorder, through the region's metadata log (not from a hook) */
void ftr_recorder_meta(const struct ftr_buf *chunks) __attribute__((visibility("hidden")));
/* The image's end: its END fields into the region; then, if the image may print the run's
 * summary line (which wants the recorder's counts), wait (bounded) for the recorder to have
 * written everything and the END. Otherwise (a fork child, a program it ran) the recorder
 * finishes on its own: the records are in the region, and it holds the process's lock in the
 * file until the END is written, and the session's first process hears of its own END only
 * once those of the processes gone are written (recorder.c). @return 1 if it waited and the
 * recorder did. */
int ftr_recorder_end(const struct ftr_end_info *end, int from_signal)
    __attribute__((visibility("hidden")));
/* fork(): counted in the region (the prepare handler, under the metadata lock); in the child,
 * its HELLO */
void ftr_recorder_prepare_fork(void) __attribute__((visibility("hidden")));
void ftr_recorder_parent_fork(void) __attribute__((visibility("hidden")));
/* a fork child that does not trace: the parent's connection let go */
void ftr_recorder_forget(void) __attribute__((visibility("hidden")));
int ftr_recorder_child_fork(void) __attribute__((visibility("hidden")));
/* Why the last HELLO (a fork child's, an exec's that failed) could not be said: one line */
const char *ftr_recorder_error(void) __attribute__((visibility("hidden")));
/* An exec failed after the END: this image goes on (a new HELLO) */
int ftr_recorder_resume(void) __attribute__((visibility("hidden")));

/* ---- the recorder process (recorder.c) ---- */
/* Runs the recorder on listening socket lfd (its abstract name) and path_lfd (its path in the
 * control directory, for processes in another network namespace; -1: none, else removed when
 * the recorder ends), writing through trace_fd (its own open file description, locked for
 * first_pid already). Never returns. */
void ftr_recorder_main(int lfd, int path_lfd, int trace_fd, uint32_t first_pid)
    __attribute__((visibility("hidden"), noreturn));

#endif
