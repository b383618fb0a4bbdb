#!/bin/bash
# s47 call 3: why 8x8192's items stream ~13% slower per tile than 64x4096's (2.14 against 1.86 us per 64-key tile in
# the forty-third session's timelines). Per-item records (start, end, SM, tiles) from the timeline build of HEAD's
# kernels (KVATTN_TL_RAW), the self-planned path (default) against the scheduler's lists (KVATTN_NO_LEAN=1) and no
# early start (KVATTN_NO_EARLY=1); ncu of the decode kernel for the same three.
D=dev/bin/s47
L=$OUT/logs; mkdir -p $L/tl
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
export KVATTN_TL_FUSED=1 KVATTN_TL_NONEW=1 KVATTN_TL_REPS=6
for r in 1 2; do
  for mode in def nolean noearly; do
    unset KVATTN_NO_LEAN KVATTN_NO_EARLY
    [ $mode = nolean ] && export KVATTN_NO_LEAN=1
    [ $mode = noearly ] && export KVATTN_NO_EARLY=1
    for c in "decode 8x8192 contig" "decode 64x4096 contig" "decode 12x4096 contig"; do
      n=$(echo $c | cut -d' ' -f2)
      st tl $mode $n r$r
      KVATTN_TL_CASE="$c" KVATTN_TL_RAW=$L/tl/raw_${mode}_${n}_r$r.tsv timeout 60 $D/attn_tl timeline > $L/tl/tl_${mode}_${n}_r$r.txt 2>&1
      echo "rc=$?"; grep -E "^ +(items|blocks)" $L/tl/tl_${mode}_${n}_r$r.txt | tail -2
    done
  done
done
unset KVATTN_NO_LEAN KVATTN_NO_EARLY
pack
export KVATTN_PROF_PAGE=0
for s in 8x8192 64x4096; do for mode in def nolean noearly; do
  unset KVATTN_NO_LEAN KVATTN_NO_EARLY
  [ $mode = nolean ] && export KVATTN_NO_LEAN=1
  [ $mode = noearly ] && export KVATTN_NO_EARLY=1
  st ncu $s $mode
  KVATTN_PROF_B=${s%x*} KVATTN_PROF_L=${s#*x} timeout 90 ncu --clock-control none -k regex:kv_attn_kernel -s 1 -c 1 \
    --section SpeedOfLight --section LaunchStats --section WarpStateStats --metrics gpu__time_duration.sum,smsp__inst_executed.sum \
    $D/attn_test profile_8x8192 > $L/ncu_${s}_$mode.txt 2>&1
  grep -E "kv_attn_kernel|gpu__time_duration|inst_executed|DRAM Throughput|Grid Size|Registers Per|Warp Cycles Per Issued" $L/ncu_${s}_$mode.txt | head -8
done; done
pack
st done
