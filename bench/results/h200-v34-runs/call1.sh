# Call 1: n = main with the block select in parts (a query keeping more than one block
# sorts split over up to four blocks by histogram bins; the block path and the speculative
# select up to k = 36864, before 12288 and 8192); b = main. GPU kernel suite; exactness
# against the materialized path at k = 12288-36864; ab b n n b at k = 16384 (the shapes it
# changes) and k = 128 / 8192 (unchanged paths); memcheck and racecheck of split selects.
D=$OUT/c1; . bench/results/h200-v34-runs/common.sh
echo "--- tests ($(date -u +%T))"
timeout 330 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "test_knn_cuda rc $?: $(tail -1 $D/test_knn_cuda.log)"
echo "--- exact ($(date -u +%T))"
exact 1m X=1 normal Dot --n 1m --batch 1,16,128,1024 --k 12288,16384,24000,36864
exact 1m_ties X=1 ties Dot --n 1m --batch 7,64 --k 16384
exact 1m_band X=1 band Euclid --n 1m --batch 7,64 --k 16384,30000
exact 5m_pinned X=1 normal Dot --n 5m --batch 1,64,1024 --k 16384 --results pinned
exact 5m_bf16 X=1 normal Cosine --n 5m --dtype bfloat16 --batch 16,128 --k 16384
echo "--- A/B ($(date -u +%T))"
ab m16 --n 1m --batch 1,16,64,128,1024 --k 16384
ab f16 --n 5m --batch 1,16,64,128,1024 --k 16384
ab f16p --n 5m --batch 1,16,64,128,1024 --k 16384 --results pinned
ab f8 --n 5m --batch 1,64,1024 --k 128,8192
echo "--- sanitizers ($(date -u +%T))"
SA="knn --n 70000 --dim 96 --batch 1,130 --k 1500,2000 --repeat 1 --warmup 0 --dtype float16 --metric Euclid --rows-per-page 256"
SIEVE_CUDA_SELECT=small timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $SB $SA --no-materialized > $D/sanitize_memcheck.log 2>&1
echo "memcheck small rc $?: $(tail -1 $D/sanitize_memcheck.log)"
SIEVE_CUDA_SELECT=small timeout 60 compute-sanitizer --tool racecheck --error-exitcode 3 $SB $SA --no-materialized > $D/sanitize_racecheck.log 2>&1
echo "racecheck small rc $?: $(tail -1 $D/sanitize_racecheck.log)"
SB2="knn --n 300000 --dim 96 --batch 3 --k 13000 --repeat 1 --warmup 0 --dtype float16 --rows-per-page 256"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $SB $SB2 --no-materialized > $D/sanitize_memcheck2.log 2>&1
echo "memcheck k=13000 rc $?: $(tail -1 $D/sanitize_memcheck2.log)"
echo "--- done ($(date -u +%T))"
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call1.tar.gz -C $OUT c1 && rm -rf $D
