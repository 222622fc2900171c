# Device call 2: why the 128-key kernel is slower (Nsight Compute on dense 8K and block-sparse
# 32K, both kernels), and the sanitizer runs the last stop could not make on the unchanged
# kernels: racecheck of forced-wgmma block-sparse case 10 (both block-score warpgroups refill
# their chunk buffers), memcheck of case 9.
D=$OUT/c2; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build; B=$N/bench/sieve-bench
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
M=gpu__time_duration.sum,sm__inst_executed.sum,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__issue_active.avg.pct_of_peak_sustained_active,smsp__average_warp_latency_issue_stalled_barrier.ratio,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio,smsp__average_warp_latency_issue_stalled_wait.ratio,smsp__average_warp_latency_issue_stalled_math_pipe_throttle.ratio,smsp__average_warp_latency_issue_stalled_membar.ratio,smsp__average_warp_latency_issue_stalled_sleeping.ratio,smsp__average_warp_latency_issue_stalled_short_scoreboard.ratio,smsp__average_warp_latency_issue_stalled_mio_throttle.ratio,smsp__average_warp_latency_issue_stalled_no_instruction.ratio,smsp__average_warp_latency_issue_stalled_dispatch_stall.ratio,smsp__average_warp_latency_issue_stalled_lg_throttle.ratio,smsp__average_warp_latency_issue_stalled_selected.ratio,smsp__warps_active.avg.per_cycle_active,lts__t_bytes.sum,dram__bytes_read.sum
for r in 5x2 k3v3; do
  SIEVE_CUDA_WG_RING=$r timeout 90 $NCU --metrics $M --kernel-name regex:sa_wg --launch-count 1 $B attention dense --device cuda --seq 32k --repeat 1 --warmup 0 > $D/ncu_dense_$r.txt 2>&1; echo "ncu dense $r rc $?" | tee -a $D/summary.txt
  SIEVE_CUDA_WG_RING=$r timeout 90 $NCU --metrics $M --kernel-name regex:sa_wg --launch-count 1 $B attention prefill --device cuda --seq 128k --repeat 1 --warmup 0 > $D/ncu_bsp_$r.txt 2>&1; echo "ncu bsp $r rc $?" | tee -a $D/summary.txt
done
left=$((330 - SECONDS)); [ $left -gt 20 ] && { timeout $left compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/wgmma_kernel_10' > $D/racecheck_case10.txt 2>&1; echo "racecheck case 10 rc $? (limit $left)" | tee -a $D/summary.txt; tail -3 $D/racecheck_case10.txt >> $D/summary.txt; }
left=$((570 - SECONDS)); [ $left -gt 20 ] && { timeout $left compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/wgmma_kernel_9' > $D/memcheck_case9.txt 2>&1; echo "memcheck case 9 rc $? (limit $left)" | tee -a $D/summary.txt; tail -3 $D/memcheck_case9.txt >> $D/summary.txt; }
tar czf $OUT/call2.tar.gz -C $OUT c2
