# Device call 1: the wgmma attention kernel's rings (SIEVE_CUDA_WG_RING: STxLA, "t" = a
# tile's row maxima and sums as trees), A/B at 128K block-sparse prefill and dense 32K, two
# rounds in opposite orders; one prefill with the wgmma block scores; then the dense,
# block-sparse (the forced-wgmma cases now one test each) and grouped sparse suites.
D=$OUT/c1; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build; B=$N/bench/sieve-bench
nvidia-smi --query-gpu=name,driver_version,clocks.sm,clocks.max.sm --format=csv > $D/gpu.txt
ab() { # ring round
  SIEVE_CUDA_WG_RING=$1 timeout 40 $B attention prefill --device cuda --seq 128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_$1_$2.json > $D/prefill_$1_$2.txt 2>&1
  echo "prefill $1 round $2 rc $?: $(tail -1 $D/prefill_$1_$2.txt)" | tee -a $D/summary.txt
  SIEVE_CUDA_WG_RING=$1 timeout 30 $B attention dense --device cuda --seq 32k --repeat 3 --warmup 1 --check-tokens 4 --json $D/dense_$1_$2.json > $D/dense_$1_$2.txt 2>&1
  echo "dense $1 round $2 rc $?: $(tail -1 $D/dense_$1_$2.txt)" | tee -a $D/summary.txt
}
for r in 4x2 5x2 6x2 6x3 5x2t 6x3t; do ab $r 1; done
for r in 6x3t 5x2t 6x3 6x2 5x2 4x2; do ab $r 2; done
SIEVE_CUDA_BSP_SCORE=wgmma SIEVE_CUDA_WG_RING=5x2t timeout 40 $B attention prefill --device cuda --seq 128k --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_wgscore.json > $D/prefill_wgscore.txt 2>&1
echo "prefill wgmma scores 5x2t rc $?: $(tail -1 $D/prefill_wgscore.txt)" | tee -a $D/summary.txt
head -30 $D/prefill_4x2_1.txt > $D/prefill_header.txt
# the suites in what is left of 560 s (each cut at its share; the archive must be written)
for t in test_attention_cuda test_block_sparse_cuda test_sparse_attn_cuda; do
  left=$((560 - SECONDS)); [ $left -gt 200 ] && left=200; [ $left -lt 10 ] && break
  timeout $left $N/tests/$t -j16 --verbose > $D/$t.txt 2>&1; echo "$t rc $? (limit $left s)" | tee -a $D/summary.txt
  grep -E "Synthesis|FAIL|Timeout|Crash|Assert" $D/$t.txt | head -8 >> $D/summary.txt
done
tar czf $OUT/call1.tar.gz -C $OUT c1
