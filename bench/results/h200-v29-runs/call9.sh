# Call 9: the new GPU test of the default sample size (rows sampled and path by k and N, each
# search against the full sort), on the build of main with the test added.
D=$OUT/c9; . bench/results/h200-v29-runs/common.sh
timeout 200 .deps/gpu/build/tests/test_knn_cuda --filter 'knn_cuda/default_sample_size_by_k_and_rows' --verbose -j1 2>&1 | tail -8
