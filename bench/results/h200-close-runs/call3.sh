# Call 3 (call 2 ran bench/gpu/validate.sh check and was cut at the device tool's 10-minute
# limit during racecheck; its GPU suites and memcheck finished): the server suite and the
# REST exactness test with the server on the GPU, then bench/gpu/validate.sh perf (the sweep
# beside torch and the end-to-end server run), then racecheck for the time left.
S=$SECONDS
mkdir -p $OUT/chk
echo "--- server, rest ($(date -u +%T))"
OUT=$OUT/chk timeout 200 bench/gpu/run.sh server rest 2>&1 | tail -16
echo "--- perf ($(date -u +%T))"
timeout 330 bash bench/gpu/validate.sh perf 2>&1 | tail -40
mv $OUT/validate.tar.xz $OUT/perf.tar.xz
left=$((560 - (SECONDS - S)))
echo "--- racecheck, ${left} s ($(date -u +%T))"
if [ $left -gt 20 ]; then
  timeout $left compute-sanitizer --tool racecheck --error-exitcode 3 .deps/gpu/build/bench/sieve-bench knn \
    --n 70000 --dim 96 --batch 1,13,40,70 --k 1,100 --repeat 1 --warmup 0 --mat-repeat 1 \
    --dtype float16,float32 --metric Euclid --rows-per-page 256 > $OUT/chk/sanitize_racecheck.log 2>&1
  echo "racecheck exit $?"; grep -c "^70000" $OUT/chk/sanitize_racecheck.log; tail -3 $OUT/chk/sanitize_racecheck.log
fi
tar -C $OUT -cJf $OUT/chk.tar.xz chk && rm -rf $OUT/chk
echo "--- done ($(date -u +%T)) $((SECONDS - S)) s"
