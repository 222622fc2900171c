#!/usr/bin/env bash
# A/B timing of two builds in one lease, run on the GPU machine from the repository root:
# the bundle in .deps/gpu.tar.xz (new) against .deps/gpu-base.tar.xz (base; make it by copying
# an earlier bundle before running bench/gpu/bundle.sh again; carry both). For each round and
# each entry of $AB_CASES ("label:variant:sieve-bench args", variant "-" for the default, a
# scan variant name for SIEVE_CUDA_SCAN, or NAME=value for any other setting of the new
# build, e.g. SIEVE_CUDA_SELECT=segmented),
# runs sieve-bench knn of the base build (default variant) and of the new build, alternating,
# so both see the same clocks and power cap. Prints fused and sample/scan/select times; the
# JSON lines go to $OUT/ab_base.json and $OUT/ab_new.json.
# Each run is cut after $AB_TIMEOUT seconds (default 120), so a build that hangs costs minutes,
# not the device call.
# usage: [AB_ROUNDS=2] [AB_CASES=...] [AB_TIMEOUT=120] bench/gpu/ab.sh
case "${1:-}" in -h | --help) sed -n '2,/^[^#]/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;; esac
set -uo pipefail
OUT="${OUT:-$PWD/out}"
mkdir -p "$OUT"
bench/gpu/unpack.sh gpu && bench/gpu/unpack.sh gpu-base || exit 1
AB_CASES=${AB_CASES:-"b64:-:--n 5m --batch 64 --k 128"}
status=0
for r in $(seq 1 "${AB_ROUNDS:-2}"); do
  echo "--- round $r"
  IFS=';' read -ra cases <<< "${AB_CASES// | /;}"
  for c in "${cases[@]}"; do
    label=${c%%:*}; rest=${c#*:}; variant=${rest%%:*}; args=${rest#*:}
    for side in gpu-base gpu; do
      name=$([ "$side" = gpu ] && echo new || echo base)
      env=()
      if [ "$side" = gpu ] && [ "$variant" != "-" ]; then
        case "$variant" in *=*) env=("$variant") ;; *) env=(SIEVE_CUDA_SCAN="$variant") ;; esac
      fi
      line=$(env "${env[@]}" LD_LIBRARY_PATH="$PWD/.deps/$side/lib" timeout "${AB_TIMEOUT:-120}" \
        ".deps/$side/build/bench/sieve-bench" knn $args --repeat 10 --no-materialized \
        --json "$OUT/ab_$name.json" 2>&1 | grep -E '^[0-9]' | tail -1) || status=1
      printf '%-12s %-5s %-12s %s\n' "$label" "$name" "${variant}" "$(echo "$line" | awk '{print $3, $4, $5, $NF}')"
    done
  done
done
exit $status
