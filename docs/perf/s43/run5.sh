#!/bin/bash
# s43 call 5: timelines of v96 (self-started stream-K items) against the default build at the cut shapes; cuDNN's
# decode at the medium shapes under ncu (grid, registers, duration, DRAM throughput)
N=dev/bin/s43/tl
mkdir -p $OUT/tl $OUT/n
for r in 1 2; do
for b in attn_tl attn_tl_v96; do
  for c in "18x4096" "20x4096" "17x8192"; do
    KVATTN_TL_FUSED=1 KVATTN_TL_NONEW=1 KVATTN_TL_CASE="$c" KVATTN_TL_REPS=6 timeout 60 $N/$b timeline >> $OUT/tl/${b}_$r.txt 2>&1
  done
  echo "$b $r rc=$?"
done
done
for f in $OUT/tl/*_1.txt; do echo "== $f"; grep -E "^decode|^ *(items|blocks|last ends)" $f | grep -v "^decode" | cut -c1-220; done
for s in "12 4096" "18 4096" "20 4096" "17 8192" "8 8192"; do
  set -- $s
  timeout 80 ncu --nvtx --nvtx-include "prof/" --section LaunchStats --section SpeedOfLight python3 dev/cudnn_probe.py prof $1 $2 > $OUT/n/cudnn_${1}x$2.txt 2>&1
  echo "== cudnn ${1}x$2 rc=$?"
  grep -E "^  [a-zA-Z_]+.*\(|Duration|Grid Size|Block Size|Registers Per|Shared Memory Config|Dynamic Shared|DRAM Throughput" $OUT/n/cudnn_${1}x$2.txt | head -24
done
cd $OUT && tar czf r5.tgz tl n && rm -rf tl n
