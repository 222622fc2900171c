# Call 2: what bounds the pipelined download into pageable arrays (call 1: 1M B = 1024
# k = 16384 spends 7.4 ms there for 201 MB, 27 GB/s, against 54 GB/s on the bus; the rows
# as 32-bit values changed nothing). Experiment knobs of this build only: the host copy
# threads (SIEVE_CUDA_COPY_THREADS, default 8), streaming stores (SIEVE_CUDA_NTCOPY=1), the
# rows as 32-bit values on the bus (SIEVE_CUDA_NARROW=1), the chunk (SIEVE_CUDA_DLCHUNK,
# KiB, default 1024). Two rounds over the settings, pageable results.
D=$OUT/c2; . bench/results/h200-v30-runs/common.sh
cfg=(base:X=1 t12:SIEVE_CUDA_COPY_THREADS=12 t15:SIEVE_CUDA_COPY_THREADS=15
     nt:SIEVE_CUDA_NTCOPY=1 nt15:SIEVE_CUDA_NTCOPY=1,SIEVE_CUDA_COPY_THREADS=15
     nar:SIEVE_CUDA_NARROW=1 narnt:SIEVE_CUDA_NARROW=1,SIEVE_CUDA_NTCOPY=1
     narnt15:SIEVE_CUDA_NARROW=1,SIEVE_CUDA_NTCOPY=1,SIEVE_CUDA_COPY_THREADS=15
     c4:SIEVE_CUDA_DLCHUNK=4096 ntc4:SIEVE_CUDA_NTCOPY=1,SIEVE_CUDA_DLCHUNK=4096)
echo "--- 1M ($(date -u +%T))"
for r in 1 2; do for c in "${cfg[@]}"; do
  IFS=: read l e <<< "$c"; run m_${l}_$r "${e//,/ }" --n 1m --batch 128,1024 --k 8192,16384
done; done
echo "--- 5M ($(date -u +%T))"
for r in 1 2; do for c in "${cfg[@]}"; do
  IFS=: read l e <<< "$c"; run f_${l}_$r "${e//,/ }" --n 5m --batch 64,128,1024 --k 16384
done; done
echo "--- download_ms ($(date -u +%T))"
python3 - $D <<'PY'
import json, sys, glob, os, collections
d = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + "/t_*.json")):
    lab = os.path.basename(f)[2:-5].rsplit("_", 1)[0]
    for r in map(json.loads, open(f)):
        d[(lab, r["batch"], r["k"])].append((r["fused_ms"], r["download_ms"]))
for key in sorted(d):
    print("%-12s B=%-5d k=%-6d total %s download %s" % (key + (" ".join("%.3f" % a for a, b in d[key]), " ".join("%.3f" % b for a, b in d[key]))))
PY
echo "--- done ($(date -u +%T))"
tar czf $OUT/call2.tar.gz -C $OUT c2 && rm -rf $D
