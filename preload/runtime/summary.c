/*
 * summary.c - the run's one summary line ("N calls traced into FILE (K KiB)..."), and what an
 * image that execs carries to the next for it.
 *
 * The session's first process says it (each process of a session that was started by an
 * uninstrumented one says its own); a fork child or another program it started says only that
 * its writing failed. A process is a chain of images, one per exec: the line is printed once,
 * by the chain's last image, with the chain's totals. An image that execs prints nothing and
 * gives its totals to the next in FTR_ENV_CARRY, which the exec wrappers (process.c) add to the
 * new environment and the next image's constructor takes out of its own; that image adds its
 * own and prints at its end, or at once when it does not trace (no sites: /bin/true, a shell;
 * or it could not start). When the next image will not load us at all (a static or 32-bit
 * program, one that drops LD_PRELOAD: process.c, loads_preload), the line is printed at the
 * exec instead. An exec that fails carries to the same image.
 */
#define _GNU_SOURCE
#include <inttypes.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ftr_env.h"
#include "retaddr.h"
#include "tracer.h"

extern struct ftr_process_info ftr_process;

/* what the line says; a chain's totals are the sum of its images' (skipped: the most any one
 * image had, with its names: an image that execs itself skips the same functions each time) */
struct totals {
    uint64_t calls, bytes, lost, lost_calls;
    uint64_t deep, held, book, sw; /* calls run unhooked, by cause */
    uint64_t skipped;
    unsigned clock; /* 0, or why the clock is CLOCK_MONOTONIC: clock_notes[clock] */
    char names[300];
};

static struct totals carried; /* the images before this one in the process */
static int have_carried;
static uint32_t carried_pid; /* a fork child's copy of them is its parent's */
static char carry_env[512];  /* FTR_ENV_CARRY=..., for the next image */

static int carrying(void)
{
    return have_carried && carried_pid == ftr_g.pid;
}

static const char *const clock_notes[] = {
    "", "; timed with CLOCK_MONOTONIC, slower: the CPU does not say its TSC is invariant",
    "; timed with CLOCK_MONOTONIC, slower: the kernel does not offer the TSC as a clocksource"};

/* Durations are CLOCK_MONOTONIC nanoseconds when no TSC could be trusted (init.c, choose_clock):
 * said in the run's one summary line, not by every process of the run that starts. */
static unsigned clock_note(void)
{
    unsigned check = ftr_process.clock_check;
    if (!ftr_hot.clock_mono || !(check & FTR_CLOCK_CHECKED) || (check & FTR_CLOCK_FORCED)) return 0;
    return !(check & FTR_CLOCK_INVARIANT) ? 1 : 2;
}

/* This image's totals so far, with those carried to it. */
static void totals(struct totals *t)
{
    if (carrying())
        *t = carried;
    else
        memset(t, 0, sizeof *t);
    t->calls += ftr_writer_calls();
    t->bytes += ftr_writer_bytes();
    t->lost += ftr_writer_end_lost();
    t->lost_calls += ftr_writer_end_lost_calls();
    uint64_t over = ftr_overrun_calls(), book = atomic_load(&ftr_ret_full);
    uint64_t sw = atomic_load(&ftr_switch_missed), held = atomic_load(&ftr_ret_held);
    if (book > over) book = over;
    if (sw > over - book) sw = over - book;
    if (held > over - book - sw) held = over - book - sw;
    t->deep += over - book - sw - held;
    t->held += held;
    t->book += book;
    t->sw += sw;
    if (ftr_g.skipped > t->skipped) {
        t->skipped = ftr_g.skipped;
        ftr_modules_skipped_names(t->names, sizeof t->names);
    }
    if (clock_note()) t->clock = clock_note();
}

/* Would this image say the line at its end? (its writing failed: it says that, never carried) */
static int says_line(void)
{
    uint32_t owner = (uint32_t)ftr_process.session_id;
    int mine = owner == (uint32_t)ftr_g.pid, wrote = ftr_writer_bytes() != 0 || carrying();
    return (mine && (ftr_is_root || wrote)) || (owner == 0 && wrote);
}

int ftr_summary_may_say(void)
{
    uint32_t owner = (uint32_t)ftr_process.session_id;
    return owner == (uint32_t)ftr_g.pid || owner == 0;
}

static int cat(char *buf, size_t len, int n, const char *fmt, uint64_t v, const char *what)
{
    if (!v || n < 0 || (size_t)n >= len) return n;
    return n +
           snprintf(buf + n, len - (size_t)n, fmt, (unsigned long long)v, v == 1 ? "" : "s", what);
}

