# Device call 2: where the 128K prefill's time goes. Nsight Compute of one block-sparse
# attention launch (mode 2), its block-score kernel and one dense causal launch (mode 1) of
# the same call; then variants at 128K: blocks of 128, a 2-stage ring, fewer targets
# (--hot 0.02), each timed with dense in the same run.
D=$OUT/c2; mkdir -p $D
bash bench/gpu/unpack.sh gpu || exit 1
export LD_LIBRARY_PATH=$PWD/.deps/gpu/lib
N=.deps/gpu/build
SB="$N/bench/sieve-bench attention prefill --device cuda --seq 128k --check-tokens 2"
NCU="ncu --sections SpeedOfLight,MemoryWorkloadAnalysis,Occupancy,WarpStateStats,SchedulerStats,LaunchStats --launch-count 1"
timeout 150 $NCU --kernel-name-base mangled --kernel-name regex:'sa_attn_kernel.*Li2EEEv' -o $D/blocks $SB --repeat 1 --warmup 0 > $D/ncu_blocks.txt 2>&1; echo "ncu blocks rc $?" | tee -a $D/summary.txt
timeout 100 $NCU --kernel-name-base mangled --kernel-name regex:'bs_score_kernel' -o $D/score $SB --repeat 1 --warmup 0 > $D/ncu_score.txt 2>&1; echo "ncu score rc $?" | tee -a $D/summary.txt
timeout 100 $NCU --kernel-name-base mangled --kernel-name regex:'sa_attn_kernel.*Li1EEEv' --launch-skip 0 -o $D/dense $SB --repeat 1 --warmup 0 > $D/ncu_dense.txt 2>&1; echo "ncu dense rc $?" | tee -a $D/summary.txt
for r in blocks score dense; do ncu --import $D/$r.ncu-rep --print-summary none > $D/$r.txt 2>&1; done
for v in "base:" "b128:--block 128" "st2:SIEVE_CUDA_SA_STAGES=2" "hot2:--hot 0.02"; do
  name=${v%%:*}; arg=${v#*:}
  case "$arg" in SIEVE*) env $arg timeout 90 $SB --repeat 3 --warmup 1 --json $D/v_$name.json > $D/v_$name.txt 2>&1 ;;
                 *) timeout 90 $SB $arg --repeat 3 --warmup 1 --json $D/v_$name.json > $D/v_$name.txt 2>&1 ;; esac
  echo "variant $name rc $?" | tee -a $D/summary.txt; tail -1 $D/v_$name.txt | tee -a $D/summary.txt
done
rm -f $D/*.ncu-rep
tar czf $OUT/call2.tar.gz -C $OUT c2
