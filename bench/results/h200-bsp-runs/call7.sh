# Device call 7: the GPU suite with the review's missing cases (one token, fewer keys than a
# block, a block of 128 over 100 keys, the block mode on a 3-stage ring); memcheck of them.
# Kernels as call 5 (584abd2).
D=$OUT/c7; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
timeout 150 $N/tests/test_block_sparse_cuda --jobs 4 --verbose=1 > $D/test_block_sparse_cuda.txt 2>&1; echo "test_block_sparse_cuda rc $?" | tee -a $D/summary.txt
grep -E "FAIL|ssert|Synthesis" $D/test_block_sparse_cuda.txt | head -8 | tee -a $D/summary.txt
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/@(small_edges|three_stage_ring)' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck.txt >> $D/summary.txt
tar czf $OUT/call7.tar.gz -C $OUT c7
