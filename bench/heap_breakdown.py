#!/usr/bin/env python3
"""Groups a heaptrack peak flame graph (`heaptrack_print -F FILE --flamegraph-cost-type peak`) by
the innermost function of each stack that is not allocator, container or std plumbing, and prints
the bytes per session (the total divided by K), largest first.

    heap_breakdown.py PEAK_FILE K [LINES]
"""
import collections
import re
import sys

PLUMBING = re.compile(r"^(alloc::|RNv|rust|rdl|<alloc::|core::|hashbrown|<core::|0x|malloc|"
                      r"realloc|calloc|bytes::|<bytes::|std::)")


def short(frame):
    frame = re.sub(r"::h[0-9a-f]{16}$", "", frame)
    for a, b in (("$LT$", "<"), ("$GT$", ">"), ("$u20$", " "), ("$C$", ","), ("..", "::"), ("$RF$", "&")):
        frame = frame.replace(a, b)
    return frame.lstrip("_")[:110]  # v0-mangled std frames start with `_R`


def main():
    path, k = sys.argv[1], int(sys.argv[2])
    lines = int(sys.argv[3]) if len(sys.argv) > 3 else 30
    groups = collections.Counter()
    for line in open(path):
        stack, _, cost = line.rstrip("\n").rpartition(" ")
        if not cost.isdigit() or int(cost) == 0:
            continue
        frames = [short(f) for f in stack.split(";") if f]
        key = next((f for f in reversed(frames) if not PLUMBING.match(f)), frames[-1] if frames else "?")
        groups[key] += int(cost)
    total = sum(groups.values())
    print(f"heap at the peak: {total / k / 1024:.2f} KiB per session ({total / 1024:.0f} KiB)")
    for key, cost in groups.most_common(lines):
        print(f"{cost / k:8.0f} B  {key}")


if __name__ == "__main__":
    main()
