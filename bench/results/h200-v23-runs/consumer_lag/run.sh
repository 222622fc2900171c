# Call 1: the lagged second consumer warpgroup (branch next/consumer-lag in .deps/gpu.tar.xz,
# main in .deps/gpu-base.tar.xz): its GPU test, then whole-call times at lags 0-3.
. bench/results/h200-v22-runs/common.sh
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv,noheader
echo "--- lagged test"
timeout 150 .deps/gpu/build/tests/test_knn_cuda --filter '*/lagged*' --verbose=0 2>&1 | tail -4
ARGS="--n 5m --batch 64,128,1024 --k 128,8192 --results pinned --repeat 10 --no-materialized"
for r in 1 2; do
  for side in base 0 1 2 3; do
    if [ $side = base ]; then
      LD_LIBRARY_PATH=.deps/gpu-base/lib timeout 120 .deps/gpu-base/build/bench/sieve-bench knn $ARGS > $OUT/r${r}_$side.log 2>&1
    else
      SIEVE_CUDA_LAG=$side timeout 120 $SB knn $ARGS > $OUT/r${r}_lag$side.log 2>&1
      side=lag$side
    fi
    echo "r$r $side: $(awk '/^[0-9]/{printf "B%s k%s %s | ", $3, $4, $5}' $OUT/r${r}_$side.log)"
  done
done
