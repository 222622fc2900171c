# Device call 2: the transposed block-score kernel (bs_score_t_kernel: pooled keys as wgmma's
# A operand, 128 query rows as B, a key's (max, sum) in the thread; two CTAs an SM) as the
# default on compute capability 9.0 with D = 128, against the wgmma kernel before
# (SIEVE_CUDA_BSP_SCORE=wgs, kept for this A/B), both with call 1's pooling. The block-sparse
# suite, the 128K/32K prefill old/new/new/old, Nsight Compute on the new kernel, memcheck.
D=$OUT/c2; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build; B=$N/bench/sieve-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $D/gpu.txt
timeout 150 $N/tests/test_block_sparse_cuda -j16 --verbose > $D/test_block_sparse_cuda.txt 2>&1; echo "test_block_sparse_cuda rc $?" | tee -a $D/summary.txt
grep -E "Synthesis|FAIL|Assert" $D/test_block_sparse_cuda.txt | head -8 >> $D/summary.txt
ab() { # env-value tag
  SIEVE_CUDA_BSP_SCORE=$1 timeout 60 $B attention prefill --device cuda --seq 32k,128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_$2.json > $D/prefill_$2.txt 2>&1
  echo "prefill $2 rc $?:" | tee -a $D/summary.txt; tail -2 $D/prefill_$2.txt >> $D/summary.txt
}
ab wgs old1; ab default new1; ab default new2; ab wgs old2
head -3 $D/prefill_new1.txt > $D/prefill_header.txt
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout 100 $NCU --metrics gpu__time_duration.sum,sm__throughput.avg.pct_of_peak_sustained_elapsed,dram__throughput.avg.pct_of_peak_sustained_elapsed --kernel-name regex:bs_ --launch-count 3 $B attention prefill --device cuda --seq 128k --repeat 1 --warmup 0 > $D/ncu_dur.txt 2>&1; echo "ncu durations rc $?" | tee -a $D/summary.txt
grep -E "bs_|duration" $D/ncu_dur.txt | grep -v PROF >> $D/summary.txt
SIEVE_CUDA_BSP_SCORE=wgs timeout 100 $NCU --metrics gpu__time_duration.sum --kernel-name regex:bs_score --launch-count 1 $B attention prefill --device cuda --seq 128k --repeat 1 --warmup 0 > $D/ncu_dur_old.txt 2>&1; echo "ncu old rc $?" | tee -a $D/summary.txt
grep -E "bs_|duration" $D/ncu_dur_old.txt | grep -v PROF >> $D/summary.txt
timeout 150 $NCU --section SpeedOfLight --section ComputeWorkloadAnalysis --section WarpStateStats --section MemoryWorkloadAnalysis --section Occupancy --section InstructionStats --section SchedulerStats --kernel-name regex:bs_score_t --launch-count 1 $B attention prefill --device cuda --seq 128k --repeat 1 --warmup 0 > $D/ncu_score_t.txt 2>&1; echo "ncu score_t rc $?" | tee -a $D/summary.txt
left=$((560 - SECONDS)); [ $left -gt 10 ] && { timeout $left compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/wgmma_kernel_[058]' > $D/memcheck_bsp.txt 2>&1; echo "memcheck bsp rc $? (limit $left)" | tee -a $D/summary.txt; tail -2 $D/memcheck_bsp.txt >> $D/summary.txt; }
tar czf $OUT/call2.tar.gz -C $OUT c2
