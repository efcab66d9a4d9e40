/* live_hungstart.c - a program whose allocator blocks for good (a deadlocked or broken calloc)
 * must still end on SIGTERM as it does untraced, wherever it blocks: also inside the tracer's
 * start-up, which makes its threads with the program's calloc (glibc allocates a thread's TLS
 * vector with it). live_tests.py hung_start.
 *
 * usage: live_hungstart DIR
 * Prints "start", then calls calloc(). With LIVE_HANG_CALLOC=1 in the environment every
 * calloc() of the process blocks in pause() from its first call on; the test sends SIGTERM,
 * whose default action ends the process (status -15). Without it, prints "done" and exits 0.
 */
#include "live_common.c"

#include <signal.h>
#include <stdlib.h>

extern void *__libc_calloc(size_t n, size_t size);

NOTRACE void *calloc(size_t n, size_t size)
{
    static int hang = -1;
    if (hang < 0) {
        const char *e = getenv("LIVE_HANG_CALLOC");
        hang = e && *e == '1';
    }
    while (hang)
        pause();
    return __libc_calloc(n, size);
}

NOINLINE void *get_buffer(void)
{
    return calloc(4, 1024);
}

int main(int argc, char **argv)
{
    live_dir = argc > 1 ? argv[1] : ".";
    printf("start\n");
    fflush(stdout);
    void *p = get_buffer();
    printf("done\n");
    free(p);
    return 0;
}
