# Call 1: n = main with the speculative select at any batch (before: up to 128 queries).
# Above 128 queries SIEVE_CUDA_SPECULATE=0 is main's behaviour, so one build A/Bs it:
# abv a = SIEVE_CUDA_SPECULATE=0, b = default, a b b a. Exactness against the materialized
# path at 129-1024 queries; GPU kernel suite; memcheck and racecheck at up to 300 queries.
D=$OUT/c1; . bench/results/h200-v33-runs/common.sh
echo "--- exact ($(date -u +%T))"
for dd in normal ties band; do
  exact 1m_$dd X=1 $dd Dot --n 1m --batch 129,300,1024 --k 1,10,128,1024,8192
done
exact 1m_pinned X=1 normal Euclid --n 1m --batch 200,1024 --k 10,128,1024,8192 --results pinned
exact 5m X=1 normal Dot --n 5m --batch 1024 --k 10,128,1024 --results pinned
exact 5m_bf16 X=1 normal Cosine --n 5m --dtype bfloat16 --batch 256,1024 --k 10,128
echo "--- A/B, a = SIEVE_CUDA_SPECULATE=0 (main), b = default ($(date -u +%T))"
abv f5 SIEVE_CUDA_SPECULATE=0 X=1 --n 5m --batch 256,512,1024 --k 10,128
abv f5p SIEVE_CUDA_SPECULATE=0 X=1 --results pinned --n 5m --batch 256,1024 --k 10,128,1024,8192
abv b5p SIEVE_CUDA_SPECULATE=0 X=1 --results pinned --n 5m --dtype bfloat16 --batch 1024 --k 128
abv f1 SIEVE_CUDA_SPECULATE=0 X=1 --n 1m --batch 256,1024 --k 10,128
abv f1p SIEVE_CUDA_SPECULATE=0 X=1 --results pinned --n 1m --batch 256,1024 --k 128,1024,8192
echo "--- tests ($(date -u +%T))"
timeout 200 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "test_knn_cuda rc $?: $(tail -1 $D/test_knn_cuda.log)"
echo "--- sanitizers ($(date -u +%T))"
SA="knn --n 70000 --dim 96 --batch 1,130,300 --k 1,100,300 --repeat 1 --warmup 0 --dtype float16,float32 --metric Euclid --rows-per-page 256"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $SB $SA --no-materialized > $D/sanitize_memcheck.log 2>&1
echo "memcheck rc $?: $(tail -1 $D/sanitize_memcheck.log)"
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 3 $SB $SA --no-materialized > $D/sanitize_racecheck.log 2>&1
echo "racecheck rc $?: $(tail -1 $D/sanitize_racecheck.log)"
echo "--- done ($(date -u +%T))"
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call1.tar.gz -C $OUT c1 && rm -rf $D
