# Call 7: the copy threads alone (call 6: 6-12 MB pipelined downloads, memcpy, up to 0.1 ms
# slower than main's build at 1M rows; the thread count is the difference there): this
# build with SIEVE_CUDA_COPY_THREADS=8 (a) and the default 15 (b), a b b a, twice.
D=$OUT/c7; . bench/results/h200-v30-runs/common.sh
echo "--- ($(date -u +%T))"
for r in 1 2; do
  abv m$r SIEVE_CUDA_COPY_THREADS=8 X=1 --n 1m --batch 64,128,1024 --k 4096,8192,16384
  abv f$r SIEVE_CUDA_COPY_THREADS=8 X=1 --n 5m --batch 64,128 --k 4096,8192
done
echo "--- done ($(date -u +%T))"
tar czf $OUT/call7.tar.gz -C $OUT c7 && rm -rf $D
