# Call 9: main's final build: whether a sample under the default minimum of 16,384 rows
# pays at small k (sieve-bench --sample-rows; abs o n n o, o = the explicit sample, n =
# the default), 8,192 and 4,096 rows, pageable, 1M and 5M rows, B = 1-128, k = 10-1,024.
D=$OUT/c9; . bench/results/h200-v34-runs/common.sh
echo "--- samples ($(date -u +%T))"
abs m8k 8192 --n 1m --batch 1,16,64,128 --k 10,128,1024
abs m4k 4096 --n 1m --batch 1,16,64,128 --k 10,128
abs f8k 8192 --n 5m --batch 16,64,128 --k 10,128
echo "--- exact ($(date -u +%T))"
exact m4k X=1 normal Dot --n 1m --batch 16,128 --k 10,128 --sample-rows 4096
echo "--- done ($(date -u +%T))"
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call9.tar.gz -C $OUT c9 && rm -rf $D
