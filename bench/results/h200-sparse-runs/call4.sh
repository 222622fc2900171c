# Device call 4: the final build and scripts: the GPU suite; run.sh's attention stage (the
# indexer's sweep beside torch, the sparse sweep over group and share, one report and its
# plots); decode-size T, shorter L and smaller k, MQA and 2 heads a kv head.
D=$OUT/c4; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,driver_version --format=csv > $D/info.txt
timeout 120 $N/tests/test_sparse_attn_cuda --jobs 4 --verbose=1 > $D/test.txt 2>&1; echo "suite rc $?" | tee -a $D/summary.txt
grep -E "FAIL|ssert|Synthesis" $D/test.txt | head -12 | tee -a $D/summary.txt
OUT=$D timeout 420 bash bench/gpu/run.sh attention > $D/stage.txt 2>&1; echo "attention stage rc $?" | tee -a $D/summary.txt
tail -32 $D/stage.txt >> $D/summary.txt
S="$N/bench/sieve-bench attention sparse --device cuda --json $D/more.json --check-tokens 2"
timeout 60 $S --keys 32k,128k --queries 1,16,64,256 --k 2048 --group 16 --share 0.95 > $D/decode.txt 2>&1; echo "decode rc $?" >> $D/summary.txt; tail -8 $D/decode.txt >> $D/summary.txt
timeout 60 $S --keys 32k,128k --queries 2048 --k 512,2048 --group 16 --share 0.95 > $D/lk.txt 2>&1; echo "L/k rc $?" >> $D/summary.txt; tail -4 $D/lk.txt >> $D/summary.txt
timeout 60 $S --q-heads 64 --kv-heads 1 --keys 128k --queries 2048 --k 2048 --group 1,2,16 --share 0.95 --repeat 5 > $D/mqa.txt 2>&1; echo "mqa rc $?" >> $D/summary.txt; tail -3 $D/mqa.txt >> $D/summary.txt
timeout 60 $S --q-heads 16 --kv-heads 8 --keys 128k --queries 2048 --k 2048 --group 16,32 --share 0.95 --repeat 5 > $D/r2.txt 2>&1; echo "R=2 rc $?" >> $D/summary.txt; tail -2 $D/r2.txt >> $D/summary.txt
timeout 60 $S --dtype float16 --head-dim 64 --v-dim 64 --keys 128k --queries 2048 --k 2048 --group 16 --share 1,0.95,0.9 > $D/f16d64.txt 2>&1; echo "f16 d64 rc $?" >> $D/summary.txt; tail -3 $D/f16d64.txt >> $D/summary.txt
tar czf $OUT/call4.tar.gz -C $OUT c4
