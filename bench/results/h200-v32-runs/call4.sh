# Call 4: the build of call 3 (n): server suite and REST exactness with the server on the
# GPU (bench/gpu/run.sh server rest, logs in c4/), then bench/gpu/validate.sh perf (the
# sweep beside torch and the end-to-end server run; $OUT/validate.tar.xz).
mkdir -p $OUT/c4
OUT=$OUT/c4 timeout 100 bench/gpu/run.sh server 2>&1 | tail -3
OUT=$OUT/c4 timeout 200 bench/gpu/run.sh rest 2>&1 | tail -6
timeout 330 bash bench/gpu/validate.sh perf 2>&1 | tail -45
tar czf $OUT/call4.tar.gz -C $OUT c4 && rm -rf $OUT/c4
