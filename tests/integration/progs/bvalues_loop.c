/* bvalues_loop.c - calls work(i, "xyz") every 5 ms until the file argv[1] exists (at most
 * 30 s): values_tests.py changes what is recorded meanwhile (ftrace-ctl PID args / retval). */
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#ifdef __clang__
#define KEEP __attribute__((noinline, used))
#else
#define KEEP __attribute__((noinline, noipa, used))
#endif

KEEP int work(int i, const char *s)
{
    return i + (s[0] == 'x');
}

int main(int argc, char **argv)
{
    long t = 0;
    for (int i = 0; i < 6000 && (argc < 2 || access(argv[1], F_OK) != 0); i++) {
        t += work(i, "xyz");
        struct timespec d = {0, 5000000};
        nanosleep(&d, NULL);
    }
    printf("bvalues_loop %s\n", t > 0 ? "ok" : "none");
    return 0;
}
