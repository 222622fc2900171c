# Prints each shape of call 9 with the explicit sample's two runs (o) against the
# default's two (n) and the change of their means; run from h200-v34-runs/.
import collections, glob, json
d = collections.defaultdict(dict)
for f in sorted(glob.glob("c9/t_*.json")):
    lab = f.split("t_")[1][:-5]
    for line in open(f):
        r = json.loads(line)
        d[(lab.split("_")[0], r["n"], r["batch"], r["k"])][lab.split("_")[1]] = (
            r["fused_ms"], r["admitted_per_query"])
for key, v in d.items():
    o = [v[x][0] for x in ("o1", "o2")]
    n = [v[x][0] for x in ("n1", "n2")]
    print(key, "explicit %.3f-%.3f adm %d" % (min(o), max(o), v["o1"][1]),
          "default %.3f-%.3f adm %d" % (min(n), max(n), v["n1"][1]),
          "%+.1f%%" % (100 * (sum(o) / 2 / (sum(n) / 2) - 1)))
