#!/usr/bin/env bash
# Runs on the GPU machine (through the device tool) from the repository root, with the bundle
# from bench/gpu/bundle.sh carried in .deps/gpu. Writes logs and JSON under $OUT (or ./out).
# usage: bench/gpu/run.sh STAGE...   stages: info test sanitize bench torch ceilings e2e
set -uo pipefail
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/.deps/gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export PYTHONUNBUFFERED=1
BIN="$PWD/.deps/gpu/bin"
BENCH_ARGS=${BENCH_ARGS:-"--dtype float16 --n 1m,5m --batch 1,16,64,128,1024 --k 10,128,1024,8192"}
TORCH_ARGS=${TORCH_ARGS:-"--dtype float16 --n 1m,5m --batch 1,16,64,128,1024 --k 10,128,1024,8192"}
status=0
for stage in "$@"; do
  echo "=== stage $stage ($(date -u +%H:%M:%S))"
  case "$stage" in
    info)
      nvidia-smi --query-gpu=name,memory.total,clocks.sm,clocks.mem,driver_version --format=csv
      cat /etc/os-release | head -2; ldd --version | head -1 ;;
    test)
      timeout "${TEST_TIMEOUT:-420}" "$BIN/test_knn_cuda" --jobs 4 --verbose=0 ${TEST_FILTER:+--filter "$TEST_FILTER"} 2>&1 | tee "$OUT/test_knn_cuda.log" | tail -40
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1 ;;
    sanitize)
      for tool in memcheck racecheck; do
        compute-sanitizer --tool $tool --error-exitcode 3 "$BIN/sieve-bench" knn --n 70000 --dim 96 \
          --batch 1,70 --k 1,100 --repeat 1 --warmup 0 --mat-repeat 1 --dtype float16,float32 \
          --metric Euclid --rows-per-page 256 > "$OUT/sanitize_$tool.log" 2>&1
        rc=$?; echo "compute-sanitizer $tool: exit $rc"; tail -3 "$OUT/sanitize_$tool.log"
        [ $rc -eq 0 ] || status=1
      done ;;
    bench)
      "$BIN/sieve-bench" knn $BENCH_ARGS --json "$OUT/knn.json" 2>&1 | tee "$OUT/bench.log"
      [ "${PIPESTATUS[0]}" -eq 0 ] || status=1 ;;
    torch)
      python3 bench/torch_knn.py $TORCH_ARGS --json "$OUT/torch.json" > "$OUT/torch.log" 2>&1 || status=1
      tail -n 40 "$OUT/torch.log" | cut -c1-200 ;;
    ceilings)
      python3 bench/torch_knn.py --ceilings --n 1k --batch 1 --k 1 --json "$OUT/ceilings.json" 2>&1 | grep ceiling ;;
    *) echo "unknown stage $stage"; status=2 ;;
  esac
done
exit $status
