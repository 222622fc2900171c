# Call 9: main's final build (58f87e8; kernels and host code as 1f05d25, the GPU suite with
# the 1,100-query upload case): GPU kernel suite and device page cache suite.
D=$OUT/c9; mkdir -p $D; bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib:$LD_LIBRARY_PATH
timeout 170 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "test_knn_cuda rc $?: $(tail -1 $D/test_knn_cuda.log)"
timeout 60 .deps/gpu/build/tests/test_devcache --verbose=0 > $D/test_devcache.log 2>&1
echo "test_devcache rc $?: $(tail -1 $D/test_devcache.log)"
tar czf $OUT/call9.tar.gz -C $OUT c9 && rm -rf $D
