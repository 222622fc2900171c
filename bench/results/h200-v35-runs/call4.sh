# Call 4: n = main at 18166dd, b = main before it. The sweep of call 3 had 1M B = 16 at
# k = 8192 / 16384 slower than the sweep before (0.619 -> 0.684, 0.888 -> 0.949 ms), shapes
# calls 1-2 did not A/B: ab b n n b at large k, twice; then the server suite with the
# server on the GPU and REST exactness (bench/gpu/run.sh server, rest).
D=$OUT/c4; . bench/results/h200-v35-runs/common.sh
echo "--- A/B ($(date -u +%T))"
ab m --n 1m --batch 1,16,64 --k 4096,8192,16384
ab m2 --n 1m --batch 1,16,64 --k 4096,8192,16384
ab fp --n 5m --batch 1,16,64 --k 8192,16384 --results pinned
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
echo "--- kernel durations ($(date -u +%T))"
SB=$SBB kdur b_b16_8k X=1 --n 1m --batch 16 --k 8192
kdur n_b16_8k X=1 --n 1m --batch 16 --k 8192
echo "--- server, rest ($(date -u +%T))"
OUT=$D timeout 100 bench/gpu/run.sh server 2>&1 | tail -3
OUT=$D timeout 200 bench/gpu/run.sh rest 2>&1 | tail -6
tar czf $OUT/call4.tar.gz -C $OUT c4 && rm -rf $D
echo "--- done ($(date -u +%T))"
