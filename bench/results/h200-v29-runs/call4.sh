# Call 4: the staged tile's reserve after the epilogue (tma64x256s, B <= 64, and the other
# staged tiles without helpers) against main's build: exact shapes first (the staged tiles
# at B <= 64, adversarial data), then whole calls alternating b n n b.
D=$OUT/c4; . bench/results/h200-v29-runs/common.sh
echo "--- exact ($(date -u +%T))"
exact f16 X=1 normal Dot --n 300001 --dim 200 --batch 9,40,64 --k 1,128,1000,8192 --rows-per-page 256
exact sorted X=1 sorted_asc Dot --n 300001 --dim 768 --batch 40 --k 1000,8192 --rows-per-page 256
exact dups X=1 dups Euclid --n 300001 --dim 200 --batch 64 --k 100,2000 --rows-per-page 256
exact band X=1 band Cosine --n 300001 --dim 64 --batch 16,64 --k 1,100,1000 --rows-per-page 256
exact s128 SIEVE_CUDA_SCAN=tma128x256s normal Dot --n 300001 --dim 200 --batch 200 --k 10,5000 --rows-per-page 256
exact s64 SIEVE_CUDA_SCAN=tma64x128s ties Dot --n 300001 --dim 200 --batch 50 --k 100,3000 --rows-per-page 256
echo "--- A/B b n n b ($(date -u +%T))"
ab p5m --n 5m --batch 16,32,64 --k 128,1024,8192,16384 --results pinned
ab g5m --n 5m --batch 16,64 --k 128,8192
ab g1m --n 1m --batch 16,64 --k 128,1024,8192
ab g9m --n 8841823 --batch 64 --k 128,8192
echo "--- kernel durations, new ($(date -u +%T))"
kdur f16_b64_k128 X=1 --n 5m --batch 64 --k 128 --results pinned
kdur f16_b64_k8192 X=1 --n 5m --batch 64 --k 8192 --results pinned
echo "--- done ($(date -u +%T))"
tar czf $OUT/call4.tar.gz -C $OUT c4 && rm -rf $D
