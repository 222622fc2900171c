# Call 3: where the gate scan's time goes at large k on the memory-bound batches: Nsight
# Compute's full set with source counters of the gate scan at 5M rows, k = 128 and 8192,
# B = 64 (tma64x256s, the default) and B = 128 (tma128x256h, main's default).
D=$OUT/c3; . bench/results/h200-v29-runs/common.sh
for k in 128 8192; do
  echo "--- B=64 k=$k ($(date -u +%T))"
  OUT=$D STALL_BATCHES=64 STALL_K=$k timeout 150 bench/gpu/run.sh stalls 2>&1 | tail -12
  echo "--- B=128 k=$k ($(date -u +%T))"
  SIEVE_CUDA_SCAN=tma128x256h OUT=$D STALL_BATCHES=128 STALL_K=$k timeout 150 bench/gpu/run.sh stalls 2>&1 | tail -12
done
for f in $D/*_sass.csv; do python3 bench/results/h200-v28-runs/stalls_summary.py $f > ${f%.csv}_top.txt 2>&1; done
rm -f $D/*.ncu-rep $D/*_sass.csv
tar czf $OUT/call3.tar.gz -C $OUT c3 && rm -rf $D
echo "--- done ($(date -u +%T))"
