# Call 5: call 4's build (n; main as b): whether 5M B = 128 k = 8192 pinned is slower
# (call 4: +3.7% in one round, -6.2% in the other; the path is main's: one block a query):
# select kernel durations of both builds, ab twice; then the server suite with the server
# on the GPU, REST exactness (bench/gpu/run.sh rest) and bench/gpu/validate.sh perf (the
# sweep beside torch and the end-to-end server run; $OUT/validate.tar.xz).
D=$OUT/c5; . bench/results/h200-v34-runs/common.sh
echo "--- kernel durations ($(date -u +%T))"
kdur n_f128_8192 X=1 --n 5m --batch 128 --k 8192 --results pinned
SB=$SBB kdur b_f128_8192 X=1 --n 5m --batch 128 --k 8192 --results pinned
SB=$SBN
kdur n_f128_8192b X=1 --n 5m --batch 128 --k 8192 --results pinned
echo "--- A/B ($(date -u +%T))"
ab fp --n 5m --batch 96,128 --k 4096,8192 --results pinned
ab fq --n 5m --batch 96,128 --k 4096,8192 --results pinned
echo "--- server, rest ($(date -u +%T))"
OUT=$D timeout 100 bench/gpu/run.sh server 2>&1 | tail -3
OUT=$D timeout 200 bench/gpu/run.sh rest 2>&1 | tail -6
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call5.tar.gz -C $OUT c5 && rm -rf $D
echo "--- perf ($(date -u +%T))"
timeout 330 bash bench/gpu/validate.sh perf 2>&1 | tail -25
echo "--- done ($(date -u +%T))"
