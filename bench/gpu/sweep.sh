#!/usr/bin/env bash
# The kernel sweep bench/RESULTS.md reports, in one device call (run from the repository
# root on the GPU machine, with the bundle of bench/gpu/bundle.sh carried):
#   float16 at 1M and 5M (every batch and k of targets.md, each shape checked against the
#   materialized full sort), float16 at 8,841,823 (timing), bfloat16 and float32 at 5M
#   (every batch, k = 128 and 1024), 5M float16 again with the query and result arrays
#   page-locked (--results pinned), then PyTorch matmul + topk on the same shapes in the same
#   lease.
# Writes $OUT/knn.json (every shape), $OUT/bench_1m5m.log, $OUT/torch.json,
# $OUT/torch_float16.log, $OUT/torch_bf16_f32.log and $OUT/report.md (bench/report_knn.py:
# the table and the summary against the targets, whose verdict lines it also prints).
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
set -u
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
BENCH_ARGS="--dtype float16 --n 1m,5m --batch 1,16,64,128,1024 --k 10,128,1024,8192,16384 --repeat 10 --mat-repeat 1" \
  timeout 280 bash -c 'bench/gpu/run.sh bench' 2>&1 | tail -55 | cut -c1-150
cp "$OUT/bench.log" "$OUT/bench_1m5m.log"
BENCH_ARGS="--dtype float16 --n 8841823 --batch 1,64,1024 --k 10,128,8192,16384 --repeat 10 --no-materialized" \
  timeout 60 bash -c 'bench/gpu/run.sh bench' 2>&1 | tail -14 | cut -c1-150
BENCH_ARGS="--dtype bfloat16,float32 --n 5m --batch 1,16,64,128,1024 --k 128,1024 --repeat 5 --no-materialized" \
  timeout 150 bash -c 'bench/gpu/run.sh bench' 2>&1 | tail -22 | cut -c1-150
# the same 5M float16 shapes with the query and result arrays in page-locked memory (copied
# directly, no staging copy), as the server's batcher holds them: what the results' trip to
# the host costs at large k
BENCH_ARGS="--dtype float16 --n 5m --batch 1,16,64,128,1024 --k 128,1024,8192,16384 --repeat 10 --no-materialized --results pinned" \
  timeout 90 bash -c 'bench/gpu/run.sh bench' 2>&1 | tail -22 | cut -c1-150
TORCH_ARGS="--dtype float16 --n 1m,5m,8841823 --batch 1,16,64,128,1024 --k 10,128,1024,8192,16384" \
  timeout 150 bash -c 'bench/gpu/run.sh torch' 2>&1 | tail -3
mv "$OUT/torch.log" "$OUT/torch_float16.log"
# torch beside the bfloat16 and float32 shapes above (float32 without TF32, as torch_knn.py sets)
TORCH_ARGS="--dtype bfloat16,float32 --n 5m --batch 1,16,64,128,1024 --k 128,1024" \
  timeout 150 bash -c 'bench/gpu/run.sh torch' 2>&1 | tail -3
mv "$OUT/torch.log" "$OUT/torch_bf16_f32.log"
rm -f "$OUT/bench.log"
# the report, and its verdicts against the retrieval targets (the per-shape lines are in
# report.md)
python3 bench/report_knn.py --sieve "$OUT/knn.json" --torch "$OUT/torch.json" --md "$OUT/report.md" &&
  grep -E "^- " "$OUT/report.md"
ls "$OUT"
