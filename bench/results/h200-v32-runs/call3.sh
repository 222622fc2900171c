# Call 3: the candidate (n): call 2's build with the underfill chance SIEVE__UNDERFILL_P at
# 1e-5 (call 2 had 1e-7) and tma64x256s above k = 256 for up to 16 queries (tma64x256, the
# direct admissions, only up to 16 queries at k <= 256); r: the same with 1e-7; b: main.
# GPU kernel suite and device page cache; exactness against the materialized path;
# A/B/C r b n n b r, results pinned; compute-sanitizer memcheck (bench/gpu/run.sh sanitize's
# shapes, materialized path included) and racecheck (the same shapes, fused path only).
D=$OUT/c3; . bench/results/h200-v32-runs/common.sh
echo "--- tests ($(date -u +%T))"
timeout 300 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "test_knn_cuda rc $?: $(tail -1 $D/test_knn_cuda.log)"
timeout 120 .deps/gpu/build/tests/test_devcache --verbose=0 > $D/test_devcache.log 2>&1
echo "test_devcache rc $?: $(tail -1 $D/test_devcache.log)"
echo "--- exact ($(date -u +%T))"
for dd in normal ties band dups sorted_asc outlier; do
  m=Dot; [ $dd = band ] && m=Cosine; [ $dd = dups ] && m=Euclid
  exact 1m_$dd X=1 $dd $m --n 1m --batch 1,7,16,64,128 --k 1,10,32,256,1024,8192
done
exact 5m_normal X=1 normal Dot --n 5m --batch 1,16,128 --k 10,32,256,1024
exact 65537_ties X=1 ties Dot --n 65537 --batch 1,7,64 --k 1,10,128,1024,65537
exact 1m_bf16_f32 X=1 normal Euclid --dtype bfloat16,float32 --n 1m --batch 16,128 --k 10,300,1024
echo "--- A/B/C, pinned ($(date -u +%T))"
ab3r m --results pinned --n 1m --batch 1,4,16 --k 10,128,1024,8192
ab3r s --results pinned --n 1m --batch 64,128,1024 --k 10,32,128,1024
ab3r f --results pinned --n 5m --batch 1,16,64,128,1024 --k 10,128,1024
ab3r w --results pinned --dtype bfloat16 --n 5m --batch 128,1024 --k 128,1024
ab3r h --results pinned --n 8841823 --batch 1,64 --k 10,128
echo "--- sanitizers ($(date -u +%T))"
SA="knn --n 70000 --dim 96 --batch 1,13,40,70 --k 1,100,300 --repeat 1 --warmup 0 --dtype float16,float32 --metric Euclid --rows-per-page 256"
timeout 200 compute-sanitizer --tool memcheck --error-exitcode 3 $SB $SA --mat-repeat 1 > $D/sanitize_memcheck.log 2>&1
echo "memcheck rc $?: $(tail -1 $D/sanitize_memcheck.log)"
timeout 150 compute-sanitizer --tool racecheck --error-exitcode 3 $SB $SA --no-materialized > $D/sanitize_racecheck.log 2>&1
echo "racecheck rc $?: $(tail -1 $D/sanitize_racecheck.log)"
echo "--- done ($(date -u +%T))"
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call3.tar.gz -C $OUT c3 && rm -rf $D
