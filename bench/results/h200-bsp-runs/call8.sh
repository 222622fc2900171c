# Device call 8: FlashPrefill V2's own configuration (blocks of 128, 256 sink tokens = 2
# blocks, a 512-token window = 4 blocks, alpha 0.1) at 32K and 128K beside torch's flash
# and cuDNN. Kernels as call 5 (584abd2; sieve-bench as built then).
D=$OUT/c8; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
timeout 100 $N/bench/sieve-bench attention prefill --device cuda --seq 32k,128k --block 128 --sink 2 --window 4 --repeat 5 --warmup 1 --check-tokens 4 --json $D/prefill_paper.json > $D/prefill_paper.txt 2>&1; echo "prefill rc $?" | tee -a $D/summary.txt
tail -2 $D/prefill_paper.txt | tee -a $D/summary.txt
timeout 80 python3 bench/torch_attention.py dense --seq 32k,128k --backends flash,cudnn --repeat 3 --warmup 1 --json $D/torch.json > $D/torch.txt 2>&1; echo "torch rc $?" | tee -a $D/summary.txt
grep -v '^{' $D/torch.txt >> $D/summary.txt
python3 bench/report_attention.py --sieve $D/prefill_paper.json --torch $D/torch.json --md $D/report.md > $D/report.txt 2>&1; echo "report rc $?" >> $D/summary.txt
tar czf $OUT/call8.tar.gz -C $OUT c8
