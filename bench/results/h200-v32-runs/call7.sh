# Call 7: the warp-form tightening sites (the staged tiles, the producer warps' helpers, the
# direct admissions after the tile) tighten at k and then every k / 4 admissions (a power of
# two, at least 64) instead of at k, 2k, 4k, ... and every max(k, 256) (n: the build under
# test; b: main, e6eed09). Exactness against the materialized path; A/B b n n b, results
# pinned; GPU kernel suite; memcheck and racecheck on run.sh sanitize's shapes (k = 300
# added; racecheck without the materialized path).
D=$OUT/c7; . bench/results/h200-v32-runs/common.sh
echo "--- exact ($(date -u +%T))"
for dd in normal ties band dups; do
  m=Dot; [ $dd = band ] && m=Cosine; [ $dd = dups ] && m=Euclid
  exact 1m_$dd X=1 $dd $m --n 1m --batch 1,16,64,128,1024 --k 10,128,1024,8192
done
exact 5m_normal X=1 normal Dot --n 5m --batch 16,128 --k 10,1024,16384
echo "--- A/B, pinned ($(date -u +%T))"
ab m --results pinned --n 1m --batch 1,16,64,128,1024 --k 10,128,1024,8192
ab f --results pinned --n 5m --batch 16,64,128,1024 --k 10,128,1024,8192
ab h --results pinned --n 8841823 --batch 64 --k 10,128,8192
echo "--- tests ($(date -u +%T))"
timeout 200 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "test_knn_cuda rc $?: $(tail -1 $D/test_knn_cuda.log)"
echo "--- sanitizers ($(date -u +%T))"
SA="knn --n 70000 --dim 96 --batch 1,13,40,70 --k 1,100,300 --repeat 1 --warmup 0 --dtype float16,float32 --metric Euclid --rows-per-page 256"
timeout 100 compute-sanitizer --tool memcheck --error-exitcode 3 $SB $SA --no-materialized > $D/sanitize_memcheck.log 2>&1
echo "memcheck rc $?: $(tail -1 $D/sanitize_memcheck.log)"
timeout 100 compute-sanitizer --tool racecheck --error-exitcode 3 $SB $SA --no-materialized > $D/sanitize_racecheck.log 2>&1
echo "racecheck rc $?: $(tail -1 $D/sanitize_racecheck.log)"
echo "--- done ($(date -u +%T))"
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call7.tar.gz -C $OUT c7 && rm -rf $D
