/* libbhostile.so (bhostile firsthook): a constructor that starts an allocating worker before
 * the tracer's own constructor runs; nothing here is traced. */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include "behave.h"

static pthread_t worker;
static volatile int stop_worker;

NOTRACE void lib_allocate_until(volatile int *stop)
{
    while (!*stop) {
        void *p = malloc(5000); /* large enough for the arena's lock */
        memset(p, 1, 64);
        free(p);
    }
}
NOTRACE static void *work(void *arg)
{
    (void)arg;
    lib_allocate_until(&stop_worker);
    return NULL;
}
/* only for bhostile firsthook (glibc gives constructors the program's arguments) */
NOTRACE __attribute__((constructor)) static void start(int argc, char **argv, char **envp)
{
    (void)envp;
    if (argc > 1 && !strcmp(argv[1], "firsthook")) pthread_create(&worker, NULL, work, NULL);
}
NOTRACE pthread_t lib_worker_thread(void)
{
    return worker;
}
NOTRACE void lib_worker_stop(void)
{
    stop_worker = 1;
    pthread_join(worker, NULL);
}
