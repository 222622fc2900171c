# Call 8: n = call 7's schedule for the warp-form tightening sites combined with the one
# before (a tightening at k, 2k, 4k, ... below max(k, 256), at its multiples, and every
# k / 4 after k: call 7 had lost the early retries, and with them admissions at k = 10);
# b = main (e6eed09); call 7's build (every k / 4 alone) could not travel with them (the
# working tree's limit). Exactness against the materialized path; A/B b n n b, pinned; GPU kernel suite; memcheck and
# racecheck (fused path) on run.sh sanitize's shapes with k = 300 added.
D=$OUT/c8; . bench/results/h200-v32-runs/common.sh
echo "--- exact ($(date -u +%T))"
for dd in normal ties; do
  exact 1m_$dd X=1 $dd Dot --n 1m --batch 1,16,64,128,1024 --k 10,128,1024,8192
done
echo "--- A/B, pinned ($(date -u +%T))"
ab m --results pinned --n 1m --batch 1,16,64,128,1024 --k 10,128,1024
ab f --results pinned --n 5m --batch 16,64,128,1024 --k 10,128,1024,8192
echo "--- tests ($(date -u +%T))"
timeout 200 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "test_knn_cuda rc $?: $(tail -1 $D/test_knn_cuda.log)"
echo "--- sanitizers ($(date -u +%T))"
SA="knn --n 70000 --dim 96 --batch 1,13,40,70 --k 1,100,300 --repeat 1 --warmup 0 --dtype float16,float32 --metric Euclid --rows-per-page 256"
timeout 60 compute-sanitizer --tool memcheck --error-exitcode 3 $SB $SA --no-materialized > $D/sanitize_memcheck.log 2>&1
echo "memcheck rc $?: $(tail -1 $D/sanitize_memcheck.log)"
timeout 60 compute-sanitizer --tool racecheck --error-exitcode 3 $SB $SA --no-materialized > $D/sanitize_racecheck.log 2>&1
echo "racecheck rc $?: $(tail -1 $D/sanitize_racecheck.log)"
echo "--- done ($(date -u +%T))"
python3 bench/results/h200-v32-runs/summarize.py $D > $D/summary.txt 2>&1; cat $D/summary.txt
tar czf $OUT/call8.tar.gz -C $OUT c8 && rm -rf $D
