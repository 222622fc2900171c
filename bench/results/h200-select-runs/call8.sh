# Device call 8: the block-sparse suite with two more forced-wgmma cases (over 256 visible
# blocks: the block-score kernel's chunk buffers refilled; two query passes; a partial second
# pass with a negative scale), memcheck of the two new cases.
D=$OUT/c8; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
timeout 200 $N/tests/test_block_sparse_cuda -j16 --verbose > $D/test_block_sparse_cuda.txt 2>&1; echo "test_block_sparse_cuda rc $?" | tee -a $D/summary.txt
grep -E "Synthesis|FAIL|Timeout|Crash|Assert" $D/test_block_sparse_cuda.txt | head -8 >> $D/summary.txt
grep -E "wgmma_kernel_(9|10)" $D/test_block_sparse_cuda.txt >> $D/summary.txt
for k in 9 10; do
  left=$((500 - SECONDS)); [ $left -gt 10 ] && { timeout $left compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter "block_sparse_cuda/wgmma_kernel_$k" > $D/memcheck_bsp_$k.txt 2>&1; echo "memcheck case $k rc $? (limit $left)" | tee -a $D/summary.txt; tail -2 $D/memcheck_bsp_$k.txt >> $D/summary.txt; }
done
tar czf $OUT/call8.tar.gz -C $OUT c8
