# Call 8: main's final build (8b7b0a1; kernels as e6f9dda but for comments): GPU kernel
# suite and device page cache suite.
D=$OUT/c8; mkdir -p $D; bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib:${LD_LIBRARY_PATH:-}
timeout 330 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "test_knn_cuda rc $?: $(tail -1 $D/test_knn_cuda.log)"
timeout 60 .deps/gpu/build/tests/test_devcache --verbose=0 > $D/test_devcache.log 2>&1
echo "test_devcache rc $?: $(tail -1 $D/test_devcache.log)"
tar czf $OUT/call8.tar.gz -C $OUT c8 && rm -rf $D
