# Device call 6: the queries loaded after the first tiles' copies are issued (the two
# latencies overlap; before, each thread waited for its queries before issuing copies) and
# negated only for a negative scale; the review's edits (the maxima's -inf select dropped,
# negative-scale cases added). A/B against call 5's build (bundle gpu-old) at 128K prefill
# and dense 32K, old/new/new/old; torch flash and cuDNN; the final prefill and dense; the
# three suites; memcheck of the forced-wgmma dense tests and of two block-sparse forced cases.
D=$OUT/c6; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
bash bench/gpu/unpack.sh gpu-old || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $D/gpu.txt
ab() { # bundle tag
  timeout 40 .deps/$1/build/bench/sieve-bench attention prefill --device cuda --seq 128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_$2.json > $D/prefill_$2.txt 2>&1
  echo "prefill $2 rc $?: $(tail -1 $D/prefill_$2.txt)" | tee -a $D/summary.txt
  timeout 30 .deps/$1/build/bench/sieve-bench attention dense --device cuda --seq 32k --repeat 3 --warmup 1 --check-tokens 4 --json $D/dense_$2.json > $D/dense_$2.txt 2>&1
  echo "dense $2 rc $?: $(tail -1 $D/dense_$2.txt)" | tee -a $D/summary.txt
}
ab gpu-old old1; ab gpu new1; ab gpu new2; ab gpu-old old2
N=.deps/gpu/build; B=$N/bench/sieve-bench
timeout 60 python3 bench/torch_attention.py dense --seq 8k,32k,128k --backends flash,cudnn --repeat 3 --warmup 1 --json $D/torch.json > $D/torch.txt 2>&1; echo "torch rc $?" | tee -a $D/summary.txt
grep -v '^{' $D/torch.txt >> $D/summary.txt
timeout 40 $B attention prefill --device cuda --seq 32k,128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_final.json > $D/prefill_final.txt 2>&1; echo "prefill 32k,128k rc $?" | tee -a $D/summary.txt
tail -2 $D/prefill_final.txt >> $D/summary.txt
timeout 60 $B attention dense --device cuda --seq 8k,32k,128k --repeat 3 --warmup 1 --check-tokens 4 --json $D/dense_final.json > $D/dense_final.txt 2>&1; echo "dense 8k-128k rc $?" | tee -a $D/summary.txt
tail -3 $D/dense_final.txt >> $D/summary.txt
head -3 $D/prefill_new1.txt > $D/prefill_header.txt
for t in test_attention_cuda test_block_sparse_cuda test_sparse_attn_cuda; do
  left=$((500 - SECONDS)); [ $left -gt 150 ] && left=150; [ $left -lt 10 ] && break
  timeout $left $N/tests/$t -j16 --verbose > $D/$t.txt 2>&1; echo "$t rc $? (limit $left s)" | tee -a $D/summary.txt
  grep -E "Synthesis|FAIL|Timeout|Crash|Assert" $D/$t.txt | head -8 >> $D/summary.txt
done
left=$((540 - SECONDS)); [ $left -gt 10 ] && { timeout $left compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_attention_cuda --filter 'attention_cuda/wgmma_*' > $D/memcheck_dense.txt 2>&1; echo "memcheck dense rc $? (limit $left)" | tee -a $D/summary.txt; tail -2 $D/memcheck_dense.txt >> $D/summary.txt; }
left=$((560 - SECONDS)); [ $left -gt 10 ] && { timeout $left compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/wgmma_kernel_[58]' > $D/memcheck_bsp.txt 2>&1; echo "memcheck bsp rc $? (limit $left)" | tee -a $D/summary.txt; tail -2 $D/memcheck_bsp.txt >> $D/summary.txt; }
tar czf $OUT/call6.tar.gz -C $OUT c6
