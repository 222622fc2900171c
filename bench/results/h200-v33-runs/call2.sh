# Call 2: call 1's build (n, the speculative select at any batch): server suite and REST
# exactness with the server on the GPU (bench/gpu/run.sh server rest, logs in c2/), then
# bench/gpu/validate.sh perf (the sweep beside torch and the end-to-end server run;
# $OUT/validate.tar.xz).
mkdir -p $OUT/c2
OUT=$OUT/c2 timeout 100 bench/gpu/run.sh server 2>&1 | tail -3
OUT=$OUT/c2 timeout 170 bench/gpu/run.sh rest 2>&1 | tail -6
timeout 320 bash bench/gpu/validate.sh perf 2>&1 | tail -45
tar czf $OUT/call2.tar.gz -C $OUT c2 && rm -rf $OUT/c2
