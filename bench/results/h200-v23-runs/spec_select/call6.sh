# Call 6: the speculative select's final build (.deps/gpu.tar.xz; main in .deps/gpu-base.tar.xz):
# the sweep beside torch and the end-to-end run (bench/gpu/validate.sh perf), then whole
# calls in the order main, branch, branch, main at 1M (pageable and pinned), 5M and 8.8M rows.
bench/gpu/validate.sh perf
. bench/results/h200-v22-runs/common.sh
D=$OUT/c6; mkdir -p $D
run() { # label, build dir, args
  local l=$1 b=$2; shift 2
  LD_LIBRARY_PATH=.deps/$b/lib timeout 60 .deps/$b/build/bench/sieve-bench knn "$@" --repeat 20 --no-materialized --json $D/t_$l.json > $D/t_$l.log 2>&1
  echo "$l: $(python3 -c '
import json,sys
print(" | ".join("%d/%d %.3f/%s" % (r["batch"], r["k"], r["fused_ms"], r.get("speculation_missed","-")) for r in map(json.loads, open(sys.argv[1]))))' $D/t_$l.json)"
}
for s in base1:gpu-base spec1:gpu spec2:gpu base2:gpu-base; do
  run 1m_${s%%:*} ${s#*:} --n 1m --batch 1,16,64,128 --k 10,128,1024,8192
  run 1mpin_${s%%:*} ${s#*:} --n 1m --batch 1,16,64,128 --k 10,128,1024,8192 --results pinned
  run 5m_${s%%:*} ${s#*:} --n 5m --batch 1,16,64,128 --k 10,128,1024,8192
  run 88m_${s%%:*} ${s#*:} --n 8841823 --batch 1,64 --k 10,128
done
tar czf $OUT/call6.tar.gz -C $OUT c6 && rm -rf $D
