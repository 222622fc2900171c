# Call 2: the build of call 1. compute-sanitizer: memcheck on run.sh sanitize's shapes; the
# racecheck shapes that bench/results/h200-v30-runs/validate_check cut short (float32,
# B = 70); memcheck and racecheck on a streamed download (1024 x 2048 results, 25 MB:
# 32-bit rows, the streamer pool). Then a second, wider round of call 1's A/B/C.
D=$OUT/c2; . bench/results/h200-v31-runs/common.sh
B=.deps/gpu/build
san() {
  local l=$1 tool=$2; shift 2
  timeout 200 compute-sanitizer --tool $tool --error-exitcode 3 $B/bench/sieve-bench knn "$@" \
    > $D/sanitize_$l.log 2>&1
  echo "$l ($tool) rc $?: $(grep -c ' yes ' $D/sanitize_$l.log) yes; $(grep -E 'ERROR SUMMARY|RACECHECK SUMMARY' $D/sanitize_$l.log)"
}
echo "--- sanitize ($(date -u +%T))"
san memcheck memcheck --n 70000 --dim 96 --batch 1,13,40,70 --k 1,100 --repeat 1 --warmup 0 \
  --mat-repeat 1 --dtype float16,float32 --metric Euclid --rows-per-page 256
san racecheck_f32_b70 racecheck --n 70000 --dim 96 --batch 70 --k 1,100 --repeat 1 --warmup 0 \
  --mat-repeat 1 --dtype float32 --metric Euclid --rows-per-page 256
san memcheck_stream memcheck --n 70000 --dim 96 --batch 1024 --k 2048 --repeat 1 --warmup 0 \
  --mat-repeat 1 --dtype float16 --metric Dot --rows-per-page 256
san racecheck_stream racecheck --n 70000 --dim 96 --batch 1024 --k 2048 --repeat 1 --warmup 0 \
  --no-materialized --dtype float16 --metric Dot --rows-per-page 256
echo "--- A/B/C ($(date -u +%T))"
ab3 m --n 1m --batch 1,16,64,128,1024 --k 128,1024,4096,8192,16384
ab3 f --n 5m --batch 16,64,128,1024 --k 128,4096,8192,16384
ab3 h --n 8841823 --batch 64,128,1024 --k 128,8192,16384
echo "--- done ($(date -u +%T))"
tar czf $OUT/call2.tar.gz -C $OUT c2 && rm -rf $D
