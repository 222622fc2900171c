# Device call 10: a review's mends (row chunks past a short group exit at once, query heads
# a kv head at most 4,096, the CPU's stats untouched on error) and the suites' new cases
# (explicit and negative scales, few keys a token, 128 heads a kv head in groups of 2, fewer
# tokens than a group, out without lse, nothing written on errors): the suites, memcheck,
# racecheck, the grouped target shape and decode, dense at 8K / 32K.
D=$OUT/c10; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
for t in test_sparse_attn_cuda test_attention_cuda test_kernels_sparse_attn_cpu test_kernels_attention_cpu; do
  timeout 150 $N/tests/$t --jobs 4 --verbose=1 > $D/$t.txt 2>&1; echo "$t rc $?" | tee -a $D/summary.txt
  grep -E "FAIL|ssert|Synthesis" $D/$t.txt | head -6 | tee -a $D/summary.txt
done
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_sparse_attn_cuda --filter 'sparse_attn_cuda/@(many_heads_short_groups_f16|value_path_small_sets_bf16|errors)' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck.txt >> $D/summary.txt
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_sparse_attn_cuda --filter 'sparse_attn_cuda/many_heads_short_groups_f16' > $D/racecheck.txt 2>&1; echo "racecheck rc $?" | tee -a $D/summary.txt
tail -1 $D/racecheck.txt >> $D/summary.txt
timeout 60 $N/bench/sieve-bench attention sparse --device cuda --keys 128k --queries 1,16,64,2048 --k 2048 --group 16 --share 0.95 --check-tokens 2 > $D/sparse.txt 2>&1; echo "sparse rc $?" >> $D/summary.txt; tail -4 $D/sparse.txt >> $D/summary.txt
timeout 60 $N/bench/sieve-bench attention dense --device cuda --seq 8k,32k --check-tokens 2 > $D/dense.txt 2>&1; echo "dense rc $?" >> $D/summary.txt; tail -2 $D/dense.txt >> $D/summary.txt
tar czf $OUT/call10.tar.gz -C $OUT c10
