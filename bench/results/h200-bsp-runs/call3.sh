# Device call 3: the block-score kernel 32 columns at a time in registers (two CTAs an SM,
# the warps' (max, sum) merged in shared memory) and the block mode's 2-stage ring: the GPU
# suites, memcheck of the score kernel's shapes, the prefill at 32K and 128K (blocks of 64
# and 128) beside torch, and Nsight Compute of one block-mode attention launch and one
# block-score launch at 128K.
D=$OUT/c3; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
for t in test_block_sparse_cuda test_attention_cuda test_sparse_attn_cuda; do
  timeout 150 $N/tests/$t --jobs 4 --verbose=1 > $D/$t.txt 2>&1; echo "$t rc $?" | tee -a $D/summary.txt
  grep -E "FAIL|ssert|Synthesis" $D/$t.txt | head -8 | tee -a $D/summary.txt
done
timeout 120 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/@(prefill_gqa_bf16|chunk_block128_f16)' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -1 $D/memcheck.txt >> $D/summary.txt
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/chunk_block128_f16' > $D/racecheck.txt 2>&1; echo "racecheck rc $?" | tee -a $D/summary.txt
tail -1 $D/racecheck.txt >> $D/summary.txt
SB="$N/bench/sieve-bench attention prefill --device cuda --check-tokens 4"
timeout 150 $SB --seq 32k,128k --repeat 5 --warmup 1 --json $D/prefill.json > $D/prefill.txt 2>&1; echo "prefill rc $?" | tee -a $D/summary.txt
tail -2 $D/prefill.txt | tee -a $D/summary.txt
timeout 90 $SB --seq 128k --block 128 --repeat 3 --warmup 1 --json $D/prefill_b128.json > $D/prefill_b128.txt 2>&1; echo "b128 rc $?" | tee -a $D/summary.txt
tail -1 $D/prefill_b128.txt | tee -a $D/summary.txt
timeout 120 python3 bench/torch_attention.py dense --seq 32k,128k --backends flash,cudnn --repeat 3 --warmup 1 --json $D/torch.json > $D/torch.txt 2>&1; echo "torch rc $?" | tee -a $D/summary.txt
cat $D/prefill.json $D/prefill_b128.json > $D/prefill_all.json
python3 bench/report_attention.py --sieve $D/prefill_all.json --torch $D/torch.json --md $D/report.md --plots $D/h200-bsp > $D/report.txt 2>&1; echo "report rc $?" >> $D/summary.txt
NCU="ncu --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section WarpStateStats --section SchedulerStats --section LaunchStats --launch-count 1 --kernel-name-base mangled"
timeout 120 $NCU --kernel-name regex:'sa_attn_kernel.*Li2EEEv' -o $D/blocks $SB --seq 128k --repeat 1 --warmup 0 > $D/ncu_blocks_run.txt 2>&1; echo "ncu blocks rc $?" | tee -a $D/summary.txt
timeout 90 $NCU --kernel-name regex:'bs_score_kernel' -o $D/score $SB --seq 128k --repeat 1 --warmup 0 > $D/ncu_score_run.txt 2>&1; echo "ncu score rc $?" | tee -a $D/summary.txt
for r in blocks score; do ncu --import $D/$r.ncu-rep --print-summary none > $D/ncu_$r.txt 2>&1; done
rm -f $D/*.ncu-rep
tar czf $OUT/call3.tar.gz -C $OUT c3
