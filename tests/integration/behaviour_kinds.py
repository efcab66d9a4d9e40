"""Behaviour cases for the kinds of programs a tracer's own test suite covers, beyond those of
behaviours.py: abort() and the exit paths with atexit handlers and destructors, execve() from a
thread, variadic functions, function pointers and tables of them, C library callbacks (qsort,
bsearch), recursion with exact trees, static and inline-heavy code (the expected tree computed
from the binary), and builds without frame pointers. Programs: progs/babort.c, bthexec.c,
bcalls.c, bargs.c, bmsabi.c, brecur.c, binline.c, bframes.c (each says its expected tree).

kind_cases(b) returns {name: Case}; b is the behaviours module (Case, exact, the checkers)."""
import collections
import os
import re
import subprocess


def disassembly(exe):
    """{function: [instruction text]} from objdump -d."""
    out = subprocess.run(["objdump", "-d", "--no-show-raw-insn", exe], capture_output=True,
                         text=True).stdout
    funcs, cur = {}, None
    for line in out.splitlines():
        m = re.match(r"^[0-9a-f]+ <([^>]+)>:$", line)
        if m:
            cur = funcs.setdefault(m.group(1), [])
        elif cur is not None and "\t" in line:
            cur.append(line.split("\t", 1)[1].strip())
    return funcs


def callees(insns):
    """Names called (or jumped to: sibling calls) directly from these instructions."""
    got = []
    for i in insns:
        m = re.match(r"^(?:call|jmp)\s+[0-9a-f]+ <([^>+@]+)>$", i)
        if m:
            got.append(m.group(1))
    return got


def frame_setup(insns):
    """The function sets up a frame pointer (mov %rsp,%rbp) among its first instructions."""
    return "mov    %rsp,%rbp" in [re.sub(r"\s+", "    ", i, 1) for i in insns[:8]]


# ---- how a process ends ----

def ended(how, check):
    """check, and every process section's header ends with how ("killed by SIGABRT")."""
    def wrapped(r):
        check(r)
        for s in r.sections:
            assert s.header.endswith(how), "header %r does not say %r" % (s.header, how)
    return wrapped


def abort_tree(root):
    return {root: 1, root + ";a1": 1, root + ";a1;a2": 1, root + ";a1;a2;leaf": 1}


E2 = "main;e1;e2"
EXIT_HANDLERS = {E2 + ";at_exit_fn": 1, E2 + ";at_exit_fn;leaf": 1, E2 + ";dtor_fn": 1,
                 E2 + ";dtor_fn;leaf": 1}


# ---- execve() from a thread ----

def check_thread_exec(b):
    def check(r):
        """Two sections, same pid: the first image's two threads, the new image's main."""
        assert len(r.sections) == 2, "%d process sections, want 2 (one per image): %s" % (
            len(r.sections), [[b.show(t) for t in s.folded.values()] for s in r.sections])
        first, second = r.sections
        assert first.pid == second.pid, "pids %d and %d: the new image keeps the pid" % (
            first.pid, second.pid)
        b.assert_trees(list(first.folded.values()),
                       [{"main": 1, "main;waiter": 1}, {"execer": 1, "execer;t_work": 1}],
                       list(first.open.values()), [["main", "waiter"], ["execer"]],
                       "first image")
        b.assert_trees(list(second.folded.values()), [{"main": 1, "main;exec_child_work": 3}],
                       list(second.open.values()), [], "new image")
    return check


# ---- callbacks: the program counts its comparator calls ----

def check_sort(b):
    def check(r):
        m = re.search(r"^sort: cmp_int (\d+) cmp_name (\d+) cmp_key (\d+)$", r.base.stdout, re.M)
        assert m, "no counts in the untraced run's output: %r" % r.base.stdout
        n_int, n_name, n_key = map(int, m.groups())
        p = "main;sorting"
        b.exact([{"main": 1, p: 1, p + ";cmp_int": n_int, p + ";cmp_int;key_of": n_int,
                  p + ";cmp_name": n_name, p + ";cmp_name;key_of": 2 * n_name,
                  p + ";cmp_key": n_key, p + ";cmp_key;key_of": n_key}])(r)
    return check


