#!/bin/bash
# s47 call 1: the structural candidate's two questions, on HEAD's kernels (no kernel change):
# (1) how many clusters of 2 / 4 decode-shaped blocks fit at once (dev/cluster_fit);
# (2) how fast one block per SM streams with every SM busy: dev/attn_test bench (isolated calls, medians of 20) at
#     pipeline depth NS 3 (default, two blocks per SM), 5 and 6 (one per SM) for 8x8192 (2 pieces per task at NS 5/6,
#     merged through global memory) and 16x4096 (the same bytes, unsplit at NS 5/6: no merge); plus ncu of the
#     decode kernel.
D=dev/bin/s47
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $L/smi.txt 2>&1
st cluster_fit
$D/cluster_fit > $L/cluster_fit.txt 2>&1; echo "cluster_fit rc=$?"; cat $L/cluster_fit.txt
pack
export KVATTN_TL_FUSED=1 KVATTN_BENCH_NONEW=1 KVATTN_DEC_ONLY=1
export KVATTN_DEV_DECS="8x8192:0,8x8192:16,16x4096:0,16x4096:16,12x4096:0,64x4096:0"
for r in 1 2; do for ns in 0 5 6; do
  st bench ns$ns r$r
  KVATTN_DEV_STAGES=$ns timeout 120 $D/attn_test bench > $L/bench_ns${ns}_r$r.txt 2>&1; echo "rc=$?"
  grep -E "ceiling|decode" $L/bench_ns${ns}_r$r.txt
done; done
pack
export KVATTN_TL_NONEW=1 KVATTN_PROF_PAGE=0
for s in 8x8192 16x4096; do for ns in 0 5; do
  st ncu $s ns$ns
  KVATTN_PROF_B=${s%x*} KVATTN_PROF_L=${s#*x} KVATTN_DEV_STAGES=$ns timeout 90 ncu --clock-control none -k regex:kv_attn_kernel -s 1 -c 1 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --metrics gpu__time_duration.sum,dram__bytes_read.sum \
    $D/attn_test profile_8x8192 > $L/ncu_${s}_ns$ns.txt 2>&1
  grep -E "gpu__time_duration|dram__bytes_read|DRAM Throughput|Grid Size|Block Limit Shared|Registers Per" $L/ncu_${s}_ns$ns.txt | head -8
done; done
pack
st done
st bench_cuda b103
unset KVATTN_TL_FUSED KVATTN_BENCH_NONEW KVATTN_DEC_ONLY KVATTN_DEV_DECS KVATTN_TL_NONEW KVATTN_PROF_PAGE
timeout 120 $D/b103/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench_cuda.log 2>&1; echo "bench rc=$?"
grep -E "eiling|8x8192|64x4096|inflight|16384" $L/bench_cuda.log | head -24
pack
st done2
