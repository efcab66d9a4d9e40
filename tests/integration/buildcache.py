"""A cache of the test programs the drivers build, shared by all of them (and by the runs of a
soak: the second suite compiles nothing).

    buildcache.use(bindir)              once per driver: the cache is BINDIR/test-cache
    r = buildcache.run(cmd, out, ...)   as subprocess.run(cmd, ...): builds OUT, or copies it from
                                        the cache; returns a CompletedProcess

A built file is keyed on the sha256 of: the command line with OUT replaced by a placeholder
(shell strings and argument lists alike), every compiler the command names (its resolved path,
size, mtime and `--version`), the working directory when the command names something relative
to it, the contents of every file the command names (sources, libraries it links by path or by
-L DIR -lNAME) and, recursively, of every header or source they #include that is found beside
them or along the command's -I directories, and the environment variables that steer a compiler
or linker. Anything else that changes the output (a system header, a system library) comes with
a new compiler package, hence a new --version or mtime. A file is written to a temporary name
and renamed (drivers run in parallel); a hit is copied, never linked (a test may replace its
program). A failed build is never cached.

    FTR_BUILD_CACHE=0      no cache (every build runs)
    FTR_BUILD_CACHE=DIR    the cache is DIR
"""
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile

VERSION = "ftr-buildcache 1"
COMPILERS = {"gcc", "g++", "cc", "c++", "clang", "clang++", "ld", "as"}
ENV = ("CPATH", "C_INCLUDE_PATH", "CPLUS_INCLUDE_PATH", "LIBRARY_PATH", "GCC_EXEC_PREFIX",
       "COMPILER_PATH", "LD_RUN_PATH", "SOURCE_DATE_EPOCH", "GCC_COMPARE_DEBUG",
       "DEPENDENCIES_OUTPUT", "SUNPRO_DEPENDENCIES", "CCC_OVERRIDE_OPTIONS")
TOOLS = ("ld", "as")  # what the compiler drivers run, whichever the command names
INCLUDE = re.compile(r'^\s*#\s*include\s*["<]([^">]+)[">]', re.M)
SOURCE_EXT = (".c", ".cc", ".cpp", ".cxx", ".h", ".hh", ".hpp", ".S", ".s", ".inc")

_dir = None
_versions = {}
stats = {"hits": 0, "misses": 0}


def use(bindir):
    """The cache for the build directory bindir (unless FTR_BUILD_CACHE says otherwise).
    Also names bindir's graph-fold, which parse_graph (run_integration.py) runs: FTR_GRAPH_FOLD."""
    global _dir
    os.environ["FTR_GRAPH_FOLD"] = os.path.join(os.path.abspath(bindir), "graph-fold")
    env = os.environ.get("FTR_BUILD_CACHE", "")
    if env == "0":
        _dir = None
    elif env and env != "1":
        _dir = os.path.abspath(env)
    else:
        _dir = os.path.join(os.path.abspath(bindir), "test-cache")
    if _dir:
        os.makedirs(_dir, exist_ok=True)
    return _dir


def enabled():
    return _dir is not None


def _words(cmd, shell):
    """The command's words; for a shell string, the words of its simple commands together."""
    if not shell:
        return [str(w) for w in cmd]
    try:
        return shlex.split(cmd)
    except ValueError:
        return cmd.split()


def _compiler(word):
    path = shutil.which(word)
    if not path:
        return "%s: not found" % word
    real = os.path.realpath(path)
    st = os.stat(real)
    key = (real, st.st_size, st.st_mtime_ns)
    if key not in _versions:
        r = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=60)
        _versions[key] = "%s %d %d %s" % (real, st.st_size, st.st_mtime_ns, r.stdout)
    return _versions[key]


