# ftrace-gdb.py - lets gdb walk through the frames of a program traced by ftrace-run.
#
#   (gdb) source /path/to/ftrace-run/scripts/ftrace-gdb.py
#
# A traced function whose return is hooked (mcount sites, FTRACE_EXIT=hook, functions not called
# through) has ftr_tramp_return as its return address; the real one is in the thread's shadow
# book of return addresses (libftrace.so's ftr_ret_book, preload/hot/retaddr.h), kept by the stack
# slot it was taken from. libgcc's unwinder gets it from the pseudo-frame's personality routine,
# which gdb does not run: without this script gdb's backtrace stops there ("Backtrace stopped").
# This unwinder reads the book as retaddr.h does and gives gdb the real caller, whichever thread
# hooked the frame. A frame filter also hides the call-through trampoline's frames (ftr_tramp_through),
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


# retaddr.h: FTR_RET_BITS, FTR_RET_PROBES and ftr_ret_home()
_RET_BITS, _RET_PROBES = 22, 256
_RET_N = 1 << _RET_BITS


def _book_home(slot):
    group = ((slot >> 9) * 0x9E3779B97F4A7C15) & 0xFFFFFFFFFFFFFFFF
    return ((group >> (64 - (_RET_BITS - 6))) << 6 | ((slot >> 3) & 63)) & (_RET_N - 1)


def _book_lookup(slot):
    """The real return address the book keeps for slot (0: none)."""
    try:
        book = int(gdb.parse_and_eval("(unsigned long)ftr_ret_book"))
    except gdb.error:
        return 0
    if not book:
        return 0
    inferior = gdb.selected_inferior()
    i = _book_home(slot)
    for _ in range(_RET_PROBES):
        try:
            key, ret = [int.from_bytes(bytes(inferior.read_memory(book + 16 * i + 8 * k, 8)),
                                       "little") for k in (0, 1)]
        except gdb.MemoryError:
            return 0
        if key == slot:
            return ret & ((1 << 48) - 1)  # bits 48-63: the count of hooks not returned
        if key == 0:
            return 0
        i = (i + 1) & (_RET_N - 1)
    return 0


class _FrameId:
    def __init__(self, sp, pc):
        self.sp, self.pc = sp, pc


class FtraceUnwinder(Unwinder):
    """The caller of a frame whose hooked return address is ftr_tramp_return (or _sigret)."""

    def __init__(self):
        super().__init__("ftrace-run")

    def __call__(self, pending):
        # a signal handler's hooked return is ftr_tramp_sigret (tramp_x86_64.S)
        tramps = [a for a in (_addr("ftr_tramp_return"), _addr("ftr_tramp_sigret")) if a]
        if not tramps:
            return None
        pc_v, sp_v = pending.read_register("rip"), pending.read_register("rsp")
        pc, sp = int(pc_v), int(sp_v)
        if pc not in tramps:
            return None
        slot = sp - 8
        ret = _book_lookup(slot)
        if not ret or ret in tramps:
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
