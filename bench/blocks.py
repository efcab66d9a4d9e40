"""blocks.py - the building blocks' line (bench/blocks.c) that every benchmark prints beside its
figures, so that ratios from different hosts can be told apart."""
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))


def blocks_line(work):
    """Builds bench/blocks.c into work and returns 'building blocks, ns (bench/blocks.c): ...'."""
    exe = os.path.join(work, "blocks")
    subprocess.run(["gcc", "-O2", "-mno-red-zone", "-o", exe, os.path.join(HERE, "blocks.c")],
                   check=True)
    out = subprocess.run([exe], capture_output=True, text=True).stdout
    return "building blocks, ns (bench/blocks.c): " + ", ".join(out.splitlines())
