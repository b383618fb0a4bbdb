#!/bin/bash
# s45 call 4: a lone decode block's tile loop under ncu — dev/attn_test (60a1594's kernels + KVATTN_PROF_B / _L)
# at 12x4096 contiguous, fused checks (the lean path), KVATTN_DEV_STAGES 5 (one block per SM, 96 unsplit items)
# against the default NS 3 (192 pieces, two blocks on most SMs)
T=dev/bin/s45b/attn_test
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
export KVATTN_TL_FUSED=1 KVATTN_TL_NONEW=1 KVATTN_PROF_PAGE=0 KVATTN_PROF_B=12 KVATTN_PROF_L=4096
for ns in 5 0 4; do
  st ncu stages $ns
  KVATTN_DEV_STAGES=$ns timeout 150 ncu --clock-control none -k regex:kv_attn_kernel -s 1 -c 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats --section Occupancy \
    --metrics smsp__inst_executed.sum,smsp__cycles_active.avg,sm__cycles_elapsed.max,gpu__time_duration.sum \
    -o $L/ns$ns $T profile_8x8192 > $L/ncu_ns$ns.txt 2>&1
  echo "ncu rc=$?"
  ncu -i $L/ns$ns.ncu-rep --page details > $L/ns$ns.details.txt 2>&1
  ncu -i $L/ns$ns.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $L/ns$ns.sass.csv.gz
  grep -E "kv_attn_kernel|inst_executed|Duration|Grid Size|DRAM Throughput|Warp Cycles Per Issued|Registers Per|Achieved Occ" $L/ns$ns.details.txt | head -12
  rm -f $L/ns$ns.ncu-rep
  pack
done
st done
