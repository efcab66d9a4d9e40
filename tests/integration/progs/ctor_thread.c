/* ctor_thread: main -> spin_join (in libspin.so, whose constructor started a spinning thread). */
#include <stdio.h>
#include "progs.h"

void spin_join(void);
extern volatile long spin_count;
int main(void)
{
    spin_join();
    printf("spun %s\n", spin_count > 1000 ? "yes" : "no");
    return 0;
}
