# Call 3: the speculative select with its report (branch build in .deps/gpu.tar.xz; main in
# .deps/gpu-base.tar.xz): its GPU test, the GPU suite, then whole-call times in ABBA order
# (main, branch, branch, main), two rounds. Everything lands in $OUT/call3.tar.gz.
D=$OUT/c3; . bench/results/h200-v23-runs/spec_select/common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
echo "--- speculative test ($(date -u +%T))"
timeout 200 .deps/gpu/build/tests/test_knn_cuda --filter 'knn_cuda/speculative*' --verbose=0 > $D/spec_test.log 2>&1
echo "rc $?"; grep -E "FAIL|assert|Synthesis" $D/spec_test.log | head -8
gpu_suite
echo "--- timing ($(date -u +%T))"
A1="--n 1m --batch 1,16,64,128 --k 10,128,1024,8192"
A2="--n 5m --batch 1,16,64,128 --k 10,128"
for r in 1 2; do
  for s in base1:gpu-base spec1:gpu spec2:gpu base2:gpu-base; do
    run r${r}_1m_${s%%:*} ${s#*:} X=1 $A1
    run r${r}_1mpin_${s%%:*} ${s#*:} X=1 $A1 --results pinned
    run r${r}_5m_${s%%:*} ${s#*:} X=1 $A2
  done
done
echo "--- done ($(date -u +%T))"
tar czf $OUT/call3.tar.gz -C $OUT c3 && rm -rf $D
