#!/usr/bin/env python3
"""Summarises alternating runs (t_<set>_<build><round>.json, build one letter, round 1 or 2):
per shape each build's two times (whole sieve_knn calls, ms), its admissions per query (and
"R n" where n queries took a recovery path: underfill, overflow or full row), and each build
against the reference build by the means of the two runs.
usage: summarize.py [--ref LETTER] CALL_DIR..."""
import collections, glob, json, os, re, sys

args = sys.argv[1:]
if not args or args[0] in ("-h", "--help"):
    print(__doc__.strip())
    sys.exit(0 if args else 2)
ref = "b"
if args[0] == "--ref":
    ref, args = args[1], args[2:]
for d in args:
    sets = collections.defaultdict(lambda: collections.defaultdict(lambda: collections.defaultdict(list)))
    for f in sorted(glob.glob(os.path.join(d, "t_*.json"))):
        m = re.match(r"t_([a-z0-9]+)_([a-z])([12])\.json$", os.path.basename(f))
        if not m:
            continue
        for r in map(json.loads, open(f)):
            key = (r["n"], r["batch"], r["k"], r["results"])
            sets[m.group(1)][key][m.group(2)].append(
                (r["fused_ms"], r["admitted_per_query"], sum(r["paths"][1:4])))
    for s in sorted(sets):
        t = sets[s]
        builds = sorted({x for v in t.values() for x in v}, key=lambda x: (x != ref, x))
        print("%s/%s: N, B, k, results | %s | %s" % (
            os.path.basename(d.rstrip("/")), s, " | ".join("%s ms (adm/q)" % x for x in builds),
            " | ".join("%s/%s" % (x, ref) for x in builds if x != ref)))
        for key in sorted(t):
            v = t[key]
            if not all(len(v[x]) == 2 for x in builds):
                continue
            mean = {x: sum(e[0] for e in v[x]) / 2 for x in builds}
            cols = ["%.3f-%.3f (%.0f%s)" % (min(e[0] for e in v[x]), max(e[0] for e in v[x]), v[x][0][1],
                                           " R%d" % v[x][0][2] if v[x][0][2] else "")
                    for x in builds]
            rel = ["%+5.1f%%" % (100 * (mean[x] / mean[ref] - 1)) for x in builds if x != ref]
            print("%9d %5d %6d %-8s | %s | %s" % (key + (" | ".join(cols), " | ".join(rel))))
