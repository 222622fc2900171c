# Device call 6: sanitizers on call 5's build (the final kernels): memcheck of the block-sparse
# 128-key cases, racecheck of two of them, memcheck of the forced-wgmma dense test.
D=$OUT/c6; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
timeout 80 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/wgmma128*' > $D/memcheck_bsp128.txt 2>&1; echo "memcheck bsp 128 rc $?" | tee -a $D/summary.txt; tail -2 $D/memcheck_bsp128.txt >> $D/summary.txt
timeout 45 compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/wgmma128_kernel_[24]' > $D/racecheck_bsp128.txt 2>&1; echo "racecheck bsp 128 cases 2, 4 rc $?" | tee -a $D/summary.txt; tail -2 $D/racecheck_bsp128.txt >> $D/summary.txt
left=$((175 - SECONDS)); [ $left -gt 10 ] && { timeout $left compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_attention_cuda --filter 'attention_cuda/wgmma_kernel' > $D/memcheck_attn.txt 2>&1; echo "memcheck attention wgmma rc $? (limit $left)" | tee -a $D/summary.txt; tail -2 $D/memcheck_attn.txt >> $D/summary.txt; }
tar czf $OUT/call6.tar.gz -C $OUT c6
