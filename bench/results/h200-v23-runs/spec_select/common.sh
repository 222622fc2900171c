# Sourced by the call scripts in this folder (run on the GPU machine from the repository
# root; the branch build in .deps/gpu.tar.xz, main's in .deps/gpu-base.tar.xz). Needs $D,
# the call's output folder. Folded out of the scripts after the runs; calls 2 and 3 printed
# the fused times alone (an awk line), the others also the speculation_missed flag.
. bench/results/h200-v22-runs/common.sh
mkdir -p "$D"
# gpu_suite: the branch's GPU kernel suite, cut after 250 s
gpu_suite() {
  echo "--- GPU suite ($(date -u +%T))"
  timeout 250 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
  echo "rc $?"; grep -E "^\[(FAIL|====)|assert" $D/test_knn_cuda.log | tail -8
}
# run LABEL BUILD ENV ARGS...: sieve-bench knn of .deps/BUILD with the setting ENV (X=1 for
# none), 20 timed calls, no materialized path; prints B/k fused_ms/speculation_missed and,
# where the build reports it, /g and graph_launches of the last call
run() {
  local l=$1 b=$2 e=$3; shift 3
  env $e LD_LIBRARY_PATH=.deps/$b/lib timeout 60 .deps/$b/build/bench/sieve-bench knn "$@" \
    --repeat 20 --no-materialized --json $D/t_$l.json > $D/t_$l.log 2>&1
  echo "$l: $(python3 -c '
import json,sys
print(" | ".join("%d/%d %.3f/%s%s" % (r["batch"], r["k"], r["fused_ms"], r.get("speculation_missed","-"), "/g%d" % r["graph_launches"] if "graph_launches" in r else "") for r in map(json.loads, open(sys.argv[1]))))' $D/t_$l.json)"
}
