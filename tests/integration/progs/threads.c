/* threads: 4 threads, thread i calls leaf() 1000*(i+1) times through work().
 * per thread: worker -> work -> leaf x 1000*(i+1); main thread: main only. */
#include <pthread.h>
#include <stdio.h>
#include "progs.h"

NOINLINE long leaf(long x) { return x * 3 + 1; }
NOINLINE long work(long id, long n)
{
    long s = 0;
    for (long i = 0; i < n; i++)
        s += leaf(i + id);
    return s;
}
NOINLINE void *worker(void *arg)
{
    long id = (long)arg;
    long r = work(id, 1000 * (id + 1));
    __asm__ volatile("" : "+r"(r)); /* keep work() a real call, not a tail call */
    return (void *)r;
}

int main(void)
{
    pthread_t t[4];
    for (long i = 0; i < 4; i++)
        pthread_create(&t[i], NULL, worker, (void *)i);
    long sum = 0;
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(t[i], &r);
        sum += (long)r;
    }
    printf("threads %ld\n", sum);
    return 0;
}
