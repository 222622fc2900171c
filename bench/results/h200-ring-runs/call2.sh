# Device call 2: the rings again with the queries in registers ("q": S on wgmma with A from
# registers, 207-211 registers) against the queries in shared memory, A/B at 128K prefill
# (block scores now on wgmma by default) and dense 32K, two rounds in opposite orders; torch
# flash and cuDNN at 32K and 128K in the same call; the three suites.
D=$OUT/c2; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build; B=$N/bench/sieve-bench
nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv > $D/gpu.txt
ab() { # ring round
  SIEVE_CUDA_WG_RING=$1 timeout 40 $B attention prefill --device cuda --seq 128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_$1_$2.json > $D/prefill_$1_$2.txt 2>&1
  echo "prefill $1 round $2 rc $?: $(tail -1 $D/prefill_$1_$2.txt)" | tee -a $D/summary.txt
  SIEVE_CUDA_WG_RING=$1 timeout 30 $B attention dense --device cuda --seq 32k --repeat 3 --warmup 1 --check-tokens 4 --json $D/dense_$1_$2.json > $D/dense_$1_$2.txt 2>&1
  echo "dense $1 round $2 rc $?: $(tail -1 $D/dense_$1_$2.txt)" | tee -a $D/summary.txt
}
for r in 4x2 5x2 6x3 5x2q 6x2q 6x3q; do ab $r 1; done
timeout 60 python3 bench/torch_attention.py dense --seq 32k,128k --backends flash,cudnn --repeat 3 --warmup 1 --json $D/torch.json > $D/torch.txt 2>&1; echo "torch rc $?" | tee -a $D/summary.txt
grep -v '^{' $D/torch.txt >> $D/summary.txt
for r in 6x3q 6x2q 5x2q 6x3 5x2 4x2; do ab $r 2; done
head -3 $D/prefill_5x2_1.txt > $D/prefill_header.txt
for t in test_attention_cuda test_block_sparse_cuda test_sparse_attn_cuda; do
  left=$((560 - SECONDS)); [ $left -gt 200 ] && left=200; [ $left -lt 10 ] && break
  timeout $left $N/tests/$t -j16 --verbose > $D/$t.txt 2>&1; echo "$t rc $? (limit $left s)" | tee -a $D/summary.txt
  grep -E "Synthesis|FAIL|Timeout|Crash|Assert" $D/$t.txt | head -8 >> $D/summary.txt
done
tar czf $OUT/call2.tar.gz -C $OUT c2
