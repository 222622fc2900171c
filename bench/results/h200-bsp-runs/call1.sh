# Device call 1: block-sparse prefill's GPU suite (selection against float64, output against
# float64 given its own selection, alpha 0 against dense bit for bit, errors), the CPU suite
# on the device, the two attention suites after the kernel moved into attn_kernel.cuh, and
# memcheck / racecheck of small block-sparse cases; then the prefill bench beside torch.
D=$OUT/c1; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
nvidia-smi --query-gpu=name,driver_version,clocks.sm --format=csv > $D/info.txt
for t in test_block_sparse_cuda test_kernels_block_sparse_cpu test_attention_cuda test_sparse_attn_cuda; do
  timeout 150 $N/tests/$t --jobs 4 --verbose=1 > $D/$t.txt 2>&1; echo "$t rc $?" | tee -a $D/summary.txt
  grep -E "FAIL|ssert|Synthesis" $D/$t.txt | head -8 | tee -a $D/summary.txt
done
timeout 150 compute-sanitizer --tool memcheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/@(chunk_block128_f16|head_ratios_and_decode|errors)' > $D/memcheck.txt 2>&1; echo "memcheck rc $?" | tee -a $D/summary.txt
tail -2 $D/memcheck.txt >> $D/summary.txt
timeout 120 compute-sanitizer --tool racecheck --error-exitcode 3 $N/tests/test_block_sparse_cuda --filter 'block_sparse_cuda/clipped_mha_bf16' > $D/racecheck.txt 2>&1; echo "racecheck rc $?" | tee -a $D/summary.txt
tail -2 $D/racecheck.txt >> $D/summary.txt
# the prefill at 32K and 128K (GQA 32/8, D 128, bf16, alpha 0.1) beside torch's flash and cuDNN
timeout 240 $N/bench/sieve-bench attention prefill --device cuda --seq 32k,128k --repeat 3 --warmup 1 --check-tokens 4 --json $D/prefill.json > $D/prefill.txt 2>&1; echo "prefill rc $?" | tee -a $D/summary.txt
tail -4 $D/prefill.txt | tee -a $D/summary.txt
timeout 150 python3 bench/torch_attention.py dense --seq 32k,128k --backends flash,cudnn --repeat 3 --warmup 1 --json $D/torch.json > $D/torch.txt 2>&1; echo "torch rc $?" | tee -a $D/summary.txt
tail -4 $D/torch.txt >> $D/summary.txt
python3 bench/report_attention.py --sieve $D/prefill.json --torch $D/torch.json --md $D/report.md --plots $D/h200-bsp > $D/report.txt 2>&1; echo "report rc $?" >> $D/summary.txt
tar czf $OUT/call1.tar.gz -C $OUT c1
