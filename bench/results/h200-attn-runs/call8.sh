# Device call 8: the review's mends (the sample at a fractional stride from a table of its
# keys, the fused path's plan by expected candidates, checked scratch sizes, a wait on error
# paths) against v6 (gpu-base): the GPU suite (8 tests, new edge shapes and plans),
# memcheck, racecheck, b n n b at the target shape, k near the block sort's limit.
D=$OUT/c8; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
bash bench/gpu/unpack.sh gpu-base || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build B0=.deps/gpu-base/build
timeout 150 $N/tests/test_indexer_cuda --jobs 4 --verbose=1 > $D/test_indexer_cuda.txt 2>&1; echo "indexer suite rc $?" | tee -a $D/summary.txt
grep -E "FAIL|ssert|Synthesis" $D/test_indexer_cuda.txt | head -12 | tee -a $D/summary.txt
T="attention --device cuda --keys 128k --queries 2048 --k 2048"
for r in b1:$B0 n1:$N n2:$N b2:$B0; do
  l=${r%%:*} b=${r#*:}
  timeout 60 $b/bench/sieve-bench $T --json $D/ab.json > $D/ab_$l.txt 2>&1
  echo "$l $(tail -1 $D/ab_$l.txt)" | tee -a $D/summary.txt
done
timeout 90 $N/bench/sieve-bench attention --device cuda --json $D/attn.json --keys 128k --queries 2048 --k 1,512,4096,5000,6000 --repeat 3 --mat-repeat 1 > $D/attn_k.txt 2>&1; echo "k sweep rc $?" | tee -a $D/summary.txt
cat $D/attn_k.txt >> $D/summary.txt
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_indexer_cuda --filter 'indexer_cuda/edge_shapes_and_plans' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck.txt >> $D/summary.txt
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_indexer_cuda --filter 'indexer_cuda/recovery_paths' > $D/racecheck.txt 2>&1; echo "racecheck rc $?" | tee -a $D/summary.txt
tail -1 $D/racecheck.txt >> $D/summary.txt
tar czf $OUT/call8.tar.gz -C $OUT c8
