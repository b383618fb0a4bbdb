#!/bin/bash
# s56 call 1: the shipped library (HEAD's kernels, unchanged since the fifty-fifth session's clamp; dev/bin/s56/t,
# built here from the tree). (a) the full benchmark at head dim 128; (b) bench_cuda's new KVATTN_BENCH_D at head
# dims 64, 96 and 256 (--quick, decode 8x8192 and 64x4096, the inflight step, prefill); (c) test_fp16_max in its
# final form (its CUDA cases not run on the GPU before) and test_default_strides.
T=dev/bin/s56/t
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $L/gpu.txt
st fp16 max, default strides
$T/test_fp16_max > $L/fp16max.log 2>&1; echo "fp16_max rc=$?"; tail -1 $L/fp16max.log
$T/test_default_strides > $L/default_strides.log 2>&1; echo "default_strides rc=$?"; tail -1 $L/default_strides.log
st bench d128
timeout 220 $T/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "eiling|8x8192|64x4096|1x16384|FAIL" $L/cuda_bench.md | head -20
grep -A3 "Inflight" $L/cuda_bench.md | tail -1
pack
for d in 64 96 256; do
  st bench d$d
  KVATTN_BENCH_D=$d KVATTN_BENCH_DECODE=8x8192,64x4096 timeout 120 $T/bench_cuda --quick --md $L/cuda_bench_d$d.md \
    --json $L/cuda_bench_d$d.json > $L/bench_d$d.log 2>&1; echo "bench d$d rc=$?"
  grep -E "eiling|8x8192 \| (contig|paged 16)|64x4096 \| (contig|paged 16)|x16384|x4096 \| [0-9]|x1024 \| [0-9]|FAIL" $L/cuda_bench_d$d.md | head -12
  grep -A3 "Inflight" $L/cuda_bench_d$d.md | tail -1
  pack
done
st done
