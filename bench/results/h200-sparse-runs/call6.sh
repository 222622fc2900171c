# Device call 6: the final build (slices up to 32) and scripts: the GPU suite (and with 3
# slices forced), memcheck, the CPU suite; run.sh's attention stage; decode and short
# shapes (twice); L, k, MQA and 2 heads a kv head.
D=$OUT/c6; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > $D/info.txt
timeout 120 $N/tests/test_sparse_attn_cuda --jobs 4 --verbose=1 > $D/test.txt 2>&1; echo "suite rc $?" | tee -a $D/summary.txt
grep -E "FAIL|ssert|Synthesis" $D/test.txt | head -12 | tee -a $D/summary.txt
SIEVE_CUDA_SA_SLICES=3 timeout 120 $N/tests/test_sparse_attn_cuda --jobs 4 --verbose=1 > $D/test_sl3.txt 2>&1; echo "suite (3 slices forced) rc $?" | tee -a $D/summary.txt
grep -E "FAIL|ssert|Synthesis" $D/test_sl3.txt | head -12 | tee -a $D/summary.txt
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_sparse_attn_cuda --filter 'sparse_attn_cuda/@(tiny_shapes|messy_rows_f16|errors|gqa_overlap_bf16)' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck.txt >> $D/summary.txt
timeout 60 $N/tests/test_kernels_sparse_attn_cpu --jobs 4 > $D/test_cpu.txt 2>&1; echo "CPU suite rc $?" | tee -a $D/summary.txt
OUT=$D timeout 420 bash bench/gpu/run.sh attention > $D/stage.txt 2>&1; echo "attention stage rc $?" | tee -a $D/summary.txt
tail -34 $D/stage.txt >> $D/summary.txt
Dc="attention sparse --device cuda --keys 128k --queries 1,16,64,256 --k 2048 --group 16 --share 0.95 --check-tokens 2"
for r in n1:$N n2:$N; do
  IFS=: read l b <<< "$r"
  timeout 60 $b/bench/sieve-bench $Dc --json $D/dec.json > $D/dec_$l.txt 2>&1
  echo "== $l" >> $D/summary.txt; tail -4 $D/dec_$l.txt >> $D/summary.txt
done
S="$N/bench/sieve-bench attention sparse --device cuda --json $D/more.json --check-tokens 2"
timeout 60 $S --keys 32k --queries 1,16,64,256 --k 2048 --group 16 --share 0.95 > $D/decode32k.txt 2>&1; echo "decode 32k rc $?" >> $D/summary.txt; tail -4 $D/decode32k.txt >> $D/summary.txt
timeout 60 $S --keys 32k,128k --queries 2048 --k 512,2048 --group 16 --share 0.95 > $D/lk.txt 2>&1; echo "L/k rc $?" >> $D/summary.txt; tail -4 $D/lk.txt >> $D/summary.txt
timeout 60 $S --q-heads 64 --kv-heads 1 --keys 128k --queries 2048 --k 2048 --group 1,2,16 --share 0.95 --repeat 5 > $D/mqa.txt 2>&1; echo "mqa rc $?" >> $D/summary.txt; tail -3 $D/mqa.txt >> $D/summary.txt
timeout 60 $S --q-heads 16 --kv-heads 8 --keys 128k --queries 2048 --k 2048 --group 16,32 --share 0.95 --repeat 5 > $D/r2.txt 2>&1; echo "R=2 rc $?" >> $D/summary.txt; tail -2 $D/r2.txt >> $D/summary.txt
timeout 60 $S --dtype float16 --head-dim 64 --v-dim 64 --keys 128k --queries 2048 --k 2048 --group 16 --share 1,0.95,0.9 > $D/f16d64.txt 2>&1; echo "f16 d64 rc $?" >> $D/summary.txt; tail -3 $D/f16d64.txt >> $D/summary.txt
tar czf $OUT/call6.tar.gz -C $OUT c6
