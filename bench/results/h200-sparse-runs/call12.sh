# Device call 12: the union kernel visits only the windows between a group's least and
# largest position; idx, out and lse must be 4-byte aligned (SIEVE_EINVAL): the two GPU
# suites (a case with positions only in the last windows and groups of padding only),
# memcheck, racecheck, the grouped target shape and decode.
D=$OUT/c12; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
for t in test_sparse_attn_cuda test_attention_cuda; do
  timeout 120 $N/tests/$t --jobs 4 --verbose=1 > $D/$t.txt 2>&1; echo "$t rc $?" | tee -a $D/summary.txt
  grep -E "FAIL|ssert|Synthesis" $D/$t.txt | head -6 | tee -a $D/summary.txt
done
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_sparse_attn_cuda --filter 'sparse_attn_cuda/@(two_windows_bf16|errors|messy_rows_f16)' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck.txt >> $D/summary.txt
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_sparse_attn_cuda --filter 'sparse_attn_cuda/messy_rows_f16' > $D/racecheck.txt 2>&1; echo "racecheck rc $?" | tee -a $D/summary.txt
tail -1 $D/racecheck.txt >> $D/summary.txt
timeout 60 $N/bench/sieve-bench attention sparse --device cuda --keys 128k --queries 1,64,2048 --k 2048 --group 16 --share 0.95 --check-tokens 2 > $D/sparse.txt 2>&1; echo "sparse rc $?" >> $D/summary.txt; tail -3 $D/sparse.txt >> $D/summary.txt
tar czf $OUT/call12.tar.gz -C $OUT c12
