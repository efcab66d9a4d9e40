/* bnested: a GNU C nested function (gcc only: clang has none), which reaches its containing
 * function's frame through the static chain in r10, passed to qsort() (untraced libc) and
 * called directly. gcc -pg -mfentry (and -mnop-mcount) wraps its entry site in push %r10 /
 * pop %r10, so r10 must survive the hook. qsort() of two elements compares once.
 * tree: {main 1, main;sorter 1, main;sorter;by_key.N 6, main;sorter;by_key.N;leaf 6}
 * (gcc names the nested function by_key.N; the test drops the .N) */
#include <stdio.h>
#include <stdlib.h>
#include "behave.h"

static volatile long sink;
NOINLINE void leaf(int x)
{
    sink += x;
}

NOINLINE int sorter(const int *v, int n, int rounds)
{
    int calls = 0, last = -1;
    NOINLINE int by_key(const void *a, const void *b)
    {
        int x = *(const int *)a, y = *(const int *)b;
        calls++; /* through the static chain */
        last = x < y ? x : y;
        leaf(calls);
        return (x > y) - (x < y);
    }
    for (int r = 0; r < rounds; r++) {
        int two[2] = {v[r % n], v[(r + 1) % n]};
        qsort(two, 2, sizeof two[0], by_key);
        printf("round %d: %d %d (last %d)\n", r, two[0], two[1], last);
    }
    int x = 7, y = 3;
    int c = by_key(&x, &y);
    printf("direct: %d (last %d)\n", c, last);
    return calls;
}

int main(void)
{
    static const int v[] = {5, 2, 9, 1, 7};
    int calls = sorter(v, 5, 5);
    printf("calls: %d\n", calls);
    return calls == 6 ? 0 : 1;
}
