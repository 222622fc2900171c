# Call 5: the sweep of call 4 found some staged shapes 4-9% slower than the sweep of main
# (other calls, pageable results: 1M B = 64 k = 8192 and 16384, B = 16 k = 16384, 5M B = 64
# k = 1024 and 8192, B = 128 k = 128). A/B/C in one call, r b n n b r: n the build of calls
# 3-4; r the same with the proposal's rank never below the rule before (max of both); b main.
D=$OUT/c5; . bench/results/h200-v32-runs/common.sh
echo "--- A/B/C, pageable ($(date -u +%T))"
ab3r p --n 1m --batch 16,64,128 --k 128,1024,8192,16384
ab3r q --n 5m --batch 16,64,128 --k 128,1024,8192,16384
echo "--- A/B/C, pinned ($(date -u +%T))"
ab3r u --results pinned --n 1m --batch 64 --k 1024,8192,16384
ab3r v --results pinned --n 5m --batch 64,128 --k 128,1024,8192
echo "--- done ($(date -u +%T))"
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call5.tar.gz -C $OUT c5 && rm -rf $D
