# Sourced by the call scripts in this folder (run on the GPU machine from the repository
# root; needs $D, the call's output folder). Folded out of calls 2-4 after the runs (call 2
# cut each run at 90 s, calls 3 and 4 at 120 s; the same otherwise).
. bench/results/h200-v23-runs/spec_select/common.sh
# run40 LABEL BUILD ENV ARGS...: like `run`, 40 timed calls; prints B/k fused_ms/launches_chained
run40() {
  local l=$1 b=$2 e=$3; shift 3
  env $e LD_LIBRARY_PATH=.deps/$b/lib timeout 120 .deps/$b/build/bench/sieve-bench knn "$@" \
    --repeat 40 --no-materialized --json $D/t_$l.json > $D/t_$l.log 2>&1
  echo "$l: $(python3 -c '
import json,sys
print(" | ".join("%d/%d %.3f/%s" % (r["batch"], r["k"], r["fused_ms"], r.get("launches_chained","-")) for r in map(json.loads, open(sys.argv[1]))))' $D/t_$l.json)"
}
