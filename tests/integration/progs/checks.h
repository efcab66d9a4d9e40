/* Results checked against values computed by hand, for the behaviour programs that compute
 * them (bargs.c, bmsabi.c). In a function that declares int bad = 0; double total = 0, v;
 * CHECK(n, expr, want) adds expr to total and, at the first wrong result, prints it and sets
 * bad to 10 + n. check() is not traced: it is in no tree. */
#ifndef CHECKS_H
#define CHECKS_H
#include <stdio.h>

#include "behave.h"

NOTRACE static int check(int n, double got, double want)
{
    if (got != want) {
        printf("check %d: got %.3f, want %.3f\n", n, got, want);
        return 10 + n;
    }
    return 0;
}

#define CHECK(n, expr, want)                                                                       \
    do {                                                                                           \
        v = (double)(expr);                                                                        \
        total += v;                                                                                \
        if (!bad) bad = check(n, v, want);                                                         \
    } while (0)

#endif
