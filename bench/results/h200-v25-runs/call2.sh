# Call 2: branch next/pipe (scan_tma_kernel PIPE: the tile's first and last K chunks as
# two half-width wgmma groups, so each half's epilogue overlaps the other half's tensor
# work; switch SIEVE_CUDA_PIPE, off by default). The GPU kernel suite with PIPE on; whole
# calls, PIPE off / on / on / off (20 timed calls a shape); the SASS of the piped 128 x 256
# staged scan (float16). Everything lands in $OUT/call2.tar.gz.
D=$OUT/c2; . bench/results/h200-v23-runs/spec_select/common.sh
nvidia-smi --query-gpu=name,clocks.sm,power.draw,temperature.gpu --format=csv > $D/gpu.txt 2>&1
echo "--- GPU suite, PIPE on ($(date -u +%T))"
SIEVE_CUDA_PIPE=1 timeout 200 .deps/gpu/build/tests/test_knn_cuda --jobs 4 --verbose=0 > $D/test_knn_cuda_pipe.log 2>&1
echo "rc $?"; grep -E "^\[(FAIL|====)|assert" $D/test_knn_cuda_pipe.log | tail -6
echo "--- timing ($(date -u +%T))"
for s in off1:0 on1:1 on2:1 off2:0; do
  IFS=: read l v <<< "$s"
  run 5m_$l gpu SIEVE_CUDA_PIPE=$v --n 5m --batch 1,16,64,128,1024 --k 10,128,8192
done
for s in off1:0 on1:1 off2:0 on2:1; do
  IFS=: read l v <<< "$s"
  run 1m_$l gpu SIEVE_CUDA_PIPE=$v --n 1m --batch 1,64,128,1024 --k 10,128,1024
done
echo "--- SASS ($(date -u +%T))"
CUOBJ=$(command -v cuobjdump || ls /usr/local/cuda*/bin/cuobjdump 2>/dev/null | head -1)
timeout 120 $CUOBJ -sass $SB > $D/sb.sass 2>&1
python3 - $D/sb.sass > $D/tma128x256s_pipe_f16.sass <<'PY'
import sys
out, on = [], False
for l in open(sys.argv[1]).read().split("\n"):
    if "Function : " in l:
        on = "scan_tma_kernel" in l and "6__half" in l and "Li128ELi256ELi4ELb1ELb1E" in l
    if on: out.append(l)
print("\n".join(out))
PY
rm -f $D/sb.sass; grep -cE "HGMMA|DEPBAR" $D/tma128x256s_pipe_f16.sass
echo "--- done ($(date -u +%T))"
tar czf $OUT/call2.tar.gz -C $OUT c2 && rm -rf $D
