#!/bin/bash
# s45 call 5: call 4 again with dev/attn_test built from 60a1594 + the s45 patch (v100 - v102): does a lone block
# (KVATTN_DEV_STAGES 5, 12x4096 contiguous) follow the 10% fewer instructions?
T=dev/bin/s45c/attn_test
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
export KVATTN_TL_FUSED=1 KVATTN_TL_NONEW=1 KVATTN_PROF_PAGE=0 KVATTN_PROF_B=12 KVATTN_PROF_L=4096
for ns in 5 0; do
  for b in dev/bin/s45b dev/bin/s45c; do
  st ncu stages $ns $b
  KVATTN_DEV_STAGES=$ns timeout 100 ncu --clock-control none -k regex:kv_attn_kernel -s 1 -c 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats \
    --metrics smsp__inst_executed.sum,gpu__time_duration.sum \
    -o $L/$(basename $b)_ns$ns $b/attn_test profile_8x8192 > $L/ncu_$(basename $b)_ns$ns.txt 2>&1
  echo "ncu rc=$?"
  ncu -i $L/$(basename $b)_ns$ns.ncu-rep --page details > $L/$(basename $b)_ns$ns.details.txt 2>&1
  ncu -i $L/$(basename $b)_ns$ns.ncu-rep --page source --csv --print-source sass 2>/dev/null | gzip > $L/$(basename $b)_ns$ns.sass.csv.gz
  grep -E "inst_executed|Duration|DRAM Throughput|Warp Cycles Per Issued|Registers Per" $L/$(basename $b)_ns$ns.details.txt | head -6
  rm -f $L/$(basename $b)_ns$ns.ncu-rep
  pack
  done
done
st done
