#!/usr/bin/env python3
"""Summarises the three-way A/B of calls 1-2 (t_<set>_<o|b|n><round>.json): per shape the
two runs of each build (o: bc6cc4e, before the streamed download; b: main, 6f8d57a; n: the
build under test) and n against b and o by the means of the two runs.
usage: summarize.py CALL_DIR..."""
import collections, glob, json, os, re, sys

if len(sys.argv) < 2 or sys.argv[1] in ("-h", "--help"):
    print(__doc__.strip())
    sys.exit(0 if len(sys.argv) > 1 else 2)
for d in sys.argv[1:]:
    t = collections.defaultdict(lambda: collections.defaultdict(list))
    for f in sorted(glob.glob(os.path.join(d, "t_*.json"))):
        m = re.match(r"t_([a-z]+)_([obn])([12])\.json$", os.path.basename(f))
        if not m:
            continue
        for r in map(json.loads, open(f)):
            t[(r["n"], r["batch"], r["k"])][m.group(2)].append(r["fused_ms"])
    print("%s: N, B, k | o (bc6cc4e) | b (6f8d57a) | n (this build) | n/b | n/o" % d)
    for key in sorted(t):
        v = t[key]
        if not all(len(v[x]) == 2 for x in "obn"):
            continue
        mean = {x: sum(v[x]) / 2 for x in "obn"}
        print("%9d %5d %6d | %s | %s | %s | %+5.1f%% | %+5.1f%%" % (
            key + tuple("%.3f-%.3f" % (min(v[x]), max(v[x])) for x in "obn") +
            (100 * (mean["n"] / mean["b"] - 1), 100 * (mean["n"] / mean["o"] - 1))))
