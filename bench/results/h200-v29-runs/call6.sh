# Call 6: the sample of 4k rows from k = 8192 on (the default of this build) against main's
# 8k: whole calls alternating b n n b at the large-k shapes, pinned and pageable; k <= 4096
# shapes unchanged (a check that nothing else moved).
D=$OUT/c6; . bench/results/h200-v29-runs/common.sh
echo "--- A/B b n n b ($(date -u +%T))"
ab p5m --n 5m --batch 1,16,64,128,1024 --k 8192,16384 --results pinned
ab g5m --n 5m --batch 16,64,128,1024 --k 8192,16384
ab g1m --n 1m --batch 1,16,64,128,1024 --k 8192,16384
ab g9m --n 8841823 --batch 1,64,1024 --k 8192,16384
ab same --n 5m --batch 64,1024 --k 128,4096
echo "--- exact ($(date -u +%T))"
exact f16 X=1 normal Dot --n 300001 --dim 200 --batch 1,40,300 --k 8192,12000 --rows-per-page 256
exact sorted X=1 sorted_asc Dot --n 300001 --dim 128 --batch 40 --k 8192 --rows-per-page 256
exact band X=1 band Cosine --n 1000000 --dim 64 --batch 64,1024 --k 8192,16384 --rows-per-page 256
echo "--- done ($(date -u +%T))"
tar czf $OUT/call6.tar.gz -C $OUT c6 && rm -rf $D