def _file_digest(path, idirs, h, seen, label=None):
    """Hashes path's contents (and label: its path unless given) into h; for sources, then the
    local files it includes."""
    path = os.path.realpath(path)
    if path in seen:
        return
    seen.add(path)
    with open(path, "rb") as f:
        data = f.read()
    h.update(b"\0file %s %d\0" % ((label or path).encode(), len(data)))
    h.update(data)
    if not path.endswith(SOURCE_EXT):
        return
    for name in INCLUDE.findall(data.decode("latin-1")):
        for d in [os.path.dirname(path)] + idirs:
            p = os.path.join(d, name)
            if os.path.isfile(p):
                _file_digest(p, idirs, h, seen)
                break


def key(cmd, out, shell=False, cwd=None, env=None):
    """The cache key (hex sha256) of building out with cmd."""
    env = os.environ if env is None else env
    out = os.path.abspath(os.path.join(cwd or os.getcwd(), out))
    words = _words(cmd, shell)
    cwd = os.path.abspath(cwd or os.getcwd())
    h = hashlib.sha256()
    h.update(VERSION.encode())
    h.update(b"\0shell %d\0" % bool(shell))
    for t in TOOLS:
        h.update(("\0tool %s\0" % _compiler(t)).encode())
    for k in ENV:
        h.update(("\0env %s=%s" % (k, env.get(k, "\1unset"))).encode())
    idirs, ldirs, libs, files, norm = [], [], [], [], []
    prev = None
    for w in words:
        # the output's name is not in the output; nor are the directories searched at link
        # time (-L), whose libraries are hashed below: a work directory of its own per run
        if os.path.abspath(os.path.join(cwd, w)) == out:
            norm.append("@OUT@")
        elif prev == "-L":
            norm.append("@L@")
        elif w.startswith("-L") and len(w) > 2:
            norm.append("-L@L@")
        else:
            norm.append(w)
        if prev in ("-I", "-iquote", "-isystem", "-L", "-l", "-include", "-o"):
            arg, opt = w, prev
        elif w[:2] in ("-I", "-L", "-l") and len(w) > 2:
            arg, opt = w[2:], w[:2]
        else:
            arg, opt = w, None
        prev = w
        if opt in ("-I", "-iquote", "-isystem"):
            idirs.append(os.path.join(cwd, arg))
        elif opt == "-L":
            ldirs.append(os.path.join(cwd, arg))
        elif opt == "-l":
            libs.append(arg)
        elif opt == "-o":
            continue
        elif opt == "-include":
            files.append((os.path.join(cwd, arg), None))
        elif os.path.basename(w) in COMPILERS or re.match(r"^(clang|gcc|g\+\+)(-\d+)?(\+\+)?$",
                                                          os.path.basename(w)):
            h.update(("\0compiler %s\0" % _compiler(w)).encode())
        elif not w.startswith("-"):
            p = os.path.join(cwd, w)
            if os.path.isfile(p) and os.path.abspath(p) != out:
                if p.endswith((".o", ".a")):  # linked in: where it was is not in the output
                    norm[-1] = "@obj@" + os.path.basename(p)
                    files.append((p, norm[-1]))
                else:
                    files.append((p, None))
    h.update(b"\0cmd\0" + "\0".join(norm).encode())
    # the working directory is only in the debug information (DW_AT_comp_dir), unless the
    # command names something relative to it
    if any(not os.path.isabs(w) and os.path.exists(os.path.join(cwd, w))
           for w in words if not w.startswith("-")) or any(
               not os.path.isabs(d) for d in idirs + ldirs):
        h.update(b"\0cwd %s\0" % cwd.encode())
    seen = set()
    for p, label in files:
        _file_digest(p, idirs, h, seen, label)
    for name in libs:  # libraries of the test's own, in the -L directories (not system ones)
        for i, d in enumerate(ldirs):
            for ext in (".so", ".a"):
                p = os.path.join(d, "lib%s%s" % (name, ext))
                if os.path.isfile(p):
                    _file_digest(p, idirs, h, seen, "-L%d/lib%s%s" % (i, name, ext))
    return h.hexdigest()


