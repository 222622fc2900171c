# Device call 4: the kernel with fewer instructions a tile (the queries only in registers;
# the scale folded into the exponent, the queries carrying its sign; descriptors as one add
# to a slot's base; cp.async with immediate offsets) against call 3's build (bundle gpu-old:
# queries in registers on the ring of 5, the scale applied to every score), A/B at 128K
# prefill and dense 32K in alternating order; the other rings; dense 8K-128K and prefill 32K;
# torch flash and cuDNN; the three suites; memcheck of the forced-wgmma dense cases.
D=$OUT/c4; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
bash bench/gpu/unpack.sh gpu-old || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $D/gpu.txt
ab() { # bundle tag
  timeout 40 .deps/$1/build/bench/sieve-bench attention prefill --device cuda --seq 128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_$2.json > $D/prefill_$2.txt 2>&1
  echo "prefill $2 rc $?: $(tail -1 $D/prefill_$2.txt)" | tee -a $D/summary.txt
  timeout 30 .deps/$1/build/bench/sieve-bench attention dense --device cuda --seq 32k --repeat 3 --warmup 1 --check-tokens 4 --json $D/dense_$2.json > $D/dense_$2.txt 2>&1
  echo "dense $2 rc $?: $(tail -1 $D/dense_$2.txt)" | tee -a $D/summary.txt
}
ab gpu-old old1; ab gpu new1; ab gpu new2; ab gpu-old old2
N=.deps/gpu/build; B=$N/bench/sieve-bench
for r in 6x2 6x3; do
  SIEVE_CUDA_WG_RING=$r timeout 40 $B attention prefill --device cuda --seq 128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_$r.json > $D/prefill_$r.txt 2>&1
  echo "prefill ring $r rc $?: $(tail -1 $D/prefill_$r.txt)" | tee -a $D/summary.txt
done
timeout 60 python3 bench/torch_attention.py dense --seq 8k,32k,128k --backends flash,cudnn --repeat 3 --warmup 1 --json $D/torch.json > $D/torch.txt 2>&1; echo "torch rc $?" | tee -a $D/summary.txt
grep -v '^{' $D/torch.txt >> $D/summary.txt
timeout 60 $B attention dense --device cuda --seq 8k,32k,128k --repeat 3 --warmup 1 --check-tokens 4 --json $D/dense_all.json > $D/dense_all.txt 2>&1; echo "dense 8k-128k rc $?" | tee -a $D/summary.txt
tail -3 $D/dense_all.txt >> $D/summary.txt
timeout 40 $B attention prefill --device cuda --seq 32k,128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_final.json > $D/prefill_final.txt 2>&1; echo "prefill 32k,128k rc $?" | tee -a $D/summary.txt
tail -2 $D/prefill_final.txt >> $D/summary.txt
head -3 $D/prefill_new1.txt > $D/prefill_header.txt
for t in test_attention_cuda test_block_sparse_cuda test_sparse_attn_cuda; do
  left=$((540 - SECONDS)); [ $left -gt 150 ] && left=150; [ $left -lt 10 ] && break
  timeout $left $N/tests/$t -j16 --verbose > $D/$t.txt 2>&1; echo "$t rc $? (limit $left s)" | tee -a $D/summary.txt
  grep -E "Synthesis|FAIL|Timeout|Crash|Assert" $D/$t.txt | head -8 >> $D/summary.txt
done
left=$((560 - SECONDS)); [ $left -gt 10 ] && { timeout $left compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_attention_cuda --filter 'attention_cuda/wgmma_*' > $D/memcheck_dense.txt 2>&1; echo "memcheck dense rc $? (limit $left)" | tee -a $D/summary.txt; tail -2 $D/memcheck_dense.txt >> $D/summary.txt; }
tar czf $OUT/call4.tar.gz -C $OUT c4
