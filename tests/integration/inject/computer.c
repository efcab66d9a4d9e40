/* computer.c - a program whose only thread computes, without a system call, for
 * inject_tests.py: the injector must refuse it after its bounded wait, and leave it unharmed.
 *
 * usage: computer FILE
 * Maps FILE (shared; created, one page), prints "ready", then computes until the test writes a
 * byte other than 0 at the file's start (seen through the mapping: no system call), and prints
 * "computer ok".
 */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/mman.h>
#include <unistd.h>

static volatile uint64_t sink;

int main(int argc, char **argv)
{
    if (argc < 2) return 2;
    int fd = open(argv[1], O_RDWR | O_CREAT | O_TRUNC, 0644);
    if (fd < 0 || ftruncate(fd, 4096) < 0) return 1;
    volatile unsigned char *ctl = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (ctl == MAP_FAILED) return 1;
    printf("ready\n");
    fflush(stdout);
    uint64_t h = 1469598103934665603u;
    for (uint64_t i = 0; !ctl[0]; i++)
        h = (h ^ (i & 0xff)) * 1099511628211u;
    sink = h;
    printf("computer ok\n");
    return 0;
}
