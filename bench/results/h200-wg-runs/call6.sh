# Device call 6: the final kernels (call 5's but for P V at iteration 0 reading tile 0's
# values instead of a zeroed slot that the other warpgroup could refill meanwhile). The
# dense, block-sparse and grouped sparse suites, memcheck of the forced-wgmma dense cases
# and of alpha 0 = dense, and the default block-sparse prefill and dense at 128K.
D=$OUT/c6; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
for t in test_attention_cuda test_block_sparse_cuda test_sparse_attn_cuda; do
  timeout 150 $N/tests/$t -j8 --verbose > $D/$t.txt 2>&1; echo "$t rc $?" | tee -a $D/summary.txt
  grep -E "Synthesis|FAIL|Timeout|Crash" $D/$t.txt | head -8 >> $D/summary.txt
done
timeout 110 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_attention_cuda --filter 'attention_cuda/wgmma_kernel' > $D/memcheck_dense.txt 2>&1; echo "memcheck dense rc $?" | tee -a $D/summary.txt
tail -2 $D/memcheck_dense.txt >> $D/summary.txt
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/alpha0_equals_dense' > $D/memcheck_bsp.txt 2>&1; echo "memcheck bsp rc $?" | tee -a $D/summary.txt
tail -2 $D/memcheck_bsp.txt >> $D/summary.txt
timeout 50 $N/bench/sieve-bench attention prefill --device cuda --seq 128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill.json > $D/prefill.txt 2>&1; echo "prefill rc $?" | tee -a $D/summary.txt
tail -1 $D/prefill.txt >> $D/summary.txt
timeout 40 $N/bench/sieve-bench attention dense --device cuda --seq 32k,128k --repeat 3 --warmup 1 --check-tokens 4 --json $D/dense.json > $D/dense.txt 2>&1; echo "dense rc $?" | tee -a $D/summary.txt
tail -2 $D/dense.txt >> $D/summary.txt
tar czf $OUT/call6.tar.gz -C $OUT c6
