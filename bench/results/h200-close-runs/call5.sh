# Call 5: the new test knn_cuda::k_equals_n_at_scale (k = N at 1M and 5M rows, every dtype
# and metric) on the H200; the carried bundle holds test_knn_cuda alone.
bench/gpu/unpack.sh gpu-t || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu-t/lib
S=$SECONDS
timeout 150 .deps/gpu-t/build/tests/test_knn_cuda --filter 'knn_cuda/k_equals_n_at_scale' --verbose=1 2>&1 | tail -20
echo "exit ${PIPESTATUS[0]}, $((SECONDS - S)) s"
