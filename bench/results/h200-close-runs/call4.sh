# Call 4: racecheck of the two shapes call 3's racecheck did not reach before its time ran
# out (float32, B = 70, k = 1 and 100; the same flags as bench/gpu/run.sh sanitize).
bench/gpu/unpack.sh gpu; export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
timeout 400 compute-sanitizer --tool racecheck --error-exitcode 3 .deps/gpu/build/bench/sieve-bench knn \
  --n 70000 --dim 96 --batch 70 --k 1,100 --repeat 1 --warmup 0 --mat-repeat 1 \
  --dtype float32 --metric Euclid --rows-per-page 256 > $OUT/sanitize_racecheck_call4.log 2>&1
echo "racecheck exit $?"; cat $OUT/sanitize_racecheck_call4.log
