"""The CPU of a run's whole process tree, ftrace-run's recorder process included.

The recorder is neither the program's child nor its parent (docs/design.md, "Where the machinery
lives"): a double fork leaves it to the nearest subreaper. A benchmark makes itself that
subreaper (subreaper()) and, after the program, reaps every child left (wait_tree()): their
rusage is the recorder's. Without it, os.wait4 of the program would leave the recorder's CPU out.
"""
import ctypes
import os

PR_SET_CHILD_SUBREAPER = 36


def subreaper():
    """Orphaned descendants of ours become our children (the recorder among them)."""
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        raise OSError(ctypes.get_errno(), "prctl(PR_SET_CHILD_SUBREAPER)")


def wait_tree(pid):
    """Waits for pid, then for every other child (a recorder ends once its session has).
    @return (pid's wait status, user+sys seconds of pid's tree and of those children)"""
    _, status, ru = os.wait4(pid, 0)
    cpu = ru.ru_utime + ru.ru_stime
    while True:
        try:
            _, _, more = os.wait4(-1, 0)
        except ChildProcessError:
            return status, cpu
        cpu += more.ru_utime + more.ru_stime
