#!/usr/bin/env python3
"""fork_page.py LIB - checks that what a fork writes stays on one page (preload/forkpage.h):
libftrace.so's section "ftr_fork_page" must exist, start on a page and fit in it. Exit 1 with
a line saying what is wrong otherwise. stdlib only: reads the ELF section headers itself."""
import struct
import sys

PAGE = 4096


def sections(path):
    with open(path, "rb") as f:
        data = f.read()
    if data[:4] != b"\x7fELF" or data[4] != 2:
        raise SystemExit("fork_page: %s: not a 64-bit ELF file" % path)
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    heads = [struct.unpack_from("<IIQQQQIIQQ", data, shoff + i * shentsize) for i in range(shnum)]
    strtab = heads[shstrndx]
    names = data[strtab[4]:strtab[4] + strtab[5]]
    for h in heads:
        name = names[h[0]:names.index(b"\0", h[0])].decode()
        yield name, h[3], h[5]  # name, address, size


def main():
    found = [(a, n) for name, a, n in sections(sys.argv[1]) if name == "ftr_fork_page"]
    if not found:
        raise SystemExit("fork_page: no section ftr_fork_page in %s" % sys.argv[1])
    addr, size = found[0]
    if addr % PAGE or size > PAGE:
        raise SystemExit("fork_page: ftr_fork_page at %#x, %d bytes: not on one page" % (addr, size))
    print("ftr_fork_page: %d of %d bytes, at %#x" % (size, PAGE, addr))


main()
