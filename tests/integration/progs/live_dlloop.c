/* live_dlloop.c - dlopen/dlclose in a loop while ftrace-ctl re-filters and switches tracing
 * (live_tests.py dl_loop_refilter).
 *
 * usage: live_dlloop DIR LIB
 * A loader thread dlopens LIB (liblive_dl.so), calls its dl_outer(), dlcloses it, over and
 * over; main calls the executable's traced l_work() and serves marker requests meanwhile; both
 * until DIR/stop. Prints "loader: N failures, M wrong results" and "main: M wrong results".
 */
#include "live_common.c"

#include <dlfcn.h>
#include <pthread.h>

static atomic_int stop;
static atomic_long failures, wrong_dl, wrong_main;
static const char *lib_path;
static volatile int vsink;

NOINLINE int l_leaf(int x)
{
    vsink = x;
    return x + 2;
}
NOINLINE int l_work(int x)
{
    int r = l_leaf(x) * 2;
    KEEP(r);
    return r;
}
NOINLINE void marker(int n)
{
    vsink = n;
}

static void *loader(void *arg)
{
    (void)arg;
    for (int i = 0; !stop; i++) {
        void *h = dlopen(lib_path, RTLD_NOW | RTLD_LOCAL);
        int (*outer)(int) = h ? (int (*)(int))dlsym(h, "dl_outer") : NULL;
        if (!outer) {
            failures++;
            continue;
        }
        if (outer(i) != 2 * i + 1) wrong_dl++;
        if (dlclose(h) != 0) failures++;
        live_nap_us(500);
    }
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 3) return 2;
    live_dir = argv[1];
    lib_path = argv[2];
    pthread_t th;
    pthread_create(&th, NULL, loader, NULL);
    live_touch("ready");
    for (int i = 0; !live_exists("stop"); i++) {
        for (int k = 0; k < 20; k++)
            if (l_work(k) != 2 * (k + 2)) wrong_main++;
        live_serve_marks(marker);
        live_nap_us(200);
    }
    stop = 1;
    pthread_join(th, NULL);
    printf("loader: %ld failures, %ld wrong results\n", (long)failures, (long)wrong_dl);
    printf("main: %ld wrong results\n", (long)wrong_main);
    return 0;
}
