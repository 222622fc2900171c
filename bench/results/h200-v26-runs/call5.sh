# Call 5: the fused call against torch's scoring GEMM alone (bench/torch_knn.py's
# matmul_ms, no selection) in the same call, alternating: 5M x 768 float16, B = 64 and
# 1024, k = 10 and 128 (pageable; B = 1024 k = 128 also pinned), two rounds.
D=$OUT/c5; . bench/results/h200-v26-runs/common.sh
for r in a b; do
  run fused_$r X=1 --n 5m --batch 64,1024 --k 10,128
  run pinned_$r X=1 --n 5m --batch 1024 --k 128 --results pinned
  timeout 150 python3 bench/torch_knn.py --n 5m --batch 64,1024 --k 10,128 --repeat 20 \
    --json $D/torch_$r.json > $D/torch_$r.log 2>&1
  echo "torch_$r: $(python3 -c '
import json,sys
print(" | ".join("%d/%d matmul %.3f, matmul+topk %.3f" % (r["batch"], r["k"], r["matmul_ms"], r["torch_ms"]) for r in map(json.loads, open(sys.argv[1]))))' $D/torch_$r.json)"
done
nvidia-smi --query-gpu=power.draw,power.limit,clocks.sm,clocks_throttle_reasons.active --format=csv
tar czf $OUT/call5.tar.gz -C $OUT c5 && rm -rf $D
