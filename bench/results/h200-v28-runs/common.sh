# Sourced by the call scripts in this folder (run on the GPU machine from the repository
# root, the build under test in .deps/gpu.tar.xz). Needs $D, the call's output folder.
# The helpers (run, exact) are those of h200-v26-runs/common.sh; kdur prints each kernel's
# duration (Nsight Compute, one metric, clocks left alone) over whole sieve_knn calls; ab
# runs main's build and the build under test alternating.
. bench/results/h200-v26-runs/common.sh
# ab LABEL ARGS...: run with main's build (.deps/gpu-base, from its own bundle) and the
# build under test alternating: base, new, new, base
SBN=$SB; SBB=.deps/gpu-base/build/bench/sieve-bench
ab() {
  local l=$1; shift
  for s in b1:$SBB n1:$SBN n2:$SBN b2:$SBB; do
    IFS=: read t bin <<< "$s"; SB=$bin run ${l}_$t X=1 "$@"
  done
  SB=$SBN
}
# kdur LABEL ENV ARGS...: one untimed and one timed call of sieve-bench knn ARGS under ncu
kdur() {
  local l=$1 e=$2; shift 2
  env $e timeout 120 $NCU --clock-control none --metrics gpu__time_duration.sum --csv \
    --print-units base $SB knn "$@" --repeat 1 --warmup 1 --no-materialized \
    > $D/kdur_$l.csv 2> $D/kdur_$l.err
  python3 - $D/kdur_$l.csv "$l" <<'PY'
import csv, sys, collections, re
rows = [r for r in csv.reader(open(sys.argv[1])) if len(r) > 10]
hdr = rows[0]; ki = hdr.index("Kernel Name"); vi = hdr.index("Metric Value")
seen = collections.OrderedDict()
for r in rows[1:]:
    v = r[vi].replace(",", "")
    if not v.replace(".", "").isdigit(): continue
    name = re.sub(r"^void |<unnamed>::|sieve_cuda::|cub::\w+::", "", r[ki].split("(")[0])
    seen.setdefault(name.split("<")[0].replace("_kernel", ""), []).append(float(v) / 1e3)
# the second call's launches (the first call is a warm-up); fill_rows: the data, once
out = ["%s %.1f" % (n, sum(v[len(v) // 2:])) for n, v in seen.items() if n != "fill_rows"]
print(sys.argv[2] + ": " + ", ".join(out) + " (us)")
PY
}
