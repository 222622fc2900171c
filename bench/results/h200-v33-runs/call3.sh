# Call 3: n = call 1's build plus SIEVE_CUDA_SCAN=tma64x256s-any (the 64 x 256 staged tile
# at any batch; by default above 64 queries the 128 x 256 tile with helpers, tma128x256h).
# abv a = tma64x256s-any, b = default, a b b a, pinned; kernel durations (Nsight Compute)
# at 1M B = 64 / 128 and 5M B = 1024; the variant test of the GPU suite.
D=$OUT/c3; . bench/results/h200-v33-runs/common.sh
echo "--- exact ($(date -u +%T))"
exact 1m_any SIEVE_CUDA_SCAN=tma64x256s-any normal Dot --n 1m --batch 65,128,300,1024 --k 1,10,128,1024,8192
exact 1m_any_ties SIEVE_CUDA_SCAN=tma64x256s-any ties Euclid --n 1m --batch 128,1024 --k 10,1024
echo "--- A/B, a = tma64x256s-any, b = default ($(date -u +%T))"
abv m SIEVE_CUDA_SCAN=tma64x256s-any X=1 --results pinned --n 1m --batch 128,256,1024 --k 10,128,1024,8192
abv f SIEVE_CUDA_SCAN=tma64x256s-any X=1 --results pinned --n 5m --batch 128,256,1024 --k 10,128,1024,8192
echo "--- kernel durations ($(date -u +%T))"
kdur m64k1024 X=1 --n 1m --batch 64 --k 1024 --results pinned
kdur m128k128 X=1 --n 1m --batch 128 --k 128 --results pinned
kdur m128k1024 X=1 --n 1m --batch 128 --k 1024 --results pinned
kdur m128k1024any SIEVE_CUDA_SCAN=tma64x256s-any --n 1m --batch 128 --k 1024 --results pinned
kdur f1024k10 X=1 --n 5m --batch 1024 --k 10 --results pinned
kdur f1024k128 X=1 --n 5m --batch 1024 --k 128 --results pinned
cat $D/kdur_*.csv > /dev/null
echo "--- tests ($(date -u +%T))"
timeout 200 .deps/gpu/build/tests/test_knn_cuda --filter 'knn_cuda/every_scan_variant*' --verbose=0 > $D/test_variants.log 2>&1
echo "variants rc $?: $(tail -1 $D/test_variants.log)"
echo "--- done ($(date -u +%T))"
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call3.tar.gz -C $OUT c3 && rm -rf $D
