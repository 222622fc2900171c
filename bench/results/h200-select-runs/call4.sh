# Device call 4: where the transposed block-score kernel (call 3's form) stalls: Nsight
# Compute's per-warp stall reasons and pipe utilisation at 128K, and the SASS-level
# source counters (sampled stalls per instruction).
D=$OUT/c4; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build; B=$N/bench/sieve-bench
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout 200 $NCU --metrics regex:smsp__average_warp_latency_issue_stalled_.*\.ratio,regex:smsp__warp_issue_stalled_.*_per_warp_active\.pct,regex:sm__pipe_.*_cycles_active\.avg\.pct_of_peak_sustained_active,regex:sm__inst_executed_pipe_.*\.avg\.pct_of_peak_sustained_active,lts__t_sector_hit_rate.pct,l1tex__t_bytes_pipe_lsu_mem_global_op_ldgsts.sum --kernel-name regex:bs_score_t --launch-count 1 $B attention prefill --device cuda --seq 128k --repeat 1 --warmup 0 > $D/ncu_stalls.txt 2>&1; echo "ncu stalls rc $?" | tee -a $D/summary.txt
timeout 200 $NCU --section SourceCounters --section WarpStateStats --kernel-name regex:bs_score_t --launch-count 1 -o $D/src $B attention prefill --device cuda --seq 128k --repeat 1 --warmup 0 > $D/ncu_src.txt 2>&1; echo "ncu src rc $?" | tee -a $D/summary.txt
[ -f $D/src.ncu-rep ] && $NCU --import $D/src.ncu-rep --page source --csv --print-source sass > $D/src_sass.csv 2>&1
[ -f $D/src.ncu-rep ] && $NCU --import $D/src.ncu-rep --page details > $D/src_details.txt 2>&1
rm -f $D/src.ncu-rep
tar czf $OUT/call4.tar.gz -C $OUT c4
