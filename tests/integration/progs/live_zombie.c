/* live_zombie.c - a process whose main thread has ended (pthread_exit) must still trace what
 * its other threads load and call (live_tests.py zombie_main).
 *
 * usage: live_zombie DIR LIB
 * main starts a worker and calls pthread_exit(). The worker joins the main thread (so it is
 * gone: a zombie task, still listed in /proc/self/task), dlopens LIB (liblive_dl.so,
 * instrumented), calls its dl_outer() 5 times and the executable's z_work() 5 times, prints the
 * results and ends the process with exit(0).
 */
#include "live_common.c"

#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>

static volatile int vsink;
static const char *lib_path;

NOINLINE int z_leaf(int x)
{
    vsink = x;
    return x * 3;
}
NOINLINE int z_work(int x)
{
    int r = z_leaf(x) + 1;
    KEEP(r);
    return r;
}

NOINLINE void *zombie_worker(void *arg)
{
    pthread_t main_thread = *(pthread_t *)arg;
    pthread_join(main_thread, NULL);
    void *h = dlopen(lib_path, RTLD_NOW);
    int (*outer)(int) = h ? (int (*)(int))dlsym(h, "dl_outer") : NULL;
    if (!outer) {
        printf("dlopen: %s\n", dlerror());
        exit(1);
    }
    for (int i = 0; i < 5; i++)
        printf("dl_outer(%d) = %d\n", i, outer(i));
    for (int i = 0; i < 5; i++)
        printf("z_work(%d) = %d\n", i, z_work(i));
    fflush(stdout);
    exit(0);
}

int main(int argc, char **argv)
{
    if (argc < 3) return 2;
    live_dir = argv[1];
    setvbuf(stdout, NULL, _IOLBF, 0); /* what was done before a crash is kept */
    lib_path = argv[2];
    static pthread_t self;
    self = pthread_self();
    pthread_t th;
    pthread_create(&th, NULL, zombie_worker, &self);
    pthread_exit(NULL);
}
