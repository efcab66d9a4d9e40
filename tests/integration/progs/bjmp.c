/* bjmp: non-local exits out of traced frames. usage: bjmp MODE   (3 rounds each)
 *   longjmp     main -> depth1 -> depth2 -> depth3 -> leaf, then longjmp from depth3 back to
 *               main's setjmp; main then calls after_jump -> leaf x 2 (depth 1 and 2).
 *   siglongjmp  the same with sigsetjmp(env, 1) / siglongjmp.
 * tree: {main 1, main;depth1 3, main;depth1;depth2 3, main;depth1;depth2;depth3 3,
 *        main;depth1;depth2;depth3;leaf 3, main;after_jump 3, main;after_jump;leaf 6};
 * nothing left open: the frames skipped by the jump are closed.
 * Built once more with -O2 -D_FORTIFY_SOURCE=2, where longjmp and siglongjmp become
 * __longjmp_chk (the test checks the import). */
#include <setjmp.h>
#include <stdio.h>
#include <string.h>
#include "behave.h"

static jmp_buf env;
static sigjmp_buf senv;
static volatile long sink;
static int use_sig;

NOINLINE void leaf(void) { sink++; }
NOINLINE void depth3(int r)
{
    leaf();
    if (use_sig)
        siglongjmp(senv, r);
    longjmp(env, r);
}
NOINLINE void depth2(int r)
{
    depth3(r);
    NOTAIL();
}
NOINLINE void depth1(int r)
{
    depth2(r);
    NOTAIL();
}
NOINLINE void after_jump(void)
{
    leaf();
    leaf();
    NOTAIL();
}

int main(int argc, char **argv)
{
    const char *mode = argc > 1 ? argv[1] : "";
    use_sig = !strcmp(mode, "siglongjmp");
    if (!use_sig && strcmp(mode, "longjmp")) {
        fprintf(stderr, "usage: bjmp longjmp|siglongjmp\n");
        return 2;
    }
    static volatile int i, total;
    for (i = 0; i < 3; i++) {
        if (use_sig) {
            int r = sigsetjmp(senv, 1);
            if (r == 0) {
                depth1(i + 1);
                printf("not reached\n");
            } else {
                total += r;
                after_jump();
            }
        } else {
            int r = setjmp(env);
            if (r == 0) {
                depth1(i + 1);
                printf("not reached\n");
            } else {
                total += r;
                after_jump();
            }
        }
    }
    printf("%s: 3 jumps, total %d\n", mode, total);
    return use_sig ? 52 : 51;
}
