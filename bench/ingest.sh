#!/usr/bin/env bash
# Bulk-ingest benchmark of `sieve ingest`: N x DIM float32 vectors from a .fbin file (made by
# sieve-datagen), straight into a data directory and through sieve-server's HTTP API (binary
# upsert bodies, and JSON bodies for a shorter run), with the disk's raw sequential write
# rate (dd conv=fdatasync) measured between the runs on the same disk, so the ratio is clear
# on a machine whose disk is shared and moves a lot.
#
# usage: bench/ingest.sh [options]
#   --build DIR     build directory with client/sieve, server/sieve-server and
#                   datasets/sieve-datagen (default build-rel)
#   --dir DIR       scratch directory on the disk to measure (default /tmp/sieve-ingest-bench);
#                   needs about 3 x the input size free
#   --n N           vectors (default 1000000)      --dim D   dimension (default 768)
#   --runs R        rounds of dd / direct / HTTP (default 3)
#   --http-n N      vectors for the HTTP runs (default: all)
#   --json-n N      vectors for the HTTP runs with --json, the JSON body (default 200000;
#                   0 skips them)
#   --no-http       skip the HTTP runs             --keep    keep the input file
#   Extra sieve ingest options for both routes go after "--".
set -euo pipefail
root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
build="$root/build-rel" dir=/tmp/sieve-ingest-bench n=1000000 dim=768 runs=3 http_n="" json_n=200000 http=1 keep=0
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="$(cd "$2" && pwd)"; shift 2 ;;
    --dir) dir="$2"; shift 2 ;;
    --n) n="$2"; shift 2 ;;
    --dim) dim="$2"; shift 2 ;;
    --runs) runs="$2"; shift 2 ;;
    --http-n) http_n="$2"; shift 2 ;;
    --json-n) json_n="$2"; shift 2 ;;
    --no-http) http=0; shift ;;
    --keep) keep=1; shift ;;
    --) shift; break ;;
    -h|--help) sed -n '2,19p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
extra=("$@")
sieve="$build/client/sieve" server="$build/server/sieve-server" datagen="$build/datasets/sieve-datagen"
for b in "$sieve" "$server" "$datagen"; do
  [ -x "$b" ] || { echo "missing $b: build first (scripts/build.sh build-rel -DCMAKE_BUILD_TYPE=Release)" >&2; exit 1; }
done
mkdir -p "$dir"
input="$dir/vectors-${n}x${dim}.fbin"
bytes=$((n * dim * 4))
mib=$((bytes / 1048576))

echo "# sieve ingest benchmark, $(date -u '+%Y-%m-%d %H:%M:%S UTC')"
echo "# machine: $(nproc) cores, $(awk '/MemTotal/ {printf "%.0f GiB", $2/1048576}' /proc/meminfo) RAM, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //'), $(uname -sr)"
echo "# disk: $(df -h "$dir" | awk 'NR==2 {print $1", "$2" ("$5" used)"}')"
if [ ! -f "$input" ]; then
  echo "# generating $input"
  "$datagen" --kind gaussian --count "$n" --dim "$dim" --seed 1 --out "$input" >/dev/null
fi
cat "$input" >/dev/null   # page cache: measure ingest, not the input's first read

rate() { awk "BEGIN { printf \"%.0f\", ($1) / ($2) }"; }
dd_rate() {
  local t0=$EPOCHREALTIME
  dd if=/dev/zero of="$dir/dd.tmp" bs=1M count="$mib" conv=fdatasync 2>/dev/null
  local t1=$EPOCHREALTIME
  rm -f "$dir/dd.tmp"
  awk -v b="$bytes" -v a="$t0" -v z="$t1" 'BEGIN { printf "%.0f", b / (z - a) / 1e6 }'
}
# timed LOG CMD...: runs CMD with its output in LOG and "WALL USER SYSTEM" seconds in
# $dir/time.txt.
timed() {
  local TIMEFORMAT="%R %U %S" out="$1"
  shift
  { time "$@" >"$out" 2>&1 ; } 2>"$dir/time.txt"
}

for r in $(seq 1 "$runs"); do
  echo "## round $r (load average $(cut -d' ' -f1-3 /proc/loadavg))"
  echo "dd conv=fdatasync ${mib} MiB: $(dd_rate) MB/s"
  rm -rf "$dir/data"
  log="$dir/direct.log"
  timed "$log" "$sieve" ingest "$input" --collection bench --create --data-dir "$dir/data" --quiet --stats "${extra[@]}"
  read -r secs cu cs <"$dir/time.txt"
  echo "direct (--data-dir): $n vectors in ${secs} s = $(rate "$n" "$secs") vectors/s ($(rate "$bytes" "$secs * 1000000") MB/s of vectors); CPU ${cu} s user + ${cs} s system"
  grep -E 'stats:|store:' "$log" | sed 's/^sieve ingest: /  /'
  rm -rf "$dir/data"
  if [ -x "$build/bench/sieve-bench-store" ]; then
    # the store alone (vectors generated in memory first), same batch size and threads
    batch=$(( (128 << 20) / (dim * 4) )); [ "$batch" -gt 65536 ] && batch=65536; [ "$batch" -lt 4096 ] && batch=4096
    "$build/bench/sieve-bench-store" --dir "$dir/data" --n "$n" --dim "$dim" --batch "$batch" \
      --threads 2 --map-mib $(( bytes * 5 / 4 / 1048576 + 1024 )) 2>/dev/null | grep -E '^(vectors|writer)' | sed 's/^/  sieve-bench-store: /'
    rm -rf "$dir/data"
  fi
  echo "dd conv=fdatasync ${mib} MiB: $(dd_rate) MB/s"
  if [ "$http" = 1 ]; then
    # binary upsert bodies (the default), then the JSON body (--json), each into a fresh server
    for body in binary json; do
      if [ "$body" = binary ]; then hn=${http_n:-$n}; flag=(); else hn=$json_n; flag=(--json); fi
      [ "$hn" -gt 0 ] || continue
      rm -rf "$dir/srv"
      "$server" --host 127.0.0.1 --port 0 --data-dir "$dir/srv" --device cpu >"$dir/server.log" 2>&1 &
      spid=$!
      for _ in $(seq 100); do grep -q "listening on" "$dir/server.log" && break; sleep 0.1; done
      port=$(grep -o 'listening on http://[0-9.]*:[0-9]*' "$dir/server.log" | sed 's/.*://')
      log="$dir/http.log"
      timed "$log" "$sieve" ingest "$input" --collection bench --create --url "http://127.0.0.1:$port" \
        --limit "$hn" --quiet --stats "${flag[@]}" "${extra[@]}"
      read -r secs cu cs <"$dir/time.txt"
      scpu=$(awk '{printf "%.1f", ($14 + $15) / 100}' "/proc/$spid/stat")
      kill "$spid"; wait "$spid" || true
      rm -rf "$dir/srv"
      echo "HTTP $body (4 connections): $hn vectors in ${secs} s = $(rate "$hn" "$secs") vectors/s; CPU: client $(awk -v u="$cu" -v s="$cs" 'BEGIN { printf "%.1f", u + s }') s, server ${scpu} s"
      grep -E 'stats:|http:' "$log" | sed 's/^sieve ingest: /  /'
    done
  fi
done
[ "$keep" = 1 ] || rm -f "$input"
