# Device call 6: v8 (the key ring on mbarriers: each warpgroup's threads arrive on a slot's
# "full" barrier when their copies land and its warps on "empty" when their wgmma read it,
# so no barrier of the CTA or warpgroup a chunk) against the committed build (gpu-prev),
# p n n p; v8's suite, racecheck and memcheck.
D=$OUT/c6; mkdir -p $D
for b in gpu gpu-v8 gpu-prev; do bash bench/gpu/unpack.sh $b || exit 1; done
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu-v8/build A=.deps/gpu-prev/build
T="attention --device cuda --keys 128k --queries 2048 --k 2048"
timeout 120 $N/tests/test_indexer_cuda -j16 > $D/test_indexer_cuda.txt 2>&1; echo "indexer suite rc $?" | tee -a $D/summary.txt
tail -1 $D/test_indexer_cuda.txt >> $D/summary.txt
grep -E "FAIL|ssert" $D/test_indexer_cuda.txt | head -5 >> $D/summary.txt
for r in p1:$A n1:$N n2:$N p2:$A; do
  l=${r%%:*} b=${r#*:}
  timeout 60 $b/bench/sieve-bench $T --mat-repeat 1 --json $D/ab.json > $D/ab_$l.txt 2>&1
  echo "$l $(tail -1 $D/ab_$l.txt)" | tee -a $D/summary.txt
done
left=$((290 - SECONDS)); [ $left -gt 20 ] && { timeout $left compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_indexer_cuda --filter 'indexer_cuda/heads_and_head_dims' > $D/racecheck.txt 2>&1; echo "racecheck rc $? (limit $left)" | tee -a $D/summary.txt; tail -1 $D/racecheck.txt >> $D/summary.txt; }
left=$((330 - SECONDS)); [ $left -gt 20 ] && { timeout $left compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_indexer_cuda --filter 'indexer_cuda/heads_and_head_dims' > $D/memcheck.txt 2>&1; echo "memcheck rc $? (limit $left)" | tee -a $D/summary.txt; tail -1 $D/memcheck.txt >> $D/summary.txt; }
echo "seconds $SECONDS" >> $D/summary.txt
tar czf $OUT/call6.tar.gz -C $OUT c6
