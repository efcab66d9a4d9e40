/* btail: tail calls. At -O2 first() ends in "jmp other" and chain() in "jmp first" (the test
 * checks the disassembly); at -O0 they are plain calls. Either way the callee nests under the
 * caller. tree: {main 1, main;first 5, main;first;other 5, main;chain 3, main;chain;first 3,
 * main;chain;first;other 3} */
#include <stdio.h>
#include "behave.h"

static volatile long sink;
NOINLINE int other(int x)
{
    sink += x;
    return x * 2;
}
NOINLINE int first(int x) { return other(x + 1); }
NOINLINE int chain(int x) { return first(x * 2); }

int main(void)
{
    int s = 0;
    for (int i = 0; i < 5; i++) {
        s += first(i);
        KEEP(s);
    }
    for (int i = 0; i < 3; i++) {
        s += chain(i);
        KEEP(s);
    }
    printf("tail: %d\n", s);
    return 72;
}
