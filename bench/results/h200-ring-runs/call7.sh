# Device call 7: the final review's refactors (descriptors from prims.cuh's sw128_desc /
# sw128_desc_mn moved by desc_add; the queries' fragments by load_a_frags, shared with the
# mma.sync block-score kernel; the swizzle by sw_off): the attention kernel's SASS changed,
# every other kernel's is identical. The three suites, memcheck of the forced-wgmma dense
# tests, and an A/B against call 6's build (bundle gpu-old) at 128K prefill and dense 32K.
D=$OUT/c7; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
bash bench/gpu/unpack.sh gpu-old || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
for t in test_attention_cuda test_block_sparse_cuda test_sparse_attn_cuda; do
  timeout 100 $N/tests/$t -j16 --verbose > $D/$t.txt 2>&1; echo "$t rc $?" | tee -a $D/summary.txt
  grep -E "Synthesis|FAIL|Timeout|Crash|Assert" $D/$t.txt | head -8 >> $D/summary.txt
done
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_attention_cuda --filter 'attention_cuda/wgmma_*' > $D/memcheck_dense.txt 2>&1; echo "memcheck dense rc $?" | tee -a $D/summary.txt; tail -2 $D/memcheck_dense.txt >> $D/summary.txt
ab() { # bundle tag
  timeout 30 .deps/$1/build/bench/sieve-bench attention prefill --device cuda --seq 128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_$2.json > $D/prefill_$2.txt 2>&1
  echo "prefill $2 rc $?: $(tail -1 $D/prefill_$2.txt)" | tee -a $D/summary.txt
  timeout 20 .deps/$1/build/bench/sieve-bench attention dense --device cuda --seq 32k --repeat 3 --warmup 1 --check-tokens 4 --json $D/dense_$2.json > $D/dense_$2.txt 2>&1
  echo "dense $2 rc $?: $(tail -1 $D/dense_$2.txt)" | tee -a $D/summary.txt
}
[ $SECONDS -lt 200 ] && { ab gpu-old old1; ab gpu new1; ab gpu new2; ab gpu-old old2; }
head -3 $D/prefill_new1.txt > $D/prefill_header.txt 2>/dev/null
tar czf $OUT/call7.tar.gz -C $OUT c7
