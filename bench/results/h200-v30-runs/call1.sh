# Call 1: the build with the 32-bit rows on the bus (pipelined pageable downloads) and the
# sample bounded by 64 n / k: the GPU tests of the download paths, the default sample and
# the speculative select; exactness against the materialized path at the shapes whose
# sample changed (adversarial data, pageable results large enough for the pipelined
# download); the download with SIEVE_CUDA_NARROW=0 (a) and the default (b) alternating;
# the sample of the rule before (--sample-rows, o) and the new default (n) alternating.
D=$OUT/c1; . bench/results/h200-v30-runs/common.sh
echo "--- tests ($(date -u +%T))"
for t in pinned_results_match_pageable default_sample_size_by_k_and_rows \
         speculative_select_matches_certify_first; do
  timeout 300 .deps/gpu/build/tests/test_knn_cuda -j1 --verbose --filter "knn_cuda/$t" 2>&1 |
    grep -E "^\[(PASS|FAIL|SKIP|RUN |====)\]|Assert" | grep -v "Test is disabled" | tail -3
done
echo "--- exact ($(date -u +%T))"
for dd in normal sorted_asc ties band outlier dups; do
  exact m_$dd X=1 $dd dot --n 1m --batch 64 --k 4096,8192,16384
done
exact f_normal X=1 normal dot --n 5m --batch 64 --k 16384
exact f_band X=1 band euclid --n 5m --batch 64 --k 16384
echo "--- narrow: 64-bit rows (a) and 32-bit (b), pageable ($(date -u +%T))"
abv n1m SIEVE_CUDA_NARROW=0 X=1 --n 1m --batch 64,128,1024 --k 8192,16384
abv n5m SIEVE_CUDA_NARROW=0 X=1 --n 5m --batch 64,128,1024 --k 8192,16384
echo "--- sample: the rule before (o) and the new default (n), pinned ($(date -u +%T))"
abs m4096 32768 --n 1m --k 4096 --batch 1,16,64,128,1024 --results pinned
abs m8192 32768 --n 1m --k 8192 --batch 1,16,64,128,1024 --results pinned
abs m16384 65536 --n 1m --k 16384 --batch 1,16,64,128,1024 --results pinned
abs f16384 65536 --n 5m --k 16384 --batch 1,16,64,128,1024 --results pinned
echo "--- done ($(date -u +%T))"
tar czf $OUT/call1.tar.gz -C $OUT c1 && rm -rf $D
