# Call 2: the speculative select (branch build in .deps/gpu.tar.xz; main in
# .deps/gpu-base.tar.xz): its GPU test, then whole-call times, two rounds: main, the branch,
# the branch with SIEVE_CUDA_SPECULATE=0.
D=$OUT; . bench/results/h200-v23-runs/spec_select/common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
echo "--- speculative test ($(date -u +%T))"
timeout 200 .deps/gpu/build/tests/test_knn_cuda --filter 'knn_cuda/speculative*' --verbose=0 > $OUT/spec_test.log 2>&1
echo "rc $?"; grep -E "FAIL|assert|Synthesis|PASS" $OUT/spec_test.log | head -8
echo "--- timing ($(date -u +%T))"
A1="--n 1m --batch 1,16,64,128 --k 10,128,1024,8192"
A2="--n 5m --batch 1,64 --k 10,128"
for r in 1 2; do
  run r${r}_1m_base gpu-base X=1 $A1
  run r${r}_1m_spec gpu X=1 $A1
  run r${r}_1m_nospec gpu SIEVE_CUDA_SPECULATE=0 $A1
  run r${r}_1m_pin_base gpu-base X=1 $A1 --results pinned
  run r${r}_1m_pin_spec gpu X=1 $A1 --results pinned
  run r${r}_5m_base gpu-base X=1 $A2
  run r${r}_5m_spec gpu X=1 $A2
done


