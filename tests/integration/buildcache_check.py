#!/usr/bin/env python3
"""Checks the build cache (buildcache.py) the drivers share: a build is found again whatever
its output's name or its work directory, and is rebuilt whenever anything it is made of
changes: the source, a header it includes (also through another), a flag, a library it links
(-L DIR -lNAME), an object it links, the environment that steers the compiler. A failed build
is never cached, what a build said is said again on a hit, and FTR_BUILD_CACHE=0 turns it off.

usage: buildcache_check.py [--bin DIR]   (DIR is ignored: the cache is a scratch directory)
"""
import os
import shutil
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import buildcache  # noqa: E402

failures = []


def check(cond, what):
    print(("ok   " if cond else "FAIL ") + what)
    if not cond:
        failures.append(what)


def write(path, text):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write(text)


def main():
    top = tempfile.mkdtemp(prefix="ftr-bc-")
    try:
        os.environ.pop("FTR_BUILD_CACHE", None)
        cache = buildcache.use(os.path.join(top, "build"))
        check(cache == os.path.join(top, "build", "test-cache"), "default: BIN/test-cache")
        src = os.path.join(top, "src")
        write(os.path.join(src, "p.c"), '#include "a.h"\nint main(void) { return A; }\n')
        write(os.path.join(src, "a.h"), '#include "sub/b.h"\n#define A (B + 1)\n')
        write(os.path.join(src, "sub", "b.h"), "#define B 3\n")
        write(os.path.join(src, "l.c"), "int lf(void) { return 7; }\n")

        def build(flags="-O2", out=None, work="w1", libs=""):
            d = os.path.join(top, work)
            os.makedirs(d, exist_ok=True)
            exe = out or os.path.join(d, "p")
            before = dict(buildcache.stats)
            r = buildcache.run("gcc %s -I%s -o %s %s/p.c %s" % (flags, src, exe, src, libs),
                               shell=True)
            assert r.returncode == 0, r.stderr
            rc = subprocess.run([exe], timeout=30).returncode
            return buildcache.stats["hits"] > before["hits"], rc

        check(build() == (False, 4), "first build: built, runs")
        check(build() == (True, 4), "the same again: from the cache")
        check(build(work="w2", out=os.path.join(top, "w2", "other")) == (True, 4),
              "another output name and work directory: from the cache")
        r = buildcache.run("gcc -O2 -I%s -o p %s/p.c" % (src, src), shell=True,
                           cwd=os.path.join(top, "w2"))
        check(r.returncode == 0 and buildcache.stats["hits"] == 3,
              "another working directory (absolute names): from the cache")
        write(os.path.join(top, "w1", "rel.c"), "int main(void) { return 1; }\n")
        write(os.path.join(top, "w2", "rel.c"), "int main(void) { return 2; }\n")
        rc = []
        for w in ("w1", "w2"):
            d = os.path.join(top, w)
            buildcache.run("gcc -o rel rel.c", shell=True, cwd=d)
            rc.append(subprocess.run([os.path.join(d, "rel")], timeout=30).returncode)
        check(rc == [1, 2], "a relative source in another working directory: built")
        check(build("-O0")[0] is False, "another flag: built")
        write(os.path.join(src, "p.c"), '#include "a.h"\nint main(void) { return A + 1; }\n')
        check(build() == (False, 5), "source changed: built, new program")
        write(os.path.join(src, "sub", "b.h"), "#define B 5\n")
        check(build() == (False, 7), "a header included by a header changed: built")
        check(build() == (True, 7), "... then from the cache")
        os.environ["CPATH"] = src
        check(build()[0] is False, "CPATH set: built")
        del os.environ["CPATH"]
        # a library linked with -L WORK -lNAME: its contents are in the key, its directory not
        for w in ("w1", "w2"):
            r = buildcache.run("gcc -O2 -fPIC -shared -o %s/libl.so %s/l.c" % (
                os.path.join(top, w), src), shell=True)
            assert r.returncode == 0, r.stderr
        link = "-L%s -ll -Wl,-rpath,'$ORIGIN'"
        check(build(libs=link % os.path.join(top, "w1"))[0] is False, "with -lNAME: built")
        check(build(work="w2", libs=link % os.path.join(top, "w2"))[0] is True,
              "the same library in another -L directory: from the cache")
        write(os.path.join(src, "l.c"), "int lf(void) { return 8; }\n")
        r = buildcache.run("gcc -O2 -fPIC -shared -o %s/libl.so %s/l.c" % (
            os.path.join(top, "w2"), src), shell=True)
        check(r.returncode == 0 and build(work="w2", libs=link % os.path.join(top, "w2"))[0]
              is False, "the library changed: built")
        # an object linked in
        o = os.path.join(top, "w1", "l.o")
        buildcache.run(["gcc", "-O2", "-c", "-o", o, os.path.join(src, "l.c")])
        check(build(libs=o)[0] is False, "with an object: built")
        check(build(libs=o)[0] is True, "... then from the cache")
        write(os.path.join(src, "l.c"), "int lf(void) { return 9; }\nint lg(void) { return 1; }\n")
        buildcache.run(["gcc", "-O2", "-c", "-o", o, os.path.join(src, "l.c")])
        check(build(libs=o)[0] is False, "the object changed: built")
        # failures are not cached; warnings are said again
        bad = os.path.join(src, "bad.c")
        write(bad, "int main(void) { return x; }\n")
        for i in range(2):
            r = buildcache.run("gcc -o %s/bad %s" % (top, bad), shell=True)
            check(r.returncode != 0 and "x" in r.stderr, "a failed build fails (%d)" % i)
        warn = os.path.join(src, "warn.c")
        write(warn, "int main(void) { int u; return 0; }\n")
        said = [buildcache.run("gcc -Wall -o %s/warn %s" % (top, warn), shell=True).stderr
                for _ in range(2)]
        check("unused" in said[0] and said[0] == said[1], "a warning is said on a hit too")
        # generated sources: content-addressed
        a = buildcache.source("g.c", "int main(void) { return 0; }\n", top)
        b = buildcache.source("g.c", "int main(void) { return 0; }\n", top)
        c = buildcache.source("g.c", "int main(void) { return 1; }\n", top)
        check(a == b != c and open(c).read().endswith("return 1; }\n"), "generated sources")
        # several commands at once are not cached
        before = dict(buildcache.stats)
        r = [buildcache.run("gcc -o %s/s1 %s && true" % (top, warn), shell=True).returncode
             for _ in range(2)]
        check(r == [0, 0] and buildcache.stats == before, "a command of several: always run")
        os.environ["FTR_BUILD_CACHE"] = "0"
        check(buildcache.use(top) is None and build() == (False, 7), "FTR_BUILD_CACHE=0: off")
        os.environ["FTR_BUILD_CACHE"] = os.path.join(top, "elsewhere")
        check(buildcache.use(top) == os.path.join(top, "elsewhere") and build()[0] is False,
              "FTR_BUILD_CACHE=DIR: that directory")
    finally:
        shutil.rmtree(top, ignore_errors=True)
    print("%d failed" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
