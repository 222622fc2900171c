# Call 2: the float32 tile loop with its copy sources taken once and the K chunk unrolled,
# the select sized by what a query keeps (the 256-thread block up to k = 512), the sample
# selection over the keys above a group maximum (one block, small ranks): the GPU kernel
# suite on the new build; A/B against main's build (.deps/gpu-base), whole calls
# alternating b n n b; each kernel's duration on the new build; exact shapes.
D=$OUT/c2; . bench/results/h200-v28-runs/common.sh
echo "--- GPU suite ($(date -u +%T))"
timeout 250 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "rc $?"; grep -E "^\[(FAIL|====)|assert|Synthesis" $D/test_knn_cuda.log | tail -8
echo "--- A/B ($(date -u +%T))"
ab f32 --n 5m --dtype float32 --batch 64,128 --k 128,1024 --results pinned
ab f32b1024 --n 5m --dtype float32 --batch 1024 --k 128 --results pinned --repeat 6
ab f16b1024p --n 5m --batch 1024 --k 10,128,1024,8192 --results pinned
ab f16b1024 --n 5m --batch 1024 --k 10,128,1024 
ab f16small --n 5m --batch 16,64,128 --k 128,1024,8192 --results pinned
ab f16_1m --n 1m --batch 64,1024 --k 128,1024
echo "--- kernel durations, new ($(date -u +%T))"
kdur f16_b1024_k128 X=1 --n 5m --batch 1024 --k 128 --results pinned
kdur f16_b1024_k1024 X=1 --n 5m --batch 1024 --k 1024 --results pinned
kdur f16_b1024_k8192 X=1 --n 5m --batch 1024 --k 8192 --results pinned
kdur f16_b64_k8192 X=1 --n 5m --batch 64 --k 8192 --results pinned
echo "--- exact ($(date -u +%T))"
exact f32 X=1 normal Dot --n 300001 --dim 200 --dtype float32 --batch 64,128,1024 --k 10,128,1000 --rows-per-page 256
exact f16 X=1 normal Dot --n 300001 --dim 200 --batch 300,1024 --k 1,128,512,1000,8192 --rows-per-page 256
exact dups X=1 dups Euclid --n 300001 --dim 200 --batch 300,1024 --k 100,513 --rows-per-page 256
exact ties X=1 ties Dot --n 300001 --dim 200 --batch 300 --k 100 --rows-per-page 256
exact band X=1 band Cosine --n 300001 --dim 200 --batch 300,1024 --k 1,100,1000 --rows-per-page 256
echo "--- done ($(date -u +%T))"
tar czf $OUT/call2.tar.gz -C $OUT c2 && rm -rf $D
