# Device call 5: lists cut into slices where the grid is small (decode, short prefills; a
# merge kernel combines them) and the column split chosen by the fullest CTA's rows, against
# call 4's build (gpu-base), alternating; the suite, memcheck, racecheck; slices forced at the
# prefill shape (SIEVE_CUDA_SA_SLICES=2, 4).
D=$OUT/c5; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
bash bench/gpu/unpack.sh gpu-base || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build B0=.deps/gpu-base/build
timeout 120 $N/tests/test_sparse_attn_cuda --jobs 4 --verbose=1 > $D/test.txt 2>&1; echo "suite rc $?" | tee -a $D/summary.txt
grep -E "FAIL|ssert|Synthesis" $D/test.txt | head -12 | tee -a $D/summary.txt
SIEVE_CUDA_SA_SLICES=3 timeout 120 $N/tests/test_sparse_attn_cuda --jobs 4 --verbose=1 > $D/test_sl3.txt 2>&1; echo "suite (3 slices forced) rc $?" | tee -a $D/summary.txt
grep -E "FAIL|ssert|Synthesis" $D/test_sl3.txt | head -12 | tee -a $D/summary.txt
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_sparse_attn_cuda --filter 'sparse_attn_cuda/@(tiny_shapes|messy_rows_f16|errors|gqa_overlap_bf16)' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck.txt >> $D/summary.txt
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_sparse_attn_cuda --filter 'sparse_attn_cuda/@(tiny_shapes|messy_rows_f16)' > $D/racecheck.txt 2>&1; echo "racecheck rc $?" | tee -a $D/summary.txt
tail -1 $D/racecheck.txt >> $D/summary.txt
A="attention sparse --device cuda --keys 128k --queries 2048 --k 2048 --group 16 --share 1,0.95,0.9 --check-tokens 2"
Dc="attention sparse --device cuda --keys 128k --queries 1,16,64,256 --k 2048 --group 16 --share 0.95 --check-tokens 2"
for r in b1:$B0 n1:$N n2:$N b2:$B0; do
  IFS=: read l b <<< "$r"
  timeout 60 $b/bench/sieve-bench $A --json $D/ab.json > $D/ab_$l.txt 2>&1
  timeout 60 $b/bench/sieve-bench $Dc --json $D/dec.json > $D/dec_$l.txt 2>&1
  echo "== $l" >> $D/summary.txt; tail -3 $D/ab_$l.txt >> $D/summary.txt; tail -4 $D/dec_$l.txt >> $D/summary.txt
done
for sl in 2 4; do
  SIEVE_CUDA_SA_SLICES=$sl timeout 60 $N/bench/sieve-bench $A --json $D/sl.json > $D/sl_$sl.txt 2>&1
  echo "== slices $sl" >> $D/summary.txt; tail -3 $D/sl_$sl.txt >> $D/summary.txt
done
tar czf $OUT/call5.tar.gz -C $OUT c5
