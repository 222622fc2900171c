# Call 3: n = call 1's build with the split for speed as well (where the batch leaves SMs
# idle a query keeping more than 4096 is split into parts of at least 2048, up to eight
# parts); b = main. GPU kernel suite; exactness at the split shapes; select kernel
# durations (Nsight Compute) of n and of b; ab b n n b; memcheck and racecheck of the split.
D=$OUT/c3; . bench/results/h200-v34-runs/common.sh
echo "--- tests ($(date -u +%T))"
timeout 330 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "test_knn_cuda rc $?: $(tail -1 $D/test_knn_cuda.log)"
echo "--- exact ($(date -u +%T))"
exact 1m X=1 normal Dot --n 1m --batch 1,7,16,32,64 --k 3000,4096,8192,16384,36864
exact 1m_ties X=1 ties Dot --n 1m --batch 7 --k 8192
exact 1m_band X=1 band Euclid --n 1m --batch 7,33 --k 6000,16384
exact 5m_pinned X=1 normal Dot --n 5m --batch 1,16,64 --k 4096,8192,16384 --results pinned
exact 5m_bf16 X=1 normal Cosine --n 5m --dtype bfloat16 --batch 16 --k 8192
echo "--- kernel durations ($(date -u +%T))"
kdur n_f16_8192 X=1 --n 5m --batch 16 --k 8192 --results pinned
kdur n_f16_1024 X=1 --n 5m --batch 16 --k 1024 --results pinned
kdur n_m1_8192 X=1 --n 1m --batch 1 --k 8192 --results pinned
kdur n_m64_8192 X=1 --n 1m --batch 64 --k 8192 --results pinned
SB=$SBB kdur b_f16_8192 X=1 --n 5m --batch 16 --k 8192 --results pinned
SB=$SBB kdur b_f16_1024 X=1 --n 5m --batch 16 --k 1024 --results pinned
SB=$SBB kdur b_m1_8192 X=1 --n 1m --batch 1 --k 8192 --results pinned
SB=$SBB kdur b_m64_8192 X=1 --n 1m --batch 64 --k 8192 --results pinned
SB=$SBN
echo "--- A/B ($(date -u +%T))"
ab m --n 1m --batch 1,16,32,64,128 --k 1024,4096,8192,16384
ab fp --n 5m --batch 1,16,64,128 --k 1024,8192,16384 --results pinned
ab f --n 5m --batch 16,64 --k 128,8192
echo "--- sanitizers ($(date -u +%T))"
SA="knn --n 300000 --dim 96 --batch 1,3 --k 6000 --repeat 1 --warmup 0 --dtype float16 --metric Euclid --rows-per-page 256"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $SB $SA --no-materialized > $D/sanitize_memcheck.log 2>&1
echo "memcheck rc $?: $(tail -1 $D/sanitize_memcheck.log)"
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 3 $SB $SA --no-materialized > $D/sanitize_racecheck.log 2>&1
echo "racecheck rc $?: $(tail -1 $D/sanitize_racecheck.log)"
echo "--- done ($(date -u +%T))"
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call3.tar.gz -C $OUT c3 && rm -rf $D
