/* spinner.c - one thread computes without a system call, the main thread sleeps, for
 * inject_tests.py: the injector must choose the sleeping thread and never stop the other.
 *
 * usage: spinner DIR
 * Writes "main TID" and "spinner TID" to DIR/tids, creates DIR/ready, runs until DIR/stop
 * appears (the main thread looks every 2 ms), then prints "spinner ok".
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

static atomic_int stop, spinner_tid;
static volatile uint64_t sink;

static void *spin(void *a)
{
    (void)a;
    spinner_tid = (int)gettid();
    uint64_t x = 1;
    while (!atomic_load_explicit(&stop, memory_order_relaxed))
        x = x * 6364136223846793005u + 1442695040888963407u;
    sink = x;
    return NULL;
}

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    char path[4096];
    pthread_t t;
    pthread_create(&t, NULL, spin, NULL);
    while (!spinner_tid)
        ;
    snprintf(path, sizeof path, "%s/tids", argv[1]);
    FILE *f = fopen(path, "w");
    fprintf(f, "main %d\nspinner %d\n", (int)gettid(), (int)spinner_tid);
    fclose(f);
    snprintf(path, sizeof path, "%s/ready", argv[1]);
    fclose(fopen(path, "w"));
    snprintf(path, sizeof path, "%s/stop", argv[1]);
    while (access(path, F_OK) != 0) {
        struct timespec d = {0, 2000000};
        nanosleep(&d, NULL);
    }
    stop = 1;
    pthread_join(t, NULL);
    printf("spinner ok\n");
    return 0;
}
