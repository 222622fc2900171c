# Call 1: chained launches (programmatic dependent launch, branch next/pdl) against main
# (07de6ca, .deps/gpu-base.tar.xz): main's GPU kernel suite and the branch's at the same
# time (correctness only), then whole calls in the order main, branch, branch, main, and the
# branch with SIEVE_CUDA_PDL=0. Everything lands in $OUT/call1.tar.gz.
D=$OUT/c1; . bench/results/h200-v23-runs/spec_select/common.sh
echo "--- GPU suites, main and branch at once ($(date -u +%T))"
timeout 280 .deps/gpu-base/build/tests/test_knn_cuda --jobs 2 --verbose=0 > $D/test_knn_cuda_main.log 2>&1 &
timeout 280 .deps/gpu/build/tests/test_knn_cuda --jobs 2 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "branch rc $?"; wait $!; echo "main rc $?"
for f in test_knn_cuda_main test_knn_cuda; do echo "$f:"; grep -E "^\[(FAIL|====)|assert" $D/$f.log | tail -6; done
echo "--- timing ($(date -u +%T))"
for s in base1:gpu-base:X=1 pdl1:gpu:X=1 pdl2:gpu:X=1 base2:gpu-base:X=1 off:gpu:SIEVE_CUDA_PDL=0; do
  IFS=: read l b e <<< "$s"
  run 1m_$l $b $e --n 1m --batch 1,16,64,128 --k 10,128,1024
  run 5m_$l $b $e --n 5m --batch 1,16,64,128 --k 10,128
done
for s in base1:gpu-base pdl1:gpu; do
  run 5mB1024_${s%%:*} ${s#*:} X=1 --n 5m --batch 1024 --k 10
done
python3 - $D <<'P'
import json, sys, glob, os
d = sys.argv[1]
# chained launches per shape, from the branch's first run
for f in sorted(glob.glob(os.path.join(d, "t_*pdl1.json"))):
    print(os.path.basename(f), " ".join("%d/%d:%s" % (r["batch"], r["k"], r.get("launches_chained")) for r in map(json.loads, open(f))))
P
echo "--- done ($(date -u +%T))"
tar czf $OUT/call1.tar.gz -C $OUT c1 && rm -rf $D
