# Call 1: where whole calls spend device time now (kernel v24, host copy threads): each
# kernel's duration (Nsight Compute, clocks left alone) in one sieve_knn call per shape
# (5M, pinned results); then the full Nsight Compute set with source counters of the
# float32 gate scan at B = 64 and 128 and of the float16 gate scan at B = 1024 (k = 128).
D=$OUT/c1; . bench/results/h200-v28-runs/common.sh
echo "--- kernel durations ($(date -u +%T))"
for b in 1024 128 64; do
  for k in 10 128 1024 8192; do
    kdur f16_b${b}_k$k X=1 --n 5m --batch $b --k $k --results pinned
  done
done
for b in 64 128; do kdur f32_b${b}_k128 X=1 --n 5m --dtype float32 --batch $b --k 128 --results pinned; done
echo "--- stalls ($(date -u +%T))"
OUT=$D STALL_DTYPE=float32 STALL_BATCHES="64 128" timeout 200 bench/gpu/run.sh stalls 2>&1 | tail -24
OUT=$D STALL_BATCHES="1024" timeout 120 bench/gpu/run.sh stalls 2>&1 | tail -12
rm -f $D/*.ncu-rep
tar czf $OUT/call1.tar.gz -C $OUT c1 && rm -rf $D
echo "--- done ($(date -u +%T))"
