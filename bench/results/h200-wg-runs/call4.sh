# Device call 4: the wgmma kernel with fewer instructions a tile (Nsight Compute, call 3: the
# integer pipe the busiest, 42%, 0.42 issued warps a scheduler): tiles every row sees whole
# skip the mask, the mask on 32-bit limits, the first wgmma zeroes S, O's rescale skipped
# where a warp's maxima held, a ring of 4 (power of two), the block's tile index by shift.
# Timings (mma against the default choice, alternating), the GPU suites, memcheck.
D=$OUT/c4; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
for k in mma auto mma auto; do
  SIEVE_CUDA_ATTN_KERNEL=$k timeout 60 $N/bench/sieve-bench attention prefill --device cuda --seq 128k --block 128 --sink 2 --window 4 --repeat 3 --warmup 1 --check-tokens 4 --json $D/prefill_$k.json >> $D/prefill_$k.txt 2>&1; echo "prefill $k rc $?" | tee -a $D/summary.txt
  tail -1 $D/prefill_$k.txt >> $D/summary.txt
done
for k in mma auto; do
  SIEVE_CUDA_ATTN_KERNEL=$k timeout 60 $N/bench/sieve-bench attention dense --device cuda --seq 8k,32k,128k --repeat 3 --warmup 1 --check-tokens 4 --json $D/dense_$k.json > $D/dense_$k.txt 2>&1; echo "dense $k rc $?" | tee -a $D/summary.txt
  tail -3 $D/dense_$k.txt >> $D/summary.txt
done
for t in test_attention_cuda test_block_sparse_cuda; do
  timeout 200 $N/tests/$t -j8 --verbose > $D/$t.txt 2>&1; echo "$t rc $?" | tee -a $D/summary.txt
  grep -E "Synthesis|FAIL|Timeout|Crash" $D/$t.txt | head -8 >> $D/summary.txt
done
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/wgmma_kernel' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -2 $D/memcheck.txt >> $D/summary.txt
tar czf $OUT/call4.tar.gz -C $OUT c4