FNPTR = "main;fnptr"
FNPTR_TREE = {"main": 1, FNPTR: 1, FNPTR + ";dispatch": 8, FNPTR + ";sq_area": 1,
              FNPTR + ";sq_name": 1, FNPTR + ";ci_area": 1, FNPTR + ";ci_name": 1,
              FNPTR + ";apply": 4, FNPTR + ";apply;twice": 3, FNPTR + ";apply;twice;add_one": 3,
              FNPTR + ";apply;square": 1, FNPTR + ";pick": 2, FNPTR + ";twice": 1,
              FNPTR + ";twice;add_one": 1, FNPTR + ";square": 1}
FNPTR_TREE.update({FNPTR + ";dispatch;" + op: 2 for op in ("op_add", "op_sub", "op_mul",
                                                           "op_div")})
A = "main;args"
ARGS_TREE = {"main": 1, A: 1}
for _f in ("i6", "i7", "i8", "d8", "d9", "mix", "s8", "s16", "f16", "s24", "many16", "vsum", "ld",
           "r16", "r24", "rld", "rf2", "r24many"):
    ARGS_TREE[A + ";" + _f] = ARGS_TREE[A + ";" + _f + ";leaf"] = 1


M = "main;chain;via"
MSABI_TREE = {"main": 1, "main;chain": 1, M: 1, M + ";ms_outer": 1, M + ";ms_outer;ms2": 1,
              M + ";ms_outer;ms2;leaf": 1}
for _f in ("ms1", "ms2", "ms3", "ms4", "msd", "msp"):
    MSABI_TREE[M + ";" + _f] = MSABI_TREE[M + ";" + _f + ";leaf"] = 1


def check_through(b, want):
    """--info: how many sites are called through: want (the functions bargs.c lists as taking
    nothing on the stack) where sites are at the function's first byte, none with the -pg
    (mcount) shape or FTRACE_EXIT=hook."""
    def check(r):
        m = re.search(r"patched \((\d+) called through\)", r.view())
        mode = os.environ.get("FTRACE_EXIT", "through")
        n = want if mode != "hook" and not b.mcount_shaped(r.facts) else 0
        assert m and int(m.group(1)) == n, "--info: %s sites called through, want %d" % (
            m and m.group(1), n)
    return check


def check_args_deep(b):
    """bargs deep: rec 100 000 deep, every level traced: the graph (to depth 64) is one chain,
    the summary counts every level."""
    chain = {";".join(["main", "deep"] + ["rec"] * i): 1 for i in range(63)}
    chain["main"] = 1
    return b.all_of(b.exact([chain]), b.summary_exactly({"main": 1, "deep": 1, "rec": 100001}))


V = "main;variadic"
VARIADIC_TREE = {"main": 1, V: 1, V + ";sum_ints": 3, V + ";sum_ints;add_one": 19,
                 V + ";sum_mixed": 2, V + ";sum_mixed;add_one": 23, V + ";log_line": 2,
                 V + ";log_line;vlog": 2}


# ---- recursion ----

def fib_tree(n, path, t):
    path += ";fib"
    t[path] += 1
    if n >= 2:
        fib_tree(n - 1, path, t)
        fib_tree(n - 2, path, t)
    return t


def hanoi_tree(n, path, t):
    path += ";hanoi"
    t[path] += 1
    if n > 0:
        hanoi_tree(n - 1, path, t)
        t[path + ";move"] += 1
        hanoi_tree(n - 1, path, t)
    return t


def fib_main(n):
    return dict(fib_tree(n, "main", collections.Counter({"main": 1})))


def mutual_tree():
    t, path = {"main": 1}, "main"
    for k in range(10):
        path += ";" + ("is_even" if k % 2 == 0 else "is_odd")
        t[path] = 1
    return t


