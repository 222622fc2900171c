# Device call 4: 128-row CTAs (two m16 row blocks a warp, Q in shared memory, each key and
# value fragment feeding both) for dense causal and block-sparse attention: the three GPU
# suites (with 128- against 64-row CTAs bit for bit), memcheck and racecheck of the new
# variant, then A/B timings (default against SIEVE_CUDA_SA_ROWS=64) of dense 8K-128K and the
# 128K prefill, alternating.
D=$OUT/c4; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
for t in test_block_sparse_cuda test_attention_cuda test_sparse_attn_cuda; do
  timeout 150 $N/tests/$t --jobs 4 --verbose=1 > $D/$t.txt 2>&1; echo "$t rc $?" | tee -a $D/summary.txt
  grep -E "FAIL|ssert|Synthesis" $D/$t.txt | head -8 | tee -a $D/summary.txt
done
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_attention_cuda --filter 'attention_cuda/@(prefill_gqa_bf16|many_heads_f16|chunk_f16)' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck.txt >> $D/summary.txt
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/prefill_gqa_bf16' > $D/racecheck.txt 2>&1; echo "racecheck rc $?" | tee -a $D/summary.txt
tail -1 $D/racecheck.txt >> $D/summary.txt
for round in 1 2; do
  for v in rows128 rows64; do
    E=""; [ $v = rows64 ] && E="SIEVE_CUDA_SA_ROWS=64"
    env $E timeout 100 $N/bench/sieve-bench attention dense --device cuda --seq 8k,32k,128k --repeat 3 --warmup 1 --check-tokens 2 --json $D/dense_${v}_$round.json > $D/dense_${v}_$round.txt 2>&1
    echo "dense $v round $round rc $?" | tee -a $D/summary.txt; tail -3 $D/dense_${v}_$round.txt | tee -a $D/summary.txt
    env $E timeout 100 $N/bench/sieve-bench attention prefill --device cuda --seq 128k --repeat 3 --warmup 1 --check-tokens 2 --json $D/prefill_${v}_$round.json > $D/prefill_${v}_$round.txt 2>&1
    echo "prefill $v round $round rc $?" | tee -a $D/summary.txt; tail -1 $D/prefill_${v}_$round.txt | tee -a $D/summary.txt
  done
done
tar czf $OUT/call4.tar.gz -C $OUT c4
