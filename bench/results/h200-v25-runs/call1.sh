# Call 1: main at a027868 (never run on a GPU: the TMA launcher no longer zeroes the tile
# counter, rescan does before its own gate scan; the GPU tests' shared helpers): the GPU
# kernel suite, the device page cache suite, the server suite on the GPU; the SASS of the
# staged 128 x 256 TMA scan (float16), to see what a tile's out-of-line calls cost.
# Everything lands in $OUT/call1.tar.gz.
D=$OUT/c1; . bench/results/h200-v22-runs/common.sh; mkdir -p $D
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $D/gpu.txt 2>&1
echo "--- GPU suites ($(date -u +%T))"
timeout 250 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda.log 2>&1
echo "rc $?"; grep -E "^\[(FAIL|====)|assert" $D/test_knn_cuda.log | tail -6
timeout 120 .deps/gpu/build/tests/test_devcache --verbose=0 > $D/test_devcache.log 2>&1
echo "devcache rc $?"; tail -1 $D/test_devcache.log
SIEVE_BUILD_DIR=$PWD/.deps/gpu/build SIEVE_TEST_DEVICE=cuda:0 timeout 150 .deps/gpu/build/tests/test_server \
  --jobs 4 --verbose=0 > $D/test_server_gpu.log 2>&1
echo "server rc $?"; grep -E "^\[(FAIL|====)|assert" $D/test_server_gpu.log | tail -4
echo "--- SASS ($(date -u +%T))"
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
echo "cuobjdump: $CUOBJ"
if [ -n "$CUOBJ" ]; then
  timeout 120 $CUOBJ -sass $SB > $D/sb.sass 2>&1
  python3 - $D/sb.sass > $D/tma128x256s_f16.sass <<'PY'
import sys, re
txt = open(sys.argv[1]).read().split("\n")
out, on = [], False
for l in txt:
    if "Function : " in l:
        on = "scan_tma_kernel" in l and "6__half" in l and "Li128ELi256ELi4ELb1E" in l
    if on: out.append(l)
print("\n".join(out))
PY
  wc -l $D/tma128x256s_f16.sass; grep -c "CALL" $D/tma128x256s_f16.sass; grep -cE "STL|LDL" $D/tma128x256s_f16.sass
  rm -f $D/sb.sass
fi
echo "--- done ($(date -u +%T))"
tar czf $OUT/call1.tar.gz -C $OUT c1 && rm -rf $D
