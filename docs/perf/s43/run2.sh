#!/bin/bash
# s43 call 2: timelines of the medium decode batches, default build (12x4096: c2, one wave of 192 items; 18/20x4096,
# 17x8192: the stream-K cut) against KV_SK_PCT=100 (12x4096 cut too)
N=dev/bin/s43/tl
mkdir -p $OUT/tl
for r in 1 2; do
for b in attn_tl attn_tl_p100; do
  for c in "12x4096" "18x4096" "8x8192 contig" "17x8192"; do
    KVATTN_TL_FUSED=1 KVATTN_TL_NONEW=1 KVATTN_TL_CASE="$c" KVATTN_TL_REPS=6 KVATTN_TL_RAW=$OUT/tl/raw_${b}_$r.txt timeout 60 $N/$b timeline >> $OUT/tl/${b}_$r.txt 2>&1
  done
  echo "$b $r rc=$?"
done
done
grep -E "items [0-9]+:|block|merges" $OUT/tl/attn_tl_1.txt | head -20
cd $OUT && tar czf tl.tgz tl && rm -rf tl
