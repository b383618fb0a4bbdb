#!/bin/bash
# dev/prof_attn.sh — ncu on one decode and one prefill launch of the attention kernel (clocks left alone).
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
BIN=${BIN:-dev/bin/attn_test}
timeout 300 ncu --clock-control none -k regex:kv_attn_kernel -c 2 --section SpeedOfLight --section WarpStateStats \
  --section MemoryWorkloadAnalysis --section LaunchStats --section Occupancy $BIN profile 2>&1 | tee $OUT/ncu.txt | \
  grep -vE "^\s*$|----" | tail -150
