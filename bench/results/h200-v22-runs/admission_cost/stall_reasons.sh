#!/usr/bin/env bash
# device call 10 (experiment build): stall reasons of the B=1024 k=128 gate scan, normal vs SIEVE_EXP=3/4
. "$(dirname "$0")/../common.sh"
M="regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,gpu__time_duration.sum,sm__cycles_elapsed.avg.per_second,dram__throughput.avg.pct_of_peak_sustained_elapsed"
for x in 0 3 4; do
  SIEVE_EXP=$x timeout 150 "$NCU" --metrics "$M" --kernel-name regex:"scan_tma" --launch-skip 2 --launch-count 1 --clock-control none \
    $SB knn --n 5m --dtype float16 --batch 1024 --k 128 --repeat 3 --warmup 1 --no-materialized --results pinned > "$OUT/s_$x.txt" 2>&1
  echo "--- exp $x"; grep -E "\.ratio|pct|\.sum|per_second" "$OUT/s_$x.txt" | awk '$NF+0 > 0.02' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | awk '{print $1, $(NF)}' | tr '\n' ';'; echo
done
echo "=== end $(date -u +%T)"
