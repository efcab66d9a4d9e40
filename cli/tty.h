/*
 * tty.h - the terminal side of ftrace-report (not part of the report library): colours, the
 * pager, progress on stderr.
 */
#ifndef FTR_TTY_H
#define FTR_TTY_H

#include <stdint.h>

enum tty_when { TTY_AUTO, TTY_NEVER, TTY_ALWAYS };

/*! tty_color() : whether to colour what goes to fd: always, never, or (auto) when fd is a
 *  terminal, NO_COLOR is unset or empty and TERM is not "dumb". */
int tty_color(enum tty_when when, int fd);

/*! tty_pager_start() : when stdout is a terminal, runs $PAGER (default "less", with LESS=FRX
 *  unless LESS is set; none when PAGER is "" or "cat") and sends stdout to it.
 *  @return 1 when a pager runs, 0 otherwise */
int tty_pager_start(void);
/*! tty_pager_wait() : closes stdout and waits for the pager to end. */
void tty_pager_wait(void);
int tty_pager_running(void);

/* Progress on stderr: shown when stderr is a terminal, no pager runs, and the work took more
 * than a second; rewritten in place at most 5 times a second. */
void tty_progress_init(int enabled);
void tty_progress(void *arg, uint64_t done, uint64_t total); /* an frp_opts.progress */
void tty_progress_clear(void);

#endif
