# Call 6: main's final build (1f05d25: the speculative select at any batch and the host
# copies in one loop): server suite with the server on the GPU (bench/gpu/run.sh server,
# log in c6/), then bench/gpu/validate.sh perf (the sweep beside torch and the end-to-end
# server run; $OUT/validate.tar.xz).
mkdir -p $OUT/c6
OUT=$OUT/c6 timeout 100 bench/gpu/run.sh server 2>&1 | tail -3
timeout 330 bash bench/gpu/validate.sh perf 2>&1 | tail -25
tar czf $OUT/call6.tar.gz -C $OUT c6 && rm -rf $OUT/c6
