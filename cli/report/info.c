/*
 * info.c - the header of a trace (--info): the file, then every process: command, pids,
 * start time, duration, clock, how it ended, counters, threads and modules. Read from the
 * tables only: no event is decoded, so it is instant on any trace.
 */
#define _GNU_SOURCE
#include "info.h"

#include "names.h"
#include "util.h"

#include <errno.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static void size_str(char *buf, size_t n, uint64_t bytes)
{
    if (bytes < 1024)
        snprintf(buf, n, "%llu bytes", (unsigned long long)bytes);
    else if (bytes < (1u << 20))
        snprintf(buf, n, "%.1f KiB", (double)bytes / 1024);
    else if (bytes < (1ull << 30))
        snprintf(buf, n, "%.1f MiB", (double)bytes / (1 << 20));
    else
        snprintf(buf, n, "%.2f GiB", (double)bytes / (1ull << 30));
}

static void write_end(struct frp_out *o, const struct frp_process *p)
{
    frp_out_lit(o, "  ended       ");
    if (!p->has_end) {
        frp_out_lit(o, "no end record (killed by SIGKILL, or the trace is cut)\n");
        return;
    }
    switch (p->end.how) {
    case FTR_END_EXIT:
        frp_out_printf(o, "exited with status %d\n", p->end.code);
        break;
    case FTR_END_SIGNAL: {
        char sig[32];
        frp_signal_name(p->end.code, sig, sizeof sig);
        if (sig[0] == 'S')
            frp_out_printf(o, "killed by signal %d (%s)\n", p->end.code, sig);
        else
            frp_out_printf(o, "killed by %s\n", sig);
        break;
    }
    case FTR_END_EXEC:
        frp_out_lit(o, "replaced by exec\n");
        break;
    default:
        frp_out_printf(o, "%s\n", ftr_end_how_name(p->end.how));
        break;
    }
}

