/* blc_gmon.c - gprof's runtime and atexit() as library calls (libcall_tests.py, the "gmon"
 * cases), as uftrace records them. Linked with -pg, the program starts with gcrt1, whose
 * __gmon_start__ (from the program's _init, before main) calls __monstartup() and
 * atexit(_mcleanup); atexit() is linked into the program (libc_nonshared.a, untraced), so the
 * library call is its __cxa_atexit(). Without -pg neither happens.
 *   blc_gmon        main: atexit(bye) (a __cxa_atexit under main), moncontrol(0) (gprof's
 *                   switch), returns 4; bye() runs at exit
 *   blc_gmon dump   the same, then _mcleanup() (gmon.out written now, as a program does before
 *                   it leaves without exit handlers) and _exit(4), which never returns. In a -pg
 *                   link that call is not traced: gcrt1 takes _mcleanup's address from the GOT
 *                   slot the call goes through (a slot that is read is never hooked).
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "progs.h"

void moncontrol(int mode);
void _mcleanup(void);

static volatile int nbye = 1;

NOINLINE void bye(void)
{
    printf("bye %d\n", nbye); /* printf("bye\n") would be puts */
}

int main(int argc, char **argv)
{
    if (atexit(bye)) return 1;
    moncontrol(0);
    printf("main %d\n", argc);
    if (argc > 1 && argv[1][0] == 'd') { /* dump (no strcmp: one call less to count) */
        fflush(stdout);
        _mcleanup();
        _exit(4);
    }
    return 4;
}
