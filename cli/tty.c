/*
 * tty.c - colours, pager and progress for ftrace-report.
 */
#define _GNU_SOURCE
#include "tty.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

int tty_color(enum tty_when when, int fd)
{
    if (when != TTY_AUTO) return when == TTY_ALWAYS;
    const char *no = getenv("NO_COLOR");
    if (no && *no) return 0;
    const char *term = getenv("TERM");
    if (term && strcmp(term, "dumb") == 0) return 0;
    return isatty(fd);
}

static pid_t pager_pid = -1;

int tty_pager_running(void)
{
    return pager_pid > 0;
}

int tty_pager_start(void)
{
    if (!isatty(STDOUT_FILENO)) return 0;
    const char *pager = getenv("PAGER");
    if (!pager) pager = "less";
    while (*pager == ' ')
        pager++;
    if (!*pager || strcmp(pager, "cat") == 0) return 0;
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) < 0) return 0;
    fflush(stdout);
    pid_t pid = fork();
    if (pid < 0) {
        close(fds[0]);
        close(fds[1]);
        return 0;
    }
    if (pid == 0) {
        dup2(fds[0], STDIN_FILENO);
        setenv("LESS", "FRX", 0);
        setenv("LV", "-c", 0);
        execl("/bin/sh", "sh", "-c", pager, (char *)NULL);
        fprintf(stderr, "ftrace-report: cannot run the pager '%s': %s\n", pager, strerror(errno));
        _exit(127);
    }
    dup2(fds[1], STDOUT_FILENO);
    close(fds[0]);
    close(fds[1]);
    pager_pid = pid;
    signal(SIGPIPE, SIG_IGN); /* quitting the pager early is not an error: writes fail EPIPE */
    return 1;
}

void tty_pager_wait(void)
{
    if (pager_pid <= 0) return;
    fflush(stdout);
    close(STDOUT_FILENO);
    while (waitpid(pager_pid, NULL, 0) < 0 && errno == EINTR)
        ;
    pager_pid = -1;
}

/* ---- progress ---- */
static struct {
    int enabled, shown;
    double start, last;
} pg;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

void tty_progress_init(int enabled)
{
    pg.enabled = enabled && isatty(STDERR_FILENO);
    pg.shown = 0;
    pg.start = pg.last = now();
}

void tty_progress(void *arg, uint64_t done, uint64_t total)
{
    (void)arg;
    if (!pg.enabled || pager_pid > 0) return;
    if (done >= total) { /* the end: the view writes next */
        tty_progress_clear();
        return;
    }
    double t = now();
    if (t - pg.start < 1.0 || t - pg.last < 0.2) return;
    pg.last = t;
    pg.shown = 1;
    fprintf(stderr, "\rftrace-report: reading events %3u%% (%llu of %llu chunks)\033[K",
            (unsigned)(total ? done * 100 / total : 0), (unsigned long long)done,
            (unsigned long long)total);
    fflush(stderr);
}

void tty_progress_clear(void)
{
    if (!pg.shown) return;
    fputs("\r\033[K", stderr);
    fflush(stderr);
    pg.shown = 0;
}
