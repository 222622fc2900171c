# Device call 4: the final build (v7 after the review: IxParams without Hp, a check of the
# padded head count, comments) against call 1's build (gpu-prev) and v6 (gpu-base) at the
# target shape, a n n a b; its suites (indexer, indexer CPU, block-sparse, attention),
# memcheck and racecheck.
D=$OUT/c4; mkdir -p $D
for b in gpu gpu-base gpu-prev; do bash bench/gpu/unpack.sh $b || exit 1; done
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build B0=.deps/gpu-base/build A=.deps/gpu-prev/build
T="attention --device cuda --keys 128k --queries 2048 --k 2048"
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader > $D/gpu.txt
for t in test_indexer_cuda test_kernels_indexer_cpu test_block_sparse_cuda test_attention_cuda; do
  timeout 200 $N/tests/$t -j16 > $D/$t.txt 2>&1; echo "$t rc $?" | tee -a $D/summary.txt
  tail -1 $D/$t.txt >> $D/summary.txt
  grep -E "FAIL|ssert" $D/$t.txt | head -5 >> $D/summary.txt
done
for r in a1:$A n1:$N n2:$N a2:$A b1:$B0; do
  l=${r%%:*} b=${r#*:}
  timeout 100 $b/bench/sieve-bench $T --json $D/ab.json > $D/ab_$l.txt 2>&1
  echo "$l $(tail -1 $D/ab_$l.txt)" | tee -a $D/summary.txt
done
timeout 90 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_indexer_cuda --filter 'indexer_cuda/heads_and_head_dims' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck.txt >> $D/summary.txt
left=$((560 - SECONDS)); [ $left -gt 30 ] && { timeout $left compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_indexer_cuda --filter 'indexer_cuda/heads_and_head_dims' > $D/racecheck.txt 2>&1; echo "racecheck rc $? (limit $left)" | tee -a $D/summary.txt; tail -1 $D/racecheck.txt >> $D/summary.txt; }
echo "seconds $SECONDS" >> $D/summary.txt
tar czf $OUT/call4.tar.gz -C $OUT c4
