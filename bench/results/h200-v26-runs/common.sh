# Sourced by the call scripts in this folder (run on the GPU machine from the repository
# root, the build under test in .deps/gpu.tar.xz). Needs $D, the call's output folder.
# Gives $SB (the build's sieve-bench), run (timed calls) and exact (against the
# materialized path).
. bench/results/h200-v22-runs/common.sh
mkdir -p "$D"
# run LABEL ENV ARGS...: sieve-bench knn with the setting ENV (X=1 for none), 20 timed
# calls, no materialized path; prints B/k fused_ms per shape
run() {
  local l=$1 e=$2; shift 2
  env $e timeout 60 $SB knn "$@" --repeat 20 --no-materialized --json $D/t_$l.json > $D/t_$l.log 2>&1
  echo "$l: $(python3 -c '
import json,sys
print(" | ".join("%d/%d %.3f" % (r["batch"], r["k"], r["fused_ms"]) for r in map(json.loads, open(sys.argv[1]))))' $D/t_$l.json)"
}
# exact LABEL ENV DATA METRIC ARGS...: every shape against the materialized path's full sort
exact() {
  local l=$1 e=$2 dd=$3 m=$4; shift 4
  env $e timeout 60 $SB knn --data $dd --metric $m --repeat 1 --warmup 0 --mat-repeat 1 "$@" > $D/exact_$l.log 2>&1
  echo "exact $l ($dd/$m) rc $?: $(grep -cE ' yes ' $D/exact_$l.log) yes, $(grep -c MISMATCH $D/exact_$l.log) MISMATCH"
}