def fib_calls(exe, opt, flagset):
    """fib() calls itself twice in the binary (no loop with an accumulator)."""
    n = callees(disassembly(exe).get("fib", [])).count("fib")
    assert n == 2, "fib() has %d calls to itself, want 2: the case does not test recursion" % n


# ---- static and inline-heavy code: the expected tree from the binary ----

# (name, calls per call of the parent, kind, children); kind: "call" a call in every build,
# "maybe" a call if the binary has one, "inline" never a frame (always_inline), "pointer"
# through a function pointer (the out-of-line copy, always).
INLINE_MODEL = ("main", 1, "call", [
    ("compute", 1, "call", [
        ("h1", 4, "maybe", [("h2", 1, "maybe", [("leaf", 1, "call", [])]),
                            ("small", 1, "maybe", [])]),
        ("ai", 1, "inline", [("leaf2", 1, "call", [])]),
        ("once_fn", 1, "maybe", [("leaf", 3, "call", [])]),
        ("big", 2, "maybe", [("leaf", 2, "call", [])]),
        ("via_ptr", 1, "pointer", [("leaf", 1, "call", [])]),
        ("via_ptr", 1, "maybe", [("leaf", 1, "call", [])]),
    ])])


def inline_expected(exe, opt, flagset):
    """The tree binline's binary makes: a "maybe" function has a frame where the function it
    is called from (the nearest one with a frame) calls it, by its name or a clone's
    (name.constprop.0); where it was inlined, its callees are called from there."""
    funcs = disassembly(exe)
    clone = lambda n: re.compile(r"^%s(\.[a-z]+\.\d+)*$" % re.escape(n))
    tree, inlined, framed = collections.Counter(), set(), set()

    def walk(node, path, mult, caller):
        name, times, kind, children = node
        mult *= times
        here = None
        if kind in ("call", "pointer"):
            here = name
        elif kind == "maybe":
            here = next((c for c in callees(funcs.get(caller, [])) if clone(name).match(c)),
                        None)
            (framed if here else inlined).add(name)
        if kind == "call" and caller is not None:
            assert name in callees(funcs.get(caller, [])), "%s does not call %s" % (caller, name)
        if kind == "pointer":
            assert name in funcs, "no out-of-line %s" % name
        if here:
            path = path + ";" + here if path else here
            tree[path] += mult
            caller = here
        for c in children:
            walk(c, path, mult, caller)
    walk(INLINE_MODEL, "", 1, None)
    if opt == "O0":
        assert not inlined, "inlined at -O0: %s" % sorted(inlined)
    else:
        assert inlined, "nothing inlined at -O2: the case does not test inlining"
    return dict(tree)


def check_inline(b):
    def check(r):
        b.exact([r.facts])(r)
    return check


# ---- without frame pointers ----

def no_frame_pointers(mcount_shaped, traced, untraced=None):
    """With -mfentry (and the nop sets): the traced function sets up no frame pointer. With
    -pg (mcount): gcc keeps one in every instrumented function, whatever the flags: the
    traced function has it, the untraced one (at -O2) has not."""
    def verify(exe, opt, flagset):
        funcs = disassembly(exe)
        assert traced in funcs, "no %s in the disassembly" % traced
        if mcount_shaped(flagset):
            assert frame_setup(funcs[traced]), "-pg: %s has no frame pointer" % traced
            if untraced and opt == "O2":
                assert not frame_setup(funcs[untraced]), \
                    "%s sets up a frame pointer: the case does not test its absence" % untraced
        else:
            assert not frame_setup(funcs[traced]), \
                "%s sets up a frame pointer: the case does not test its absence" % traced
    return verify


def rbp_as_data(exe, opt, flagset):
    """At -O2 juggle() (not traced) keeps a value in %rbp across its calls of use()."""
    if opt != "O2":
        return
    insns = disassembly(exe).get("juggle", [])
    writes = [i for i in insns if re.search(r",%rbp$", i) and i != "mov    %rsp,%rbp"
              and not i.startswith("push")]
    assert writes and "use" in callees(insns), \
        "juggle() keeps nothing in %%rbp: the case does not test it: %s" % insns[:12]