def _copy(src, dst):
    """Copies src to dst through a temporary name in dst's directory (atomic for readers)."""
    d = os.path.dirname(os.path.abspath(dst))
    fd, tmp = tempfile.mkstemp(prefix=".bc-", dir=d)
    try:
        with os.fdopen(fd, "wb") as f, open(src, "rb") as s:
            shutil.copyfileobj(s, f)
        shutil.copymode(src, tmp)
        os.replace(tmp, dst)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


def output(cmd, shell=False):
    """The file a command builds: the argument of its one -o (None: not one)."""
    words = _words(cmd, shell)
    outs = [words[i + 1] for i, w in enumerate(words[:-1]) if w == "-o"]
    outs += [w[2:] for w in words if w.startswith("-o") and len(w) > 2]
    return outs[0] if len(outs) == 1 else None


def run(cmd, out=None, shell=False, cwd=None, check=False, env=None, timeout=600, **kw):
    """subprocess.run(cmd, ...) building the file out (default: the command's -o argument),
    unless the cache has it: then copies it to out and returns a CompletedProcess with
    returncode 0 and empty output. A command of several (&&, ;, |) is never cached."""
    kw.setdefault("capture_output", True)
    kw.setdefault("text", True)
    if out is None:
        out = output(cmd, shell)
    if out is not None:
        out = os.path.join(cwd or "", out)
    several = shell and re.search(r"&&|\|\||[;|`]|\$\(", cmd)
    k = None
    if _dir and out and not several and "input" not in kw:  # stdin is not in the key
        k = key(cmd, out, shell, cwd, env)
        cached = os.path.join(_dir, k[:2], k)
        if os.path.isfile(cached):
            os.makedirs(os.path.dirname(os.path.abspath(out)) or ".", exist_ok=True)
            _copy(cached, out)
            stats["hits"] += 1
            with open(cached + ".out", "rb") as f:  # what the build said (warnings)
                said = f.read().split(b"\0", 1)
            if kw.get("text") or kw.get("universal_newlines"):
                said = [x.decode(errors="replace") for x in said]
            if not kw.get("capture_output") and kw.get("stderr") is None:
                sys.stdout.write(said[0] if isinstance(said[0], str) else said[0].decode())
                sys.stderr.write(said[1] if isinstance(said[1], str) else said[1].decode())
                said = [None, None]
            return subprocess.CompletedProcess(cmd, 0, said[0], said[1])
    r = subprocess.run(cmd, shell=shell, cwd=cwd, env=env, timeout=timeout, **kw)
    if check and r.returncode:
        if r.stderr:
            sys.stderr.write(r.stderr if isinstance(r.stderr, str) else r.stderr.decode())
        raise subprocess.CalledProcessError(r.returncode, cmd, r.stdout, r.stderr)
    if k and r.returncode == 0 and os.path.isfile(out):
        stats["misses"] += 1
        os.makedirs(os.path.dirname(cached), exist_ok=True)
        said = [x if isinstance(x, bytes) else (x or "").encode() for x in (r.stdout, r.stderr)]
        fd, tmp = tempfile.mkstemp(prefix=".bc-", dir=os.path.dirname(cached))
        with os.fdopen(fd, "wb") as f:
            f.write(said[0] + b"\0" + said[1])
        os.replace(tmp, cached + ".out")  # first: the file is there, so is what it said
        _copy(out, cached)
    return r


def source(name, text, fallback_dir):
    """A source file holding text, for a build: in the cache (content-addressed, so that its
    builds are found again there), else in fallback_dir. Returns its path."""
    if not _dir:
        path = os.path.join(fallback_dir, name)
        with open(path, "w") as f:
            f.write(text)
        return path
    d = os.path.join(_dir, "src", hashlib.sha256(text.encode()).hexdigest()[:24])
    path = os.path.join(d, name)
    if not os.path.isfile(path):
        os.makedirs(d, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=".bc-", dir=d)
        with os.fdopen(fd, "w") as f:
            f.write(text)
        os.replace(tmp, path)
    return path


def summary():
    """One line for a driver's output."""
    if not _dir:
        return "# build cache: off"
    return "# build cache %s: %d hits, %d builds" % (_dir, stats["hits"], stats["misses"])
