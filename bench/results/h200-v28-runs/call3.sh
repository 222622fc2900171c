# Call 3: call 2's changes reworked: the float32 tile's unrolled loop only where several query
# tiles share a row tile (the 128-query tile at B > 128), the select block sized by k plus
# 10 n / S (a 512-thread block beside the 256- and 1024-thread ones), the group maxima of the
# sample selection in static shared memory (no more dynamic memory than before): A/B
# against main's build, whole calls alternating b n n b; kernel durations; exact shapes.
D=$OUT/c3; . bench/results/h200-v28-runs/common.sh
echo "--- A/B ($(date -u +%T))"
ab f32 --n 5m --dtype float32 --batch 64,128,256,512 --k 128 --results pinned
ab f32b1024 --n 5m --dtype float32 --batch 1024 --k 128,1024 --results pinned --repeat 6
ab f16small --n 5m --batch 16,64,128 --k 10,128,1024,8192 --results pinned
ab f16b1024p --n 5m --batch 1024 --k 10,128,1024,8192 --results pinned
ab f16b1024 --n 5m --batch 256,1024 --k 10,128
ab f16_1m --n 1m --batch 64,1024 --k 128,1024
echo "--- kernel durations, new ($(date -u +%T))"
kdur f16_b1024_k128 X=1 --n 5m --batch 1024 --k 128 --results pinned
kdur f16_b1024_k8192 X=1 --n 5m --batch 1024 --k 8192 --results pinned
kdur f16_b128_k128 X=1 --n 5m --batch 128 --k 128 --results pinned
echo "--- exact ($(date -u +%T))"
exact f32 X=1 normal Dot --n 300001 --dim 200 --dtype float32 --batch 64,128,300,1024 --k 10,128,1000 --rows-per-page 256
exact f16 X=1 normal Dot --n 300001 --dim 200 --batch 16,300,1024 --k 1,128,512,1000,8192 --rows-per-page 256
exact dups X=1 dups Euclid --n 300001 --dim 200 --batch 300,1024 --k 100,513 --rows-per-page 256
exact ties X=1 ties Dot --n 300001 --dim 200 --batch 300 --k 100 --rows-per-page 256
exact band X=1 band Cosine --n 300001 --dim 200 --batch 300,1024 --k 1,100,1000 --rows-per-page 256
echo "--- done ($(date -u +%T))"
tar czf $OUT/call3.tar.gz -C $OUT c3 && rm -rf $D
