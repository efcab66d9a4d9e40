/* bsetuid: setuid()/setgid() of a traced program. glibc makes every thread of the process take
 * the change (its internal SIGSETXID, answered by each thread): the tracer's own threads must
 * take it too, or the call waits for ever. usage: bsetuid
 * Prints "setuid: 0 0", exit 0. tree: {main 1, main;drop 1}
 */
#include <stdio.h>
#include <unistd.h>
#include "behave.h"

NOINLINE int drop(int *g)
{
    *g = setgid(getgid());
    return setuid(getuid());
}

int main(void)
{
    int g, u = drop(&g);
    printf("setuid: %d %d\n", u, g);
    return 0;
}
