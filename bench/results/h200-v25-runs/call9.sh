# Call 9 (run as one command line, right after call 8 on the still-held machine): a second
# A/B round of the branch next/drain, HELP 1 / 0 / 0 / 1, 5M B = 64 and 1024, k = 128 and
# 8192. Outputs in call9/.
D=$OUT/c9; . bench/results/h200-v23-runs/spec_select/common.sh; for s in h1a:1 h0a:0 h0b:0 h1b:1; do IFS=: read l v <<< "$s"; run 5m_$l gpu SIEVE_CUDA_HELP=$v --n 5m --batch 64,1024 --k 128,8192; done; tar czf $OUT/call9.tar.gz -C $OUT c9
