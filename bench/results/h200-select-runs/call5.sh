# Device call 5: the block-score kernel with the tile's queries resident (bs_score_q_kernel:
# 512 rows in shared memory, each chunk of pooled keys read once and scored against the four
# passes, the next pass's wgmma during this pass's reduction; one CTA an SM) as the default,
# against call 3's kernel (SIEVE_CUDA_BSP_SCORE=t) and the wgmma kernel before (=wgs). The
# block-sparse suite, the 128K / 32K prefill wgs/t/q/q/t/wgs, Nsight Compute durations and
# stalls of the new kernel, memcheck.
D=$OUT/c5; mkdir -p $D
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
ab wgs wgs1; ab t t1; ab default q1; ab default q2; ab t t2; ab wgs wgs2
head -3 $D/prefill_q1.txt > $D/prefill_header.txt
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout 100 $NCU --metrics gpu__time_duration.sum --kernel-name regex:bs_ --launch-count 3 $B attention prefill --device cuda --seq 128k --repeat 1 --warmup 0 > $D/ncu_dur.txt 2>&1; echo "ncu durations rc $?" | tee -a $D/summary.txt
grep -E "bs_|duration" $D/ncu_dur.txt | grep -v PROF | sed 's/(const T1.*//' >> $D/summary.txt
timeout 150 $NCU --section SpeedOfLight --section WarpStateStats --section InstructionStats --metrics regex:smsp__warp_issue_stalled_.*_per_warp_active\.pct,sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active,sm__inst_executed_pipe_xu.avg.pct_of_peak_sustained_active --kernel-name regex:bs_score_q --launch-count 1 $B attention prefill --device cuda --seq 128k --repeat 1 --warmup 0 > $D/ncu_score_q.txt 2>&1; echo "ncu score_q rc $?" | tee -a $D/summary.txt
grep -E "Duration|Issue Slots|Issued Instructions|tensor_cycles|pipe_xu|stalled_(barrier|wait|long|short|math|mio|dispatch|selected|not_sel|gmma|no_inst)" $D/ncu_score_q.txt >> $D/summary.txt
left=$((560 - SECONDS)); [ $left -gt 10 ] && { timeout $left compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/wgmma_kernel_[1358]' > $D/memcheck_bsp.txt 2>&1; echo "memcheck bsp rc $? (limit $left)" | tee -a $D/summary.txt; tail -2 $D/memcheck_bsp.txt >> $D/summary.txt; }
tar czf $OUT/call5.tar.gz -C $OUT c5
