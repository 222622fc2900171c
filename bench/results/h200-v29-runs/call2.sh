# Call 2: why tma128x256p is slower: Nsight Compute's throughput, pipe, memory and warp-state
# sections of the gate scan, tma128x256h against tma128x256p (5M, B = 1024, k = 128, pinned).
D=$OUT/c2; . bench/results/h200-v29-runs/common.sh
for v in h p; do
  echo "--- $v ($(date -u +%T))"
  SIEVE_CUDA_SCAN=tma128x256$v timeout 200 $NCU --clock-control none -k regex:scan_tma --launch-skip 1 \
    --launch-count 1 --section SpeedOfLight --section ComputeWorkloadAnalysis \
    --section MemoryWorkloadAnalysis --section MemoryWorkloadAnalysis_Tables \
    --section WarpStateStats --section SchedulerStats --section InstructionStats \
    $SB knn --n 5m --batch 1024 --k 128 --results pinned --repeat 1 --warmup 1 --no-materialized \
    > $D/sections_$v.txt 2> $D/sections_$v.err
  echo "rc $?"; grep -E "Duration|Throughput|Shared|Pipe|Tensor|Issue Slots|Eligible|No Eligible" $D/sections_$v.txt | head -40
done
tar czf $OUT/call2.tar.gz -C $OUT c2 && rm -rf $D
echo "--- done ($(date -u +%T))"
