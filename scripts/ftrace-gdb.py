# ftrace-gdb.py - lets gdb walk through the frames of a program traced by ftrace-run.
#
#   (gdb) source /path/to/ftrace-run/scripts/ftrace-gdb.py
#
# A traced function whose return is hooked (mcount sites, FTRACE_EXIT=hook, functions not called
# through) has ftr_tramp_return as its return address; the real one is in the thread's shadow
# stack (libftrace.so's ftr_tls). libgcc's unwinder gets it from the pseudo-frame's personality
# routine, which gdb does not run: without this script gdb's backtrace stops there ("Backtrace
# stopped"). This unwinder reads the shadow stack with gdb's own TLS support and gives gdb the
# real caller. A frame filter also hides the call-through trampoline's frames (ftr_tramp_through),
# so that `bt` lists the program's frames only; `bt -no-filters` shows them.
#
# Needs libftrace.so's symbols (ftrace-run's build keeps them) and gdb's Python.
import gdb
from gdb.unwinder import Unwinder, register_unwinder

_SAVED = ("rbx", "rbp", "r12", "r13", "r14", "r15")


def _addr(name):
    try:
        return int(gdb.parse_and_eval("(unsigned long)&" + name))
    except gdb.error:
        return None


class _FrameId:
    def __init__(self, sp, pc):
        self.sp, self.pc = sp, pc


class FtraceUnwinder(Unwinder):
    """The caller of a frame whose hooked return address is ftr_tramp_return."""

    def __init__(self):
        super().__init__("ftrace-run")

    def __call__(self, pending):
        ret_tramp = _addr("ftr_tramp_return")
        if ret_tramp is None:
            return None
        pc_v, sp_v = pending.read_register("rip"), pending.read_register("rsp")
        pc, sp = int(pc_v), int(sp_v)
        if pc != ret_tramp:
            return None
        slot = sp - 8
        try:
            tls = gdb.parse_and_eval("ftr_tls")
            base = int(tls["shadow_base"])
            top = int(tls["top"])
            size = gdb.lookup_type("struct ftr_shadow").sizeof
        except gdb.error:
            return None
        ret = 0
        e = top - size
        while e >= base and base:  # innermost first; a tail call's entries share the slot
            entry = gdb.parse_and_eval("*(struct ftr_shadow *)%d" % e)
            if int(entry["slot"]) == slot:
                ret = int(entry["ret"])  # the bottom one of the slot holds the real address
            elif ret:
                break
            e -= size
        if not ret or ret == ret_tramp:
            return None
        info = pending.create_unwind_info(_FrameId(sp_v, pc_v))
        info.add_saved_register("rip", gdb.Value(ret).cast(pc_v.type))
        info.add_saved_register("rsp", sp_v)
        for reg in _SAVED:
            info.add_saved_register(reg, pending.read_register(reg))
        return info


class FtraceFrameFilter:
    """Hides ftrace-run's trampoline frames from backtraces."""

    def __init__(self):
        self.name = "ftrace-run"
        self.priority = 100
        self.enabled = True
        gdb.frame_filters[self.name] = self

    def filter(self, frames):
        for f in frames:
            name = f.function()
            if isinstance(name, int):
                sym = gdb.block_for_pc(name)
                name = sym.function.name if sym and sym.function else ""
            if name in ("ftr_tramp_through", "ftr_tramp_return", "ftr_tramp_hooked"):
                continue
            yield f


register_unwinder(None, FtraceUnwinder(), replace=True)
FtraceFrameFilter()
