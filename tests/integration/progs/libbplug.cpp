// libbplug: a C++ plugin for bdl_local, opened RTLD_LOCAL (then libstdc++ and libgcc_s are not
// in the global scope: the tracer's wrappers of __cxa_begin_catch and _Unwind_Backtrace must
// find them in the plugin's own dependencies). plug_run(d) throws through d+1 frames of r(),
// catches, 5 times, then walks its stack with _Unwind_Backtrace; returns catches + (walk ok).
#include <stdexcept>
#include <unwind.h>
#include "behave.h"

NOINLINE static int r(int d)
{
    if (!d) throw std::runtime_error("p");
    int v = r(d - 1);
    KEEP(v);
    return v + 1;
}

NOTRACE static _Unwind_Reason_Code count(struct _Unwind_Context *, void *arg)
{
    ++*(int *)arg;
    return _URC_NO_REASON;
}

extern "C" NOINLINE int plug_run(int d)
{
    int caught = 0, frames = 0;
    for (int i = 0; i < 5; i++) {
        try {
            r(d);
        } catch (const std::exception &) {
            caught++;
        }
    }
    _Unwind_Backtrace(count, &frames);
    return caught + (frames >= 3);
}
