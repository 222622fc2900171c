# Device call 9: the review's test changes: the two large forced-wgmma cases over 320
# visible blocks (six chunks: both warpgroups of the block-score kernel refill their
# buffers) and a case with 20 query heads a kv head (seven passes, the last partial; the
# copies' row stepping past 16 heads). The block-sparse suite; memcheck of the three cases;
# racecheck and synccheck of the 20-head case and of the six-chunk bfloat16 case.
D=$OUT/c9; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build; T=$N/tests/test_block_sparse_cuda
timeout 150 $T -j16 --verbose > $D/test_block_sparse_cuda.txt 2>&1; echo "test_block_sparse_cuda rc $?" | tee -a $D/summary.txt
grep -E "Synthesis|FAIL|Timeout|Crash|Assert" $D/test_block_sparse_cuda.txt | head -8 >> $D/summary.txt
grep -E "PASS.*wgmma_kernel_(9|10|11)" $D/test_block_sparse_cuda.txt >> $D/summary.txt
run() { # tool case
  left=$((245 - SECONDS)); [ $left -gt 15 ] || { echo "$1 case $2 not run (time)" | tee -a $D/summary.txt; return; }
  timeout $left compute-sanitizer --tool $1 --error-exitcode 3 $T --filter "block_sparse_cuda/wgmma_kernel_$2" > $D/$1_$2.txt 2>&1
  echo "$1 case $2 rc $? (limit $left)" | tee -a $D/summary.txt; tail -2 $D/$1_$2.txt >> $D/summary.txt
}
run memcheck 11; run racecheck 11; run synccheck 11; run memcheck 10; run memcheck 9; run racecheck 9
tar czf $OUT/call9.tar.gz -C $OUT c9
