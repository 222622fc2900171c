# Device call 8 (two runs on the warm machine of call 7, the last of the session's device
# time): the block-sparse suite's forced-wgmma test alone (wgmma attention and, then the
# default, wgmma block scores). The first run lacked LD_LIBRARY_PATH (exit 127, nothing ran);
# the second is below. It was cut by its 160 s limit before its eight cases finished (no
# failure printed; in call 6, on another machine, the test took 121 s).
mkdir -p $OUT/c8; bash bench/gpu/unpack.sh gpu; export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib; timeout 160 .deps/gpu/build/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/wgmma_kernel' --verbose > $OUT/c8/test_wgmma_kernel.txt 2>&1; echo "rc $?" | tee $OUT/c8/summary.txt; grep -E "PASS|FAIL|Synth" $OUT/c8/test_wgmma_kernel.txt | tee -a $OUT/c8/summary.txt
