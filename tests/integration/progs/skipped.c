/* skipped: two hand-written functions whose call to __fentry__ sits where no compiler puts
 * it (push %rbx / call / pop %rbx at the start), which ftrace-run refuses to patch: they run
 * untraced, the rest is traced, and the summary line names them. Built with -DLIST_SITES
 * (-mnop-mcount -mrecord-mcount builds), their calls are listed in __mcount_loc as well.
 * tree: {main 1, main;work 3} */
#include <stdio.h>
#include "progs.h"

#ifdef LIST_SITES
#define LISTED(label) ".pushsection __mcount_loc, \"a\", @progbits\n.quad " label "\n.popsection\n"
#else
#define LISTED(label) ""
#endif
#define ODD(name)                                                                                  \
    ".text\n.globl " name "\n.type " name ", @function\n" name ":\n"                               \
    "    push %rbx\n"                                                                              \
    "0:  call *__fentry__@GOTPCREL(%rip)\n"                                                        \
    "    pop %rbx\n"                                                                               \
    "    lea 1(%rdi), %eax\n"                                                                      \
    "    ret\n"                                                                                    \
    ".size " name ", . - " name "\n" LISTED("0b")
__asm__(ODD("odd_entry") ODD("odd_other"));
int odd_entry(int);
int odd_other(int);

static volatile int sink;
NOINLINE int work(int x)
{
    sink += x;
    return x + 1;
}

int main(void)
{
    int s = 0;
    for (int i = 0; i < 3; i++)
        s += odd_entry(work(i)) + odd_other(i);
    printf("skipped: %d\n", s);
    return 0;
}
