/* tree: a known single-threaded call tree; exits with status 3 to check it is kept.
 * main -> top -> mid x N -> leaf x 2 each; main -> leaf once.  usage: tree [N] (default 5) */
#include <stdio.h>
#include <stdlib.h>
#include "progs.h"

NOINLINE int leaf(int x) { return x * 3 + 1; }
NOINLINE int mid(int x) { return leaf(x) ^ leaf(x + 1); }
NOINLINE int top(int n)
{
    int s = 0;
    for (int i = 0; i < n; i++)
        s += mid(i);
    return s;
}

int main(int argc, char **argv)
{
    int n = argc > 1 ? atoi(argv[1]) : 5;
    int s = top(n);
    s += leaf(s);
    printf("tree %d\n", s);
    fprintf(stderr, "tree: done\n");
    return 3;
}
