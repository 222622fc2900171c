#!/usr/bin/env python3
"""Checks a compute-sanitizer racecheck log of sieve-bench for the one stated exception.

The 128-query staged TMA tile (tma128x256h, HLP in kernels/cuda/scan.cuh) hands each
consumer warp's staged entries to a producer-warpgroup helper through named barriers:
the consumer warps `bar.arrive` after writing, the helper `bar.sync` before reading (and the
reverse for the buffer's reuse). That is the producer-consumer use of bar.arrive the PTX
ISA describes; racecheck does not follow it and reports those accesses. This script
passes a log only if every access racecheck names lies on a line the source marks with a
"racecheck-handoff" comment (the comment's next two lines) and no other kind of error was
reported. Exit 0: clean or only hand-off reports; 1: anything else.

usage: bench/gpu/racecheck_handoff.py LOG [SOURCE]   (SOURCE: kernels/cuda/scan.cuh)
"""
import re
import sys


def allowed_lines(source):
    ok = set()
    with open(source) as f:
        for n, line in enumerate(f, 1):
            if "racecheck-handoff" in line:
                ok.update((n + 1, n + 2))
    return ok


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 1
    log = argv[1]
    source = argv[2] if len(argv) > 2 else "kernels/cuda/scan.cuh"
    name = source.rsplit("/", 1)[-1]
    ok = allowed_lines(source)
    loc = re.compile(r"access at .* in ([^ :]+):(\d+)")
    reports, bad, other, summary = 0, [], [], None
    with open(log, errors="replace") as f:
        for line in f:
            if "RACECHECK SUMMARY" in line:
                summary = line.strip()
            if "Race reported" in line or line.startswith("=========     and "):
                reports += "Race reported" in line
                m = loc.search(line)
                if not m or m.group(1).rsplit("/", 1)[-1] != name or int(m.group(2)) not in ok:
                    bad.append(line.strip())
            elif "Error:" in line or "Warning:" in line:
                other.append(line.strip())
    if summary is None:
        print(f"{log}: no racecheck summary (the run did not finish)")
        return 1
    if bad or other:
        for l in (bad + other)[:20]:
            print("not the hand-off:", l)
        return 1
    print(f"{log}: {summary.lstrip('= ')}; {reports} reports, every access on the HLP hand-off "
          f"lines of {name} ({sorted(ok)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
