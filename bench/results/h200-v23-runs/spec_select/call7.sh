# Call 7: the final speculative select (no speculation where the results take the pipelined
# download): the GPU kernel suite, then whole calls in the order main, branch, branch, main.
# Everything lands in $OUT/call7.tar.gz.
. bench/results/h200-v22-runs/common.sh
D=$OUT/c7; mkdir -p $D
echo "--- GPU suite ($(date -u +%T))"
timeout 250 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "rc $?"; grep -E "^\[(FAIL|====)|assert" $D/test_knn_cuda.log | tail -8
echo "--- timing ($(date -u +%T))"
run() { # label, build dir, args
  local l=$1 b=$2; shift 2
  LD_LIBRARY_PATH=.deps/$b/lib timeout 60 .deps/$b/build/bench/sieve-bench knn "$@" --repeat 20 --no-materialized --json $D/t_$l.json > $D/t_$l.log 2>&1
  echo "$l: $(python3 -c '
import json,sys
print(" | ".join("%d/%d %.3f/%s" % (r["batch"], r["k"], r["fused_ms"], r.get("speculation_missed","-")) for r in map(json.loads, open(sys.argv[1]))))' $D/t_$l.json)"
}
for s in base1:gpu-base spec1:gpu spec2:gpu base2:gpu-base; do
  run 1m_${s%%:*} ${s#*:} --n 1m --batch 1,16,64,128 --k 10,128,1024,8192
  run 5m_${s%%:*} ${s#*:} --n 5m --batch 1,16,64,128 --k 10,128,1024,8192
  run 5mpin_${s%%:*} ${s#*:} --n 5m --batch 1,16,64,128 --k 128,8192 --results pinned
done
echo "--- done ($(date -u +%T))"
tar czf $OUT/call7.tar.gz -C $OUT c7 && rm -rf $D