/* "; N functions could not be traced: a, b, see --info" */
static void skipped_note(const struct totals *t, char *out, size_t len)
{
    out[0] = 0;
    if (t->skipped)
        snprintf(out, len, "; %llu function%s could not be traced: %s%ssee --info",
                 (unsigned long long)t->skipped, t->skipped == 1 ? "" : "s", t->names,
                 t->names[0] ? ", " : "");
}

static void say(const struct totals *t)
{
    char skipped[384];
    skipped_note(t, skipped, sizeof skipped);
    char deep[256] = ""; /* calls run unhooked: a shadow stack was full, or the book */
    int n = 0;
    n = cat(deep, sizeof deep, n, ", %llu call%s not traced (%s)", t->deep,
            "the shadow stack was full: FTRACE_SHADOW_DEPTH");
    n = cat(deep, sizeof deep, n, ", %llu call%s not traced (%s)", t->held,
            "a suspended frame's copy holds its slot");
    n = cat(deep, sizeof deep, n, ", %llu call%s not traced (%s)", t->book,
            "no room left for return addresses");
    cat(deep, sizeof deep, n, ", %llu call%s not traced (%s)", t->sw,
        "a signal handler during a coroutine switch");
    char lost[96] = ""; /* ", N events lost (M calls)" */
    if (t->lost)
        snprintf(lost, sizeof lost, ", %llu event%s lost (%llu call%s)",
                 (unsigned long long)t->lost, t->lost == 1 ? "" : "s",
                 (unsigned long long)t->lost_calls, t->lost_calls == 1 ? "" : "s");
    ftr_msg("%llu calls traced into %s (%.1f KiB)%s%s%s%s", (unsigned long long)t->calls,
            ftr_cfg.output, (double)t->bytes / 1024.0, lost, deep, skipped,
            clock_notes[t->clock < 3 ? t->clock : 0]);
}

void ftr_summary_print(void)
{
    int failed = ftr_writer_failed();
    struct totals t;
    totals(&t);
    if (failed) {
        char skipped[384];
        skipped_note(&t, skipped, sizeof skipped);
        ftr_msg("writing %s failed (%s): %llu bytes of trace lost%s", ftr_cfg.output,
                strerror(failed), (unsigned long long)ftr_writer_dropped(), skipped);
    } else if (says_line())
        say(&t);
    have_carried = 0;
    memset(&carried, 0, sizeof carried);
}

const char *ftr_summary_exec(int next_loads)
{
    if (ftr_writer_failed() || !says_line() || !next_loads) {
        ftr_summary_print();
        return NULL;
    }
    struct totals t;
    totals(&t);
    snprintf(carry_env, sizeof carry_env,
             "%s=%u:%" PRIu64 ":%" PRIu64 ":%" PRIu64 ":%" PRIu64 ":%" PRIu64 ":%" PRIu64
             ":%" PRIu64 ":%" PRIu64 ":%" PRIu64 ":%u:%s",
             FTR_ENV_CARRY, (unsigned)ftr_g.pid, t.calls, t.bytes, t.lost, t.lost_calls, t.deep,
             t.held, t.book, t.sw, t.skipped, t.clock, t.names);
    return carry_env;
}

void ftr_summary_resume(void)
{
    /* the writer starts its counts afresh; every other count is the process's */
    if (!carrying()) memset(&carried, 0, sizeof carried);
    carried.calls += ftr_writer_calls();
    carried.bytes += ftr_writer_bytes();
    have_carried = carried.bytes != 0;
    carried_pid = ftr_g.pid;
}

void ftr_summary_take_carried(void)
{
    const char *v = getenv(FTR_ENV_CARRY);
    if (!v) return;
    struct totals t;
    unsigned pid;
    int at = 0;
    memset(&t, 0, sizeof t);
    if (sscanf(v,
               "%u:%" SCNu64 ":%" SCNu64 ":%" SCNu64 ":%" SCNu64 ":%" SCNu64 ":%" SCNu64 ":%" SCNu64
               ":%" SCNu64 ":%" SCNu64 ":%u:%n",
               &pid, &t.calls, &t.bytes, &t.lost, &t.lost_calls, &t.deep, &t.held, &t.book, &t.sw,
               &t.skipped, &t.clock, &at) >= 11 &&
        at > 0 && pid == (unsigned)ftr_getpid()) { /* an exec keeps the pid */
        snprintf(t.names, sizeof t.names, "%s", v + at);
        carried = t;
        have_carried = 1;
        carried_pid = pid;
    }
    unsetenv(FTR_ENV_CARRY);
}

void ftr_summary_untraced(void)
{
    if (carrying()) ftr_summary_print();
}
