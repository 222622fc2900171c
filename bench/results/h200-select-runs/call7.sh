# Device call 7: the final form (the pooling kernel of call 1, the transposed block-score
# kernel as bs_score_wg_kernel, the kernels of calls 2-6's A/Bs removed). The three attention
# suites, the prefill at 32K and 128K twice, torch flash and cuDNN dense at 8K-128K in the
# same call, the dense causal kernel (unchanged) at 8K-128K, memcheck of the block-sparse
# forced-wgmma cases and of the mma.sync path.
D=$OUT/c7; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build; B=$N/bench/sieve-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $D/gpu.txt
for t in test_block_sparse_cuda test_attention_cuda test_sparse_attn_cuda; do
  timeout 150 $N/tests/$t -j16 --verbose > $D/$t.txt 2>&1; echo "$t rc $?" | tee -a $D/summary.txt
  grep -E "Synthesis|FAIL|Timeout|Crash|Assert" $D/$t.txt | head -8 >> $D/summary.txt
done
timeout 60 $B attention prefill --device cuda --seq 32k,128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_1.json > $D/prefill_1.txt 2>&1; echo "prefill 1 rc $?" | tee -a $D/summary.txt
tail -2 $D/prefill_1.txt >> $D/summary.txt
timeout 60 python3 bench/torch_attention.py dense --seq 8k,32k,128k --backends flash,cudnn --repeat 3 --warmup 1 --json $D/torch.json > $D/torch.txt 2>&1; echo "torch rc $?" | tee -a $D/summary.txt
grep -v '^{' $D/torch.txt >> $D/summary.txt
timeout 60 $B attention prefill --device cuda --seq 32k,128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_2.json > $D/prefill_2.txt 2>&1; echo "prefill 2 rc $?" | tee -a $D/summary.txt
tail -2 $D/prefill_2.txt >> $D/summary.txt
head -3 $D/prefill_1.txt > $D/prefill_header.txt
timeout 60 $B attention dense --device cuda --seq 8k,32k,128k --repeat 3 --warmup 1 --check-tokens 4 --json $D/dense.json > $D/dense.txt 2>&1; echo "dense rc $?" | tee -a $D/summary.txt
tail -3 $D/dense.txt >> $D/summary.txt
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu 2>/dev/null | head -1)
timeout 100 $NCU --metrics gpu__time_duration.sum --kernel-name regex:bs_ --launch-count 3 $B attention prefill --device cuda --seq 128k --repeat 1 --warmup 0 > $D/ncu_dur.txt 2>&1; echo "ncu durations rc $?" | tee -a $D/summary.txt
grep -E "bs_|duration" $D/ncu_dur.txt | grep -v PROF | sed 's/(const T1.*//; s/(<unnamed>.*//' >> $D/summary.txt
left=$((540 - SECONDS)); [ $left -gt 10 ] && { timeout $left compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/wgmma_kernel_[1358]' > $D/memcheck_bsp.txt 2>&1; echo "memcheck bsp rc $? (limit $left)" | tee -a $D/summary.txt; tail -2 $D/memcheck_bsp.txt >> $D/summary.txt; }
left=$((580 - SECONDS)); [ $left -gt 10 ] && { timeout $left compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/three_stage_ring' > $D/memcheck_mma.txt 2>&1; echo "memcheck mma rc $? (limit $left)" | tee -a $D/summary.txt; tail -2 $D/memcheck_mma.txt >> $D/summary.txt; }
tar czf $OUT/call7.tar.gz -C $OUT c7
