# Call 10 (one command line, same machine): compute-sanitizer memcheck and racecheck of the
# branch next/drain with HELP on, 70,000 x 96 float16 Euclid, B = 40 and 70, k = 1 and 100,
# each cut at 80 s. Outputs in call10/.
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib; mkdir -p $OUT/c10; for tool in memcheck racecheck; do SIEVE_CUDA_HELP=1 timeout 80 compute-sanitizer --tool $tool --error-exitcode 3 .deps/gpu/build/bench/sieve-bench knn --n 70000 --dim 96 --batch 40,70 --k 1,100 --repeat 1 --warmup 0 --mat-repeat 1 --dtype float16 --metric Euclid --rows-per-page 256 > $OUT/c10/help_$tool.log 2>&1; echo "$tool rc $?"; tail -3 $OUT/c10/help_$tool.log; done
