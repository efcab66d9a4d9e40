/* libmark.c - the library inject_tests.py injects: its constructor appends "PID TID PATH" (the
 * process, the thread that loaded it, the file it was loaded from) to MARKER, a path given at
 * build time (-DMARKER=...). Built with -DBAD, it needs a function nobody defines, so that
 * dlopen(RTLD_NOW) fails. Built with -DSLOW_MS=N, the constructor first sleeps N ms (a
 * nanosleep, its own restarts included), so that the injector can be killed while the call
 * runs. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef BAD
extern int inject_tests_no_such_function(void);
int needs_it(void)
{
    return inject_tests_no_such_function();
}
#endif

__attribute__((constructor)) static void mark(void)
{
#ifdef SLOW_MS
    struct timespec d = {SLOW_MS / 1000, (SLOW_MS % 1000) * 1000000L};
    while (nanosleep(&d, &d) < 0)
        ;
#endif
    Dl_info info;
    char *line = malloc(4200); /* the program's malloc, as any library's constructor may */
    if (!line || !dladdr((void *)mark, &info)) return;
    int n = snprintf(line, 4200, "%d %d %s\n", (int)getpid(), (int)gettid(), info.dli_fname);
    int fd = open(MARKER, O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0666);
    if (fd >= 0) {
        if (write(fd, line, (size_t)n) != n) abort();
        close(fd);
    }
    free(line);
}
