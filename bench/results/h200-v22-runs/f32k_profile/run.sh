#!/usr/bin/env bash
# call 3: why the 8x16 float32 tile loses: stall reasons, issue, shared wavefronts (base, k1, k3, k4 at B=64)
. "$(dirname "$0")/../common.sh"
M="regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio,smsp__issue_active.avg.pct_of_peak_sustained_active,sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_fma.sum,smsp__inst_executed.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,gpu__time_duration.sum,sm__warps_active.avg.pct_of_peak_sustained_active,smsp__inst_executed_op_shared_ld.sum"
for v in base k1 k3 k4; do
  env $( [ $v = base ] || echo SIEVE_CUDA_SCAN=$v ) timeout 200 "$NCU" --metrics "$M" --kernel-name regex:"scan_f32" --launch-skip 5 --launch-count 1 --clock-control none \
    $SB knn --n 5m --dtype float32 --batch 64 --k 128 --repeat 3 --warmup 1 --no-materialized > "$OUT/m_$v.txt" 2>&1
  echo "--- $v"; grep -E "scan_f32|\.ratio|pct|\.sum" "$OUT/m_$v.txt" | awk '$NF+0 > 0.05 || /scan_f32/' | sed 's/smsp__average_warps_issue_stalled_//; s/_per_issue_active.ratio//' | awk '{print $1, $(NF)}' | tr '\n' ';'; echo
done
echo "=== end $(date -u +%T)"
