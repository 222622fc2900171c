#!/usr/bin/env bash
# call 1: validate branch (plain copies, on top of main's test helpers), A/B vs main, L2 sectors
. "$(dirname "$0")/../common.sh"
nvidia-smi --query-gpu=name,clocks.sm,power.limit --format=csv,noheader
N=.deps/gpu/build; Bs=.deps/gpu-base/build
echo "=== test (branch) $(date -u +%T)"
OUT=$OUT bench/gpu/run.sh test 2>&1 | tail -20
if ! grep -q "Failing: 0" "$OUT/test_knn_cuda.log"; then
  echo "=== branch failed; test of base $(date -u +%T)"
  LD_LIBRARY_PATH=.deps/gpu-base/lib timeout 300 $Bs/tests/test_knn_cuda --jobs 4 --verbose=0 2>&1 | tail -8
fi
echo "=== exactness 300k f32 $(date -u +%T)"
LD_LIBRARY_PATH=.deps/gpu/lib $N/bench/sieve-bench knn --n 300000 --dtype float32 --batch 1,2,3,4,5,8,13,16,32 --k 1,128,1024 --repeat 1 --warmup 0 --mat-repeat 1 2>&1 | grep -vE '^#' | awk '{print $1,$2,$3,$4,$NF}' | tr '\n' ';'
echo
LD_LIBRARY_PATH=.deps/gpu/lib $N/bench/sieve-bench knn --n 200001 --dim 100 --metric Cosine --dtype float32 --batch 1,2,4,16 --k 1,100 --rows-per-page 128 --repeat 1 --warmup 0 --mat-repeat 1 2>&1 | grep -vE '^#' | awk '{print $1,$2,$3,$4,$NF}' | tr '\n' ';'
echo
echo "=== A/B 5M f32 k=128 $(date -u +%T)"
for r in 1 2; do for side in gpu-base gpu; do
  echo "--- $side round $r"
  LD_LIBRARY_PATH=.deps/$side/lib .deps/$side/build/bench/sieve-bench knn --n 5m --dtype float32 --batch 1,2,4,8,16,32 --k 128 --repeat 10 --no-materialized --json "$OUT/ab_${side}_$r.json" 2>&1 | grep -E '^[0-9]' | awk '{print $1,$2,$3,$4,$5,$6}'
done; done
echo "=== sectors $(date -u +%T)"
for side in gpu-base gpu; do for b in 2 16; do
  LD_LIBRARY_PATH=.deps/$side/lib timeout 150 "$NCU" --section SourceCounters --section MemoryWorkloadAnalysis --section SpeedOfLight --kernel-name regex:"scan_f32" --launch-skip 5 --launch-count 1 --clock-control none \
    .deps/$side/build/bench/sieve-bench knn --n 5m --dtype float32 --batch $b --k 128 --repeat 3 --warmup 1 --no-materialized > "$OUT/ncu_${side}_B$b.txt" 2>&1
  echo "--- $side B=$b"; grep -E "scan_f32|excessive|Duration|Memory Throughput|L2 Cache Throughput|DRAM Throughput" "$OUT/ncu_${side}_B$b.txt" | head -12
done; done
echo "=== end $(date -u +%T)"
