# Call 7: main (e4ac5ad) with a throwaway setting SIEVE_CUDA_PIPELINE_MIN (bytes from which
# results into pageable arrays take the pipelined download instead of the staged one, which
# the speculative select may queue): a = 2 MiB (main's), b = 4 MiB, then a = 2 MiB,
# b = 8 MiB; abv a b b a, pageable, shapes of 3.1 and 6.3 MB of results.
D=$OUT/c7; . bench/results/h200-v34-runs/common.sh
echo "--- A/B ($(date -u +%T))"
A=SIEVE_CUDA_PIPELINE_MIN=2097152; B4=SIEVE_CUDA_PIPELINE_MIN=4194304; B8=SIEVE_CUDA_PIPELINE_MIN=8388608
abv m4 $A $B4 --n 1m --batch 16,32,64,128,256 --k 1024,2048,4096,8192,16384
abv f4 $A $B4 --n 5m --batch 16,64,128 --k 2048,4096,16384
abv m8 $A $B8 --n 1m --batch 64,128 --k 4096,8192
abv f8 $A $B8 --n 5m --batch 64,128 --k 4096,8192
echo "--- exact ($(date -u +%T))"
exact 1m_8 $B8 normal Dot --n 1m --batch 16,64,128 --k 4096,8192,16384
echo "--- done ($(date -u +%T))"
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call7.tar.gz -C $OUT c7 && rm -rf $D
