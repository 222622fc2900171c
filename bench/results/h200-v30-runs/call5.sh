# Call 5: the streaming download from 16 MiB of results only (call 4: 0.05-0.1 ms slower at
# 6 MB, 8,841,823 rows B = 64 k = 8192), against main's build, b n n b, at the pipelined
# shapes from 6 to 201 MB; the GPU test of the download paths.
D=$OUT/c5; . bench/results/h200-v30-runs/common.sh
echo "--- tests ($(date -u +%T))"
timeout 300 .deps/gpu/build/tests/test_knn_cuda -j1 --verbose --filter "knn_cuda/pinned_results_match_pageable" 2>&1 |
  grep -E "^\[(PASS|FAIL|SKIP|RUN |====)\]|Assert" | grep -v "Test is disabled" | tail -3
echo "--- A/B ($(date -u +%T))"
ab h_pg --n 8841823 --batch 64,128,1024 --k 8192,16384
ab f_pg --n 5m --batch 64,128,1024 --k 4096,8192,16384
ab m_pg --n 1m --batch 64,128,1024 --k 2048,8192,16384
echo "--- done ($(date -u +%T))"
tar czf $OUT/call5.tar.gz -C $OUT c5 && rm -rf $D
