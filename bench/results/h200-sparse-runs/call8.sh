# Device call 8: the causal mode's tiles that every row of a CTA sees whole skip the mask;
# against call 7's build (gpu-base), alternating; the dense suite (its error test mended)
# and the grouped suite, memcheck; the ring at 3 stages for the dense kernel
# (SIEVE_CUDA_SA_STAGES=3); the grouped target shape.
D=$OUT/c8; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
bash bench/gpu/unpack.sh gpu-base || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build B0=.deps/gpu-base/build
timeout 150 $N/tests/test_attention_cuda --jobs 4 --verbose=1 > $D/test_dense.txt 2>&1; echo "dense suite rc $?" | tee -a $D/summary.txt
grep -E "FAIL|ssert|Synthesis" $D/test_dense.txt | head -12 | tee -a $D/summary.txt
SIEVE_CUDA_SA_STAGES=3 timeout 150 $N/tests/test_attention_cuda --jobs 4 --verbose=1 > $D/test_dense3.txt 2>&1; echo "dense suite (3 stages) rc $?" | tee -a $D/summary.txt
grep -E "FAIL|ssert|Synthesis" $D/test_dense3.txt | head -12 | tee -a $D/summary.txt
timeout 120 $N/tests/test_sparse_attn_cuda --jobs 4 --verbose=1 > $D/test_sparse.txt 2>&1; echo "sparse suite rc $?" | tee -a $D/summary.txt
grep -E "FAIL|ssert|Synthesis" $D/test_sparse.txt | head -12 | tee -a $D/summary.txt
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_attention_cuda --filter 'attention_cuda/@(decode_slices_bf16|clipped_mha_bf16|errors|prefill_gqa_bf16)' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck.txt >> $D/summary.txt
A="attention dense --device cuda --seq 8k,32k --check-tokens 2"
for r in b1:$B0 n1:$N n2:$N b2:$B0; do
  IFS=: read l b <<< "$r"
  timeout 60 $b/bench/sieve-bench $A --json $D/ab.json > $D/ab_$l.txt 2>&1
  echo "== $l" >> $D/summary.txt; tail -2 $D/ab_$l.txt >> $D/summary.txt
done
for st in 2 3; do
  SIEVE_CUDA_SA_STAGES=$st timeout 90 $N/bench/sieve-bench attention dense --device cuda --seq 32k,128k --check-tokens 2 --repeat 3 --json $D/st.json > $D/st_$st.txt 2>&1
  echo "== stages $st" >> $D/summary.txt; tail -2 $D/st_$st.txt >> $D/summary.txt
done
timeout 60 $B0/bench/sieve-bench attention dense --device cuda --seq 128k --check-tokens 2 --repeat 3 --json $D/b128.json > $D/b128.txt 2>&1; echo "== base 128k" >> $D/summary.txt; tail -1 $D/b128.txt >> $D/summary.txt
S="attention sparse --device cuda --keys 128k --queries 2048 --k 2048 --group 16 --share 1,0.95 --check-tokens 2"
for r in b:$B0 n:$N; do IFS=: read l b <<< "$r"; timeout 60 $b/bench/sieve-bench $S > $D/sp_$l.txt 2>&1; echo "== sparse $l" >> $D/summary.txt; tail -2 $D/sp_$l.txt >> $D/summary.txt; done
tar czf $OUT/call8.tar.gz -C $OUT c8
