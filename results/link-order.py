#!/usr/bin/env python3
"""Writes a linker symbol-ordering file (one mangled symbol a line, hottest first) from perf profiles.

usage: results/link-order.py [--map LINK.MAP [--largest BYTES]] BINARY PERF.DATA... > order.txt

The experiment of results/profile.md section 28 (the hot code laid out together): link with
`-use-ld=lld -Xlinker --symbol-ordering-file=order.txt`, best with every Swift module compiled
with `-Xfrontend -function-sections`. It did not pay enough to be wired into the build.

Each PERF.DATA is a `perf record -g` of a run of BINARY (e.g. `perf record -F 20000 -e cpu-clock -g`
of `streamer send` and `streamer recv` at 240 fps, results/profile.md section 28). Every function
of BINARY that a sample's call chain passes through, in any thread, is listed, by the number of
samples it is in (its own and its callees'), most first, then by its own samples: the code touched
at every wake-up comes out together. Functions of shared libraries (libc) and the kernel are left
out: the linker places only what it links. Names are mangled (`perf script --no-demangle`), as the
linker's `--symbol-ordering-file` (lld) wants them.

With --map (an lld map of a link of the same objects, `-Xlinker -Map=FILE`), a symbol whose input
section is larger than BYTES (16 KiB unless --largest says otherwise) is left out: it lives in a
library's one `.text` (the Swift standard library's is 1.6 MB, not compiled with one section per
function), and naming it would move that whole section into the middle of the hot code.
"""
import collections
import os
import subprocess
import sys


LARGEST_SECTION = 16 * 1024


def section_sizes(map_path: str) -> dict[str, int]:
    """The size of the input section each symbol of an lld map lives in."""
    sizes: dict[str, int] = {}
    section = 0
    with open(map_path) as lines:
        for line in lines:
            parts = line.split()
            if len(parts) == 5 and parts[4].endswith(")") and ":(" in parts[4]:
                section = int(parts[2], 16)
            elif len(parts) == 5 and not parts[4].startswith("."):
                sizes.setdefault(parts[4], section)
    return sizes


def main() -> None:
    args = sys.argv[1:]
    sizes = None
    if args[:1] == ["--map"] and len(args) > 1:
        sizes = section_sizes(args[1])
        args = args[2:]
    largest = LARGEST_SECTION
    if args[:1] == ["--largest"] and len(args) > 1:
        largest = int(args[1])
        args = args[2:]
    if len(args) < 2:
        sys.exit(__doc__)
    binary = os.path.realpath(args[0])
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    for data in args[1:]:
        script = subprocess.run(
            ["perf", "script", "-i", data, "-F", "ip,sym,dso", "--no-demangle"],
            check=True, capture_output=True, text=True).stdout
        for sample in script.split("\n\n"):
            seen: set[str] = set()
            leaf = True
            for line in sample.splitlines():
                parts = line.split()
                if len(parts) < 3:
                    continue
                dso = parts[-1].strip("()")
                symbol = " ".join(parts[1:-1])
                if os.path.realpath(dso) == binary and symbol != "[unknown]":
                    symbol = symbol.split("+0x")[0]
                    if leaf:
                        own[symbol] += 1
                    seen.add(symbol)
                leaf = False
            inclusive.update(seen)
    for symbol in sorted(inclusive, key=lambda s: (-inclusive[s], -own[s], s)):
        if sizes is None or sizes.get(symbol, 0) <= largest:
            print(symbol)


if __name__ == "__main__":
    main()
