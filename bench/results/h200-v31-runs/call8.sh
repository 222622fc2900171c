# Call 8: where the 1M scan's extra time goes (call 7: at B = 64 the 1M gate scan runs at
# 3.66 TB/s against 4.41 at 5M, with the same bytes, L2 traffic and instructions per row).
# Nsight Compute full set with source counters of one gate scan (the third call's) at 1M
# and 5M rows, B = 64, k = 128: the details page as text and the per-SASS-line samples,
# gzipped; the build of call 1.
D=$OUT/c8; . bench/results/h200-v31-runs/common.sh
echo "--- ncu ($(date -u +%T))"
for n in 1m 5m; do
  r=$D/stalls_${n}_B64
  timeout 240 $NCU --set full --import-source yes --kernel-name regex:"scan_tma" \
    --launch-skip 2 --launch-count 1 --clock-control none -f -o $r \
    $SB knn --n $n --batch 64 --k 128 --repeat 3 --warmup 1 --no-materialized > ${r}_run.log 2>&1
  echo "$n rc $?"
  $NCU -i $r.ncu-rep --page details > $r.txt 2>&1
  $NCU -i $r.ncu-rep --page source --csv --print-source sass > ${r}_sass.csv 2>&1
  gzip -9 ${r}_sass.csv
  grep -iE "^ +(Duration|Elapsed Cycles|SM Frequency|DRAM Throughput|Memory Throughput|Warp Cycles Per Issued|Issue Slots Busy|No Eligible|Active Warps Per)" $r.txt | head -12
  rm -f $r.ncu-rep
done
echo "--- done ($(date -u +%T))"
tar czf $OUT/call8.tar.gz -C $OUT c8 && rm -rf $D
