# Call 2: call 1's build (n) and main (b): where the time of large k goes, kernel by kernel
# (Nsight Compute, kdur), pinned results (select and download behind the scan); and
# main's unchanged paths (k = 128, 8192) again, two rounds of b n n b.
D=$OUT/c2; . bench/results/h200-v34-runs/common.sh
echo "--- kernel durations, n ($(date -u +%T))"
for b in 16 64 128; do
  for k in 128 8192 16384; do
    kdur f${b}_$k X=1 --n 5m --batch $b --k $k --results pinned
  done
done
kdur m64_8192 X=1 --n 1m --batch 64 --k 8192 --results pinned
kdur m16_8192 X=1 --n 1m --batch 16 --k 8192 --results pinned
kdur f1024_8192 X=1 --n 5m --batch 1024 --k 8192 --results pinned
echo "--- A/B ($(date -u +%T))"
ab f8 --n 5m --batch 1,16,64,128,1024 --k 128,1024,8192
ab f8p --n 5m --batch 16,64,128 --k 1024,8192 --results pinned
ab m8 --n 1m --batch 16,64,128 --k 128,1024,8192
ab f8r --n 5m --batch 1,16,64,128,1024 --k 128,1024,8192
echo "--- done ($(date -u +%T))"
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call2.tar.gz -C $OUT c2 && rm -rf $D
