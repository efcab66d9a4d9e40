/* live_replaced.c - the executable's file replaced under the running program (a package
 * upgrade) must not disturb its tracing (live_tests.py replaced_exe).
 *
 * usage: live_replaced DIR LIB NEWFILE
 * main calls before() (r_work() x 5). Then it unlinks its own executable (/proc/self/exe) and
 * writes NEWFILE (another build of this program, -DLIVE_UPGRADE: other code at other
 * addresses) at the same path, dlopens LIB (liblive_dl.so), calls dl_outer(), dlcloses it, and
 * calls after() (r_work() x 5). It creates DIR/replaced, then serves marker requests
 * (marker(): r_work() x 1) until DIR/stop. Prints each step's result.
 */
#include "live_common.c"

#include <dlfcn.h>
#include <fcntl.h>
#include <string.h>

static volatile int vsink;

#ifdef LIVE_UPGRADE
/* the new version: more code in front, so that every function moved */
#define PAD(n)                                                                                     \
    NOINLINE int pad##n(int x)                                                                     \
    {                                                                                              \
        return x * n + vsink;                                                                      \
    }                                                                                              \
    extern int pad##n(int)
PAD(1);
PAD(2);
PAD(3);
PAD(4);
PAD(5);
PAD(6);
PAD(7);
PAD(8);
#endif

NOINLINE int r_work(int x)
{
    vsink = x;
    return x + 7;
}
NOINLINE int before(void)
{
    int s = 0;
    for (int i = 0; i < 5; i++)
        s += r_work(i);
    return s;
}
NOINLINE int after(void)
{
    int s = 0;
    for (int i = 0; i < 5; i++)
        s += r_work(i);
    return s;
}
NOINLINE void marker(int n)
{
    vsink = r_work(n);
}

/* unlink(path), then copy from to a new file at path, as an upgrade does */
HELPER int replace(const char *path, const char *from)
{
    int in = open(from, O_RDONLY);
    if (in < 0 || unlink(path) < 0) return -1;
    int out = open(path, O_WRONLY | O_CREAT | O_EXCL, 0755);
    if (out < 0) return -1;
    char buf[65536];
    ssize_t n;
    while ((n = read(in, buf, sizeof buf)) > 0)
        if (write(out, buf, (size_t)n) != n) return -1;
    close(in);
    return close(out);
}

int main(int argc, char **argv)
{
    if (argc < 4) return 2;
    live_dir = argv[1];
    setvbuf(stdout, NULL, _IOLBF, 0); /* what was done before a crash is kept */
    char self[4096];
    ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
    if (len <= 0) return 1;
    self[len] = 0;
    printf("before: %d\n", before());
    if (replace(self, argv[3]) < 0) {
        printf("replace: %s\n", strerror(errno));
        return 1;
    }
    printf("replaced\n");
    void *h = dlopen(argv[2], RTLD_NOW);
    int (*outer)(int) = h ? (int (*)(int))dlsym(h, "dl_outer") : NULL;
    if (!outer) {
        printf("dlopen: %s\n", dlerror());
        return 1;
    }
    printf("dl_outer(3) = %d\n", outer(3));
    printf("dlclose: %d\n", dlclose(h));
    printf("after: %d\n", after());
    fflush(stdout);
    live_touch("replaced");
    while (!live_exists("stop")) {
        live_serve_marks(marker);
        live_nap_us(1000);
    }
    printf("done\n");
    return 0;
}