def kind_cases(b):
    """The cases, built on behaviours.py's Case and checkers (b: that module)."""
    Case, exact = b.Case, b.exact
    # built without frame pointers: at -O2 only, since gcc keeps them at -O0 (behaviours.build)
    nofp = dict(frame_pointer=False, opts=("O2",))

    def fp_verify(traced, untraced=None):
        return no_frame_pointers(b.mcount_shaped, traced, untraced)

    def both(*verifies):
        def verify(exe, opt, flagset):
            facts = None
            for v in verifies:
                facts = v(exe, opt, flagset) or facts
            return facts
        return verify
    jump = exact([b.jump_tree()])
    exc_throw = exact([b.exc_tree(["d1", "d2", "d3"], {})])
    exc_raii = exact([b.exc_tree(["g_outer", "g_mid", "g_thrower"],
                                 {"g_outer;g_mid;cleanup": 3, "g_outer;cleanup": 3})])
    bt = exact([{"main": 1, "main;f1": 1, "main;f1;f2": 1, "main;f1;f2;f3": 1,
                 "main;f1;f2;f3;show": 1, "main;f1;f2;f3;show;after": 1}])
    bt_signal = exact([{"main": 1, "main;f1": 1, "main;f1;f2": 1, "main;f1;f2;f3": 1,
                        "main;f1;f2;f3;on_usr1": 1}])
    sigjmp = exact([{
        "main": 1, "main;level1": 3, "main;level1;level2": 3,
        "main;level1;level2;jump_handler": 3, "main;level1;level2;jump_handler;handler_work": 3,
        "main;after_jump": 3}])
    tail = exact([{"main": 1, "main;first": 5, "main;first;other": 5, "main;chain": 3,
                   "main;chain;first": 3, "main;chain;first;other": 3}])
    deep = "main;d1;d2;d3;d4"
    frames_deep = exact([{"main": 1, "main;d1": 4, "main;d1;d2": 4, "main;d1;d2;d3": 4,
                          deep: 4, deep + ";leaf": 4, deep + ";on_usr1": 1,
                          deep + ";on_usr1;leaf": 1}])
    return {
        # how a process ends
        "ends-abort": Case("babort.c", ["abort"], ended("killed by SIGABRT", exact(
            [abort_tree("main")], [["main", "a1", "a2"]]))),
        "ends-abort-handler": Case("babort.c", ["abort-handler"], ended(
            "killed by SIGABRT", exact([dict(abort_tree("main"), **{
                "main;a1;a2;on_abrt": 1, "main;a1;a2;on_abrt;handler_work": 1})],
                [["main", "a1", "a2"]]))),
        "ends-abort-thread": Case("babort.c", ["abort-thread"], ended("killed by SIGABRT", exact(
            [{"main": 1, "main;joiner": 1}, abort_tree("aborter")],
            [["main", "joiner"], ["aborter", "a1", "a2"]]))),
        "ends-exit-handlers": Case("babort.c", ["exit"], ended("exit status 5", exact(
            [dict({"main": 1, "main;e1": 1, E2: 1}, **EXIT_HANDLERS)], [["main", "e1", "e2"]]))),
        "ends-return-handlers": Case("babort.c", ["return"], ended("exit status 6", exact([{
            "main": 1, "main;e1": 1, E2: 1, "at_exit_fn": 1, "at_exit_fn;leaf": 1,
            "dtor_fn": 1, "dtor_fn;leaf": 1}]))),
        "ends-quick-exit": Case("babort.c", ["quick"], ended("exit status 7", exact([{
            "main": 1, "main;e1": 1, E2: 1, E2 + ";quick_fn": 1, E2 + ";quick_fn;leaf": 1}],
            [["main", "e1", "e2"]]))),
        # execve() from a thread that is not the main one
        "proc-thread-exec": Case("bthexec.c", ["keep"], check_thread_exec(b)),
        "proc-thread-exec-strip": Case("bthexec.c", ["strip"], check_thread_exec(b)),
        # how functions are called
        "calls-variadic": Case("bcalls.c", ["variadic"], exact([VARIADIC_TREE])),
        "calls-fnptr": Case("bcalls.c", ["fnptr"], exact([FNPTR_TREE])),
        # arguments in registers and on the stack, return values (call-through or not)
        "calls-args": Case("bargs.c", ["args"], b.all_of(exact([ARGS_TREE]), check_through(b, 15)),
                           verify=lambda exe, opt, flagset: flagset),
        # ms_abi functions (home space above the return address): never called through; the
        # System V ones around them are (leaf, via, chain, main)
        "calls-msabi": Case("bmsabi.c", [], b.all_of(exact([MSABI_TREE]), check_through(b, 4)),
                            verify=lambda exe, opt, flagset: flagset),
        "calls-args-deep": Case("bargs.c", ["deep"], check_args_deep(b),
                                graph_args=["--max-depth=64"],
                                env={"FTRACE_SHADOW_DEPTH": "200000"}),
        "calls-sort": Case("bcalls.c", ["sort"], check_sort(b)),
        # recursion
        "recur-fib": Case("brecur.c", ["fib"], exact([fib_main(10)]), verify=fib_calls),
        "recur-mutual": Case("brecur.c", ["mutual"], exact([mutual_tree()])),
        "recur-thread": Case("brecur.c", ["thread"], exact([
            fib_main(6), dict(hanoi_tree(5, "hanoi_thread", collections.Counter(
                {"hanoi_thread": 1})))]), verify=fib_calls),
        # static and inline-heavy code: the tree the binary makes
        "inline-static": Case("binline.c", [], check_inline(b), verify=inline_expected),
        # without frame pointers
        "nofp-juggle": Case("bframes.c", ["juggle"], exact(
            [{"main": 1, "main;use": 60, "main;check_sum": 1}]), variant="nofp",
            verify=both(fp_verify("use", "juggle"), rbp_as_data), **nofp),
        "nofp-deep": Case("bframes.c", ["deep"], frames_deep, variant="nofp",
                          verify=fp_verify("d1", "hop"), **nofp),
        "frames-deep": Case("bframes.c", ["deep"], frames_deep),
        "nofp-longjmp": Case("bjmp.c", ["longjmp"], jump, variant="nofp",
                             verify=fp_verify("depth1"), **nofp),
        "nofp-siglongjmp": Case("bjmp.c", ["siglongjmp"], jump, variant="nofp",
                                verify=fp_verify("depth1"), **nofp),
        "nofp-signals-siglongjmp": Case("bsignals.c", ["siglongjmp"], sigjmp, variant="nofp",
                                        verify=fp_verify("level1"), **nofp),
        "nofp-exc-throw": Case("bexc.cpp", ["throw"], exc_throw, variant="nofp",
                               verify=fp_verify("d1"), **nofp),
        "nofp-exc-raii": Case("bexc.cpp", ["raii"], exc_raii, variant="nofp",
                              verify=fp_verify("g_outer"), **nofp),
        "nofp-backtrace": Case("bunwind.c", ["bt"], bt, cflags="-rdynamic",
                               variant="rdynamic-nofp", verify=fp_verify("f1"), **nofp),
        "nofp-backtrace-signal": Case("bunwind.c", ["signal"], bt_signal, cflags="-rdynamic",
                                      variant="rdynamic-nofp", verify=fp_verify("f1"), **nofp),
        "nofp-tailcall": Case("btail.c", [], tail, variant="nofp",
                              verify=both(b.tail_calls, fp_verify("chain")), **nofp),
        "nofp-recur-fib": Case("brecur.c", ["fib"], exact([fib_main(10)]), variant="nofp",
                               verify=both(fib_calls, fp_verify("fib")), **nofp),
        "nofp-variadic": Case("bcalls.c", ["variadic"], exact([VARIADIC_TREE]), variant="nofp",
                              verify=fp_verify("sum_mixed"), **nofp),
    }
