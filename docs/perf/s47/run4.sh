#!/bin/bash
# s47 call 4: do the self-planned (SELF) decode items stream slower because they overlap the scheduler kernel?
# Call 3's timelines: SELF items 2.11 - 2.15 us per tile (start ~6.4 us), the list-fed early kernel's 1.91 (start
# ~16.6 us, after the scheduler), yet under ncu (kernels serialized) the SELF kernel is only the plan's ~1.6 us slower.
# Timelines (per-item records) of 8x8192 (contiguous, page 16) and 64x4096: default; KVATTN_NO_PDL=1 (every kernel
# after the one before: the SELF blocks start after the scheduler ended); KVATTN_TL_TWICE=1 (the scheduler's work
# twice: longer overlap).
D=dev/bin/s47
L=$OUT/logs; mkdir -p $L/tl
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
export KVATTN_TL_FUSED=1 KVATTN_TL_NONEW=1 KVATTN_TL_REPS=6
for r in 1 2; do
  for mode in def nopdl twice; do
    unset KVATTN_NO_PDL KVATTN_TL_TWICE
    [ $mode = nopdl ] && export KVATTN_NO_PDL=1
    [ $mode = twice ] && export KVATTN_TL_TWICE=1
    for c in "decode 8x8192 contig" "decode 8x8192 p16" "decode 64x4096 contig"; do
      n=$(echo $c | cut -d' ' -f2)_$(echo $c | cut -d' ' -f3)
      st tl $mode $n r$r
      KVATTN_TL_CASE="$c" KVATTN_TL_RAW=$L/tl/raw_${mode}_${n}_r$r.tsv timeout 60 $D/attn_tl timeline > $L/tl/tl_${mode}_${n}_r$r.txt 2>&1
      echo "rc=$?"; grep -E "sched start" $L/tl/tl_${mode}_${n}_r$r.txt | tail -1 | cut -c1-200; grep -E "^ +(items|blocks)" $L/tl/tl_${mode}_${n}_r$r.txt | tail -2
    done
  done
done
pack
st done
