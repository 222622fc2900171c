# Call 5: the build of call 4 (host copy threads on by default): the device page cache
# suite, the server suite with the server on the GPU and the REST exactness test
# (tests/python/test_rest_exact.py, 300,000 x 128) with the server on the GPU.
mkdir -p $OUT/c5
bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
echo "--- devcache ($(date -u +%T))"
timeout 120 .deps/gpu/build/tests/test_devcache --verbose=0 > $OUT/c5/test_devcache.log 2>&1
echo "rc $?"; grep -E "^\[(FAIL|====)|assert" $OUT/c5/test_devcache.log | tail -4
echo "--- server ($(date -u +%T))"
OUT=$OUT/c5 timeout 100 bench/gpu/run.sh server 2>&1 | tail -3
echo "--- rest ($(date -u +%T))"
OUT=$OUT/c5 timeout 200 bench/gpu/run.sh rest 2>&1 | tail -12
echo "--- done ($(date -u +%T))"
tar czf $OUT/call5.tar.gz -C $OUT c5 && rm -rf $OUT/c5
