# Call 11: the host copy threads' count in one helper (fb406bb, host code): the GPU test that
# compares pinned, pageable and SIEVE_CUDA_HOSTCOPY=0 downloads bit for bit (a 19 MB chunked
# download included), the default sample test, and the speculative select test.
D=$OUT/c11; . bench/results/h200-v29-runs/common.sh
for t in pinned_results_match_pageable default_sample_size_by_k_and_rows \
         speculative_select_matches_certify_first; do
  timeout 200 .deps/gpu/build/tests/test_knn_cuda -j1 --verbose --filter "knn_cuda/$t" 2>&1 |
    grep -E "^\[(PASS|FAIL|SKIP|RUN |====)\]|Assert" | grep -v "Test is disabled" | tail -3
done
