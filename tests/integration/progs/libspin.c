/* libspin: a library whose constructor starts a thread that keeps calling an instrumented
 * function while the preload patches the process: the stop-the-world handshake must park it
 * (it runs before libftrace.so's constructor) and the tree must still be exact. */
#include <pthread.h>
#include "progs.h"

volatile int spin_stop;
volatile long spin_count;
NOINLINE long spin_leaf(long x) { return x + 1; }
static void *spinner(void *arg)
{
    (void)arg;
    while (!spin_stop)
        spin_count = spin_leaf(spin_count);
    return NULL;
}
static pthread_t th;
__attribute__((constructor)) static void start(void)
{
    pthread_create(&th, NULL, spinner, NULL);
    while (spin_count < 1000)
        ;
}
void spin_join(void)
{
    long c = spin_count; /* main runs after patching: let the spinner make traced calls */
    while (spin_count < c + 1000)
        ;
    spin_stop = 1;
    pthread_join(th, NULL);
}
