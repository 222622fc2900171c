# Device call 5: the review's mends and the two kernels' shared parts as helpers (scope,
# queries, positions, mask and maxima, the store; the producer's final wait cp.async.wait_all;
# both kernels' SASS changed by register names only, so they are validated again): the
# three suites (the block-sparse suite with two more 128-key cases and the 64-key rings
# spread as before), prefill and dense 32K on both kernels.
D=$OUT/c5; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build; B=$N/bench/sieve-bench
for t in test_attention_cuda test_block_sparse_cuda test_sparse_attn_cuda; do
  timeout 150 $N/tests/$t -j16 --verbose > $D/$t.txt 2>&1; echo "$t rc $?" | tee -a $D/summary.txt
  grep -E "Synthesis|FAIL|Timeout|Crash|Assert" $D/$t.txt | head -8 >> $D/summary.txt
done
pf() {
  env ${1:+SIEVE_CUDA_WG_RING=$1} timeout 60 $B attention prefill --device cuda --seq 32k,128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_$2.json > $D/prefill_$2.txt 2>&1
  echo "prefill ${1:-default} ($2) rc $?" | tee -a $D/summary.txt; tail -2 $D/prefill_$2.txt >> $D/summary.txt
}
pf "" b1; pf 5x2 a1
for r in "" 5x2; do
  env ${r:+SIEVE_CUDA_WG_RING=$r} timeout 60 $B attention dense --device cuda --seq 32k --repeat 3 --warmup 1 --check-tokens 4 > $D/dense_${r:-default}.txt 2>&1
  echo "dense ${r:-default} rc $?" | tee -a $D/summary.txt; tail -1 $D/dense_${r:-default}.txt >> $D/summary.txt
done
tar czf $OUT/call5.tar.gz -C $OUT c5
