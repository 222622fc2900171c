# Call 6: main's final build (n, e6f9dda; the bundle of calls 4-5) and main before it (b):
# the sweep's two shapes at 8,841,823 rows that moved (B = 64 k = 8192 just over 1.2x of
# the floor; the k-cost of B = 64 and 1024 over 15%): ab twice, pageable.
D=$OUT/c6; . bench/results/h200-v34-runs/common.sh
echo "--- A/B ($(date -u +%T))"
ab ms --n 8841823 --batch 64 --k 128,8192,16384
ab mt --n 8841823 --batch 1024 --k 128,8192
ab ms2 --n 8841823 --batch 64 --k 128,8192,16384
echo "--- done ($(date -u +%T))"
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call6.tar.gz -C $OUT c6 && rm -rf $D