static void write_process(struct frp_report *r, struct frp_out *o, const struct frp_process *p)
{
    char tmp[64];
    frp_out_printf(o, "\nprocess %u: %s\n", p->pid, p->cmdline);
    if (p->exe) frp_out_printf(o, "  executable  %s\n", p->exe);
    if (p->has_info) {
        if (p->parent)
            frp_out_printf(o, "  parent      %u (in this trace)%s\n", p->ppid,
                           p->after_exec ? "; this image replaced an earlier one by exec" : "");
        else
            frp_out_printf(o, "  parent      %u%s\n", p->ppid,
                           p->after_exec ? "; this image replaced an earlier one by exec" : "");
        frp_out_printf(o, "  session     %016llx\n", (unsigned long long)p->session_id);
        if (p->start_realtime_ns) {
            time_t t = (time_t)(p->start_realtime_ns / 1000000000);
            struct tm tm;
            char date[64] = "?";
            if (localtime_r(&t, &tm)) strftime(date, sizeof date, "%Y-%m-%d %H:%M:%S", &tm);
            char zone[16] = "";
            if (localtime_r(&t, &tm)) strftime(zone, sizeof zone, "%z", &tm);
            frp_out_printf(o, "  started     %s.%09llu %s\n", date,
                           (unsigned long long)(p->start_realtime_ns % 1000000000), zone);
        }
    } else {
        frp_out_lit(o, "  (no process record: the start of the trace is missing)\n");
    }
    uint64_t start = frp_proc_start(p);
    uint64_t end = p->has_end && p->end.tsc ? p->end.tsc : p->last_tsc;
    if (start != UINT64_MAX && end >= start) {
        frp_fmt_time(tmp, frp_ticks_to_ns(end - start, p->ns_per_tick));
        const char *s = tmp;
        while (*s == ' ')
            s++;
        frp_out_printf(o, "  duration    %s%s\n", s,
                       p->has_end ? "" : " (to the last event recorded)");
    }
    if (p->tsc_cal == FTR_TSC_CAL_MONOTONIC)
        frp_out_printf(o, "  clock       CLOCK_MONOTONIC (%s)\n",
                       p->clock_check & FTR_CLOCK_FORCED ? "chosen with FTRACE_CLOCK"
                       : !(p->clock_check & FTR_CLOCK_INVARIANT)
                           ? "the CPU does not say its TSC is invariant"
                           : "the kernel does not offer the TSC as a clocksource");
    else if (p->tsc_hz)
        frp_out_printf(o, "  clock       TSC at %.6f GHz (%s%s)\n", (double)p->tsc_hz / 1e9,
                       ftr_tsc_cal_name(p->tsc_cal),
                       !(p->clock_check & FTR_CLOCK_CHECKED) ? ""
                       : p->clock_check & FTR_CLOCK_FORCED   ? "; chosen with FTRACE_CLOCK"
                       : (p->clock_check & (FTR_CLOCK_INVARIANT | FTR_CLOCK_KERNEL)) ==
                               (FTR_CLOCK_INVARIANT | FTR_CLOCK_KERNEL)
                           ? "; invariant, stable"
                           : "");
    else
        frp_out_printf(o, "  clock       TSC rate unknown%s\n",
                       p->clock_guessed ? ": durations are in ticks"
                                        : ", taken from another process");
    write_end(o, p);
    if (p->has_end) {
        frp_out_printf(o,
                       "  events      %llu recorded (%llu calls), %llu lost (%llu calls), %llu "
                       "calls not traced (stack too deep)",
                       (unsigned long long)p->end.events, (unsigned long long)p->end.calls,
                       (unsigned long long)p->end.lost, (unsigned long long)p->end.lost_calls,
                       (unsigned long long)p->end.overruns);
        if (p->end.bytes_raw) {
            size_str(tmp, sizeof tmp, p->end.bytes_raw);
            frp_out_printf(o, ", %s of records", tmp);
        }
        frp_out_lit(o, "\n");
        frp_out_printf(
            o, "  sites       %llu found, %llu patched (%llu called through), %llu skipped\n",
            (unsigned long long)p->end.sites, (unsigned long long)p->end.patched,
            (unsigned long long)p->end.through, (unsigned long long)p->end.skipped);
    }
    frp_out_printf(o, "  threads     %u\n", p->nthreads);
    for (uint32_t i = 0; i < r->nthreads; i++) {
        const struct frp_thread *t = r->threads[i];
        if (t->proc != p) continue;
        frp_out_printf(o, "    %-8u %-16s %u chunk%s of events\n", t->tid,
                       t->name            ? t->name
                       : t->tid == p->pid ? "(main)"
                                          : "-",
                       t->nchunks, t->nchunks == 1 ? "" : "s");
    }
    if (p->nmarks) frp_out_printf(o, "  marks       %u (ftrace-ctl), after start:\n", p->nmarks);
    for (uint32_t i = 0; i < p->nmarks; i++) {
        const struct frp_mark *m = &p->marks[i];
        uint64_t t0 = frp_proc_start(p);
        char when[40], text[4200];
        frp_fmt_time(when, frp_ticks_to_ns(m->tsc > t0 ? m->tsc - t0 : 0, p->ns_per_tick));
        frp_mark_text(m, text, sizeof text);
        frp_out_printf(o, "    %s  %.4000s\n", when, text);
    }
    frp_out_printf(o, "  modules     %u\n", p->nmodules);
    for (uint32_t i = 0; i < p->nmodules; i++) {
        const struct frp_module *m = &p->modules[i];
        frp_out_printf(o, "    %s\n      base 0x%llx, %u site%s, build-id ", m->path,
                       (unsigned long long)m->base, m->nsites, m->nsites == 1 ? "" : "s");
        if (!m->build_id_len) frp_out_lit(o, "none");
        for (uint32_t k = 0; k < m->build_id_len; k++)
            frp_out_printf(o, "%02x", m->build_id[k]);
        frp_out_lit(o, "\n");
    }
}

int frp_info_write(struct frp_report *r, FILE *out)
{
    struct frp_out o;
    if (frp_out_init(&o, out, 1 << 16)) return errno = ENOMEM, -1;
    char size[32];
    size_str(size, sizeof size, r->file_size);
    uint64_t nchunks = 0;
    for (int i = 0; i < 8; i++)
        nchunks += r->chunks_by_type[i];
    frp_out_printf(&o, "file          %s\n", r->path);
    frp_out_printf(&o, "  size        %s, format %u.%u, %llu chunks\n", size, r->version_major,
                   r->version_minor, (unsigned long long)nchunks);
    frp_out_printf(&o, "  chunks      ");
    const char *sep = "";
    for (unsigned i = 1; i < 8; i++) {
        if (!r->chunks_by_type[i]) continue;
        frp_out_printf(&o, "%s%llu %s", sep, (unsigned long long)r->chunks_by_type[i],
                       ftr_chunk_type_name(i));
        sep = ", ";
    }
    if (r->chunks_by_type[0])
        frp_out_printf(&o, ", %llu of unknown types", (unsigned long long)r->chunks_by_type[0]);
    frp_out_lit(&o, "\n");
    char note[512];
    if (frp_report_note(r, NULL, note, sizeof note)) frp_out_printf(&o, "  damage      %s\n", note);
    frp_out_printf(&o, "  processes   %u, %u thread%s\n", r->nprocs, r->nthreads,
                   r->nthreads == 1 ? "" : "s");
    for (uint32_t i = 0; i < r->nprocs; i++)
        if (r->order[i]->selected) write_process(r, &o, r->order[i]);
    int rc = frp_out_finish(&o);
    int e = errno;
    frp_out_free(&o);
    errno = e;
    return rc;
}
