#!/bin/bash
# s43 call 6: a lone decode block's streaming rate against its pipeline depth: timelines with KVATTN_DEV_STAGES
# 3 (default, two blocks per SM) / 4 / 5 / 6 (one block per SM) at 12x4096 and 8x8192 contiguous
N=dev/bin/s43/tl
mkdir -p $OUT/st
for r in 1 2; do
for st in 0 4 5 6 2; do
  for c in "12x4096" "8x8192 contig" "64x4096 contig"; do
    KVATTN_DEV_STAGES=$st KVATTN_TL_FUSED=1 KVATTN_TL_NONEW=1 KVATTN_TL_CASE="$c" KVATTN_TL_REPS=4 timeout 60 $N/attn_tl timeline >> $OUT/st/st${st}_$r.txt 2>&1
  done
done
done
for f in $OUT/st/st*_1.txt; do echo "== $f"; grep -E "^decode" $f | awk 'NR%3==0' | grep -o "decode start [0-9.]* wait [0-9.]*\.\.[0-9.]* end [0-9.]*\.\.[0-9.]*" ; grep -E "^ *(items|blocks|SM us)" $f | cut -c1-200; done
cd $OUT && tar czf st.tgz st && rm -rf st
