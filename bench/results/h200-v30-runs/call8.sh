# Call 8: the build to land (streamed downloads from 16 MiB of results on up to 15 copy
# threads, other copies on at most 8 as before; the sample bounded by 64 n / k) against
# main's build, b n n b; the GPU test of the download paths.
D=$OUT/c8; . bench/results/h200-v30-runs/common.sh
echo "--- tests ($(date -u +%T))"
timeout 300 .deps/gpu/build/tests/test_knn_cuda -j1 --verbose --filter "knn_cuda/pinned_results_match_pageable" 2>&1 |
  grep -E "^\[(PASS|FAIL|SKIP|RUN |====)\]|Assert" | grep -v "Test is disabled" | tail -3
echo "--- A/B ($(date -u +%T))"
ab m_pg --n 1m --batch 1,16,64,128,1024 --k 128,4096,8192,16384
ab f_pg --n 5m --batch 16,64,128,1024 --k 128,4096,8192,16384
ab h_pg --n 8841823 --batch 64,128,1024 --k 128,8192,16384
echo "--- done ($(date -u +%T))"
tar czf $OUT/call8.tar.gz -C $OUT c8 && rm -rf $D
