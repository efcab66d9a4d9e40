/* demo: a toy object store, to show ftrace-run on something shaped like a real daemon.
 * Build: gcc -O2 -g -pg -mfentry -o demo demo.c -lpthread
 * Run:   ftrace-run ./demo && ftrace-report */
#include <pthread.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#define NOINLINE __attribute__((noinline))

static char disk[4][4096];

NOINLINE int farm_open(int oid) { return oid % 4; }

NOINLINE long xpread(int fd, char *buf, size_t len)
{
    usleep(150); /* the disk is slow */
    memcpy(buf, disk[fd], len);
    return (long)len;
}

NOINLINE long store_read_obj(int oid, char *buf, size_t len)
{
    int fd = farm_open(oid);
    return xpread(fd, buf, len);
}

NOINLINE unsigned checksum(const char *buf, size_t len)
{
    unsigned h = 2166136261u;
    for (size_t i = 0; i < len; i++)
        h = (h ^ (unsigned char)buf[i]) * 16777619u;
    return h;
}

NOINLINE unsigned do_local_io(int oid)
{
    char buf[512];
    store_read_obj(oid, buf, sizeof buf);
    return checksum(buf, sizeof buf);
}

NOINLINE void *io_worker(void *arg)
{
    unsigned h = 0;
    for (int i = 0; i < 3; i++)
        h ^= do_local_io((int)(long)arg + i);
    return (void *)(long)h;
}

int main(void)
{
    for (int i = 0; i < 4; i++)
        memset(disk[i], 'a' + i, sizeof disk[i]);
    pthread_t t[2];
    for (long i = 0; i < 2; i++)
        pthread_create(&t[i], NULL, io_worker, (void *)i);
    unsigned h = do_local_io(7);
    for (int i = 0; i < 2; i++) {
        void *r;
        pthread_join(t[i], &r);
        h ^= (unsigned)(long)r;
    }
    printf("checksum %08x\n", h);
    return 0;
}
