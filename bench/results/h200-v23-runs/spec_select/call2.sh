# Call 2: the speculative select (branch build in .deps/gpu.tar.xz; main in
# .deps/gpu-base.tar.xz): its GPU test and the whole GPU suite (every test with B <= 128 now
# speculates), then whole-call times: main, the branch, the branch with SIEVE_CUDA_SPECULATE=0.
. bench/results/h200-v22-runs/common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
echo "--- speculative test ($(date -u +%T))"
timeout 200 .deps/gpu/build/tests/test_knn_cuda --filter 'knn_cuda/speculative*' --verbose=0 > $OUT/spec_test.log 2>&1
echo "rc $?"; grep -E "FAIL|assert|Synthesis|PASS" $OUT/spec_test.log | head -8
echo "--- timing ($(date -u +%T))"
run() { # label, build dir, env, args
  local l=$1 b=$2 e=$3; shift 3
  env $e LD_LIBRARY_PATH=.deps/$b/lib timeout 100 .deps/$b/build/bench/sieve-bench knn "$@" --repeat 20 --no-materialized --json $OUT/t_$l.json > $OUT/t_$l.log 2>&1
  echo "$l: $(awk '/^[0-9]/{printf "%s/%s %s | ", $3, $4, $5}' $OUT/t_$l.log)"
}
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


