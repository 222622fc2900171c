# Call 4: the build to land (the pipelined pageable download with 32-bit rows on the bus,
# streaming stores and up to 15 copy threads here; the sample bounded by 64 n / k) against
# main's build, whole calls alternating b n n b; the GPU tests of the download paths, the
# default sample and the speculative select; exactness of the pipelined download on
# adversarial data.
D=$OUT/c4; . bench/results/h200-v30-runs/common.sh
echo "--- tests ($(date -u +%T))"
for t in pinned_results_match_pageable default_sample_size_by_k_and_rows \
         speculative_select_matches_certify_first; do
  timeout 300 .deps/gpu/build/tests/test_knn_cuda -j1 --verbose --filter "knn_cuda/$t" 2>&1 |
    grep -E "^\[(PASS|FAIL|SKIP|RUN |====)\]|Assert" | grep -v "Test is disabled" | tail -3
done
echo "--- exact ($(date -u +%T))"
for dd in ties dups sorted_desc; do
  exact m_$dd X=1 $dd cosine --n 1m --batch 300 --k 4096,16384
done
echo "--- A/B ($(date -u +%T))"
ab m_pg --n 1m --batch 1,16,64,128,1024 --k 128,4096,8192,16384
ab f_pg --n 5m --batch 16,64,128,1024 --k 128,8192,16384
ab f_pin --n 5m --batch 64,1024 --k 128,16384 --results pinned
ab h_pg --n 8841823 --batch 64,1024 --k 8192,16384
echo "--- done ($(date -u +%T))"
tar czf $OUT/call4.tar.gz -C $OUT c4 && rm -rf $D
