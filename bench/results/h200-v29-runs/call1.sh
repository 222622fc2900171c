# Call 1: the split-accumulator tile (tma128x256p, the default above 64 queries in this
# build) against tma128x256h (the default before) in one build: the variant tests of the GPU
# kernel suite, whole calls alternating h p p h, kernel durations, exact shapes.
D=$OUT/c1; . bench/results/h200-v29-runs/common.sh
H=SIEVE_CUDA_SCAN=tma128x256h; P=SIEVE_CUDA_SCAN=tma128x256p
echo "--- variant tests ($(date -u +%T))"
timeout 300 .deps/gpu/build/tests/test_knn_cuda --filter 'knn_cuda/*variant*' -j1 > $D/variant_tests.log 2>&1
echo "rc $? $(grep -E 'Synthesis' $D/variant_tests.log)"
if ! grep -q "Failing: 0" $D/variant_tests.log; then tail -30 $D/variant_tests.log; tar czf $OUT/call1.tar.gz -C $OUT c1; exit 0; fi
echo "--- A/B h p p h ($(date -u +%T))"
abv b1024p "$H" "$P" --n 5m --batch 1024 --k 10,128,1024,8192 --results pinned
abv b1024 "$H" "$P" --n 5m --batch 1024 --k 10,128
abv b128 "$H" "$P" --n 5m --batch 128,256 --k 128,8192 --results pinned
abv m1 "$H" "$P" --n 1m --batch 1024 --k 128,1024
abv bf16 "$H" "$P" --n 5m --dtype bfloat16 --batch 1024 --k 128 --results pinned
echo "--- kernel durations ($(date -u +%T))"
kdur h_b1024_k128 "$H" --n 5m --batch 1024 --k 128 --results pinned
kdur p_b1024_k128 "$P" --n 5m --batch 1024 --k 128 --results pinned
kdur h_b1024_k8192 "$H" --n 5m --batch 1024 --k 8192 --results pinned
kdur p_b1024_k8192 "$P" --n 5m --batch 1024 --k 8192 --results pinned
echo "--- exact, default p ($(date -u +%T))"
exact f16 X=1 normal Dot --n 300001 --dim 200 --batch 65,300,1024 --k 1,128,512,1000,8192 --rows-per-page 256
exact dups X=1 dups Euclid --n 300001 --dim 200 --batch 300,1024 --k 100,513 --rows-per-page 256
exact ties X=1 ties Dot --n 300001 --dim 200 --batch 300 --k 100 --rows-per-page 256
exact band X=1 band Cosine --n 300001 --dim 64 --batch 300,1024 --k 1,100,1000 --rows-per-page 256
exact sorted X=1 sorted_asc Dot --n 300001 --dim 768 --batch 200 --k 1000 --rows-per-page 256
echo "--- done ($(date -u +%T))"
tar czf $OUT/call1.tar.gz -C $OUT c1 && rm -rf $D
