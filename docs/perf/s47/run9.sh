#!/bin/bash
# s47 call 9: call 8 showed the self-planned path ~10 us faster than list-fed items in graph replay (8x8192 72.2 against
# 82.5 us), although in isolated-call timelines its items stream ~10% slower per tile (calls 3 - 7). Is that slowness
# a property of an isolated call's first ~15 us (a GPU that was idle), which graph replays never see?
# KVATTN_TL_PREWARM=512: 512 MB of reads in the call's stream right before each timed call (HEAD's kernels).
D=dev/bin/s47
L=$OUT/logs; mkdir -p $L/tl
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
export KVATTN_TL_FUSED=1 KVATTN_TL_NONEW=1 KVATTN_TL_REPS=6 KVATTN_TL_FIXED=1
for r in 1 2; do
  for mode in def pw nolean nleanpw; do
    unset KVATTN_NO_LEAN KVATTN_TL_PREWARM
    case $mode in pw) export KVATTN_TL_PREWARM=512;; nolean) export KVATTN_NO_LEAN=1;;
      nleanpw) export KVATTN_NO_LEAN=1 KVATTN_TL_PREWARM=512;; esac
    for c in "decode 8x8192 contig" "decode 8x8192 p16" "decode 12x4096 contig" "decode 64x4096 contig" "decode 1x32768 contig"; do
      n=$(echo $c | cut -d' ' -f2)_$(echo $c | cut -d' ' -f3)
      st tl $mode $n r$r
      KVATTN_TL_CASE="$c" KVATTN_TL_RAW=$L/tl/raw_${mode}_${n}_r$r.tsv timeout 60 $D/attn_tl timeline > $L/tl/tl_${mode}_${n}_r$r.txt 2>&1
      echo "rc=$? $(grep -E '^ +items' $L/tl/tl_${mode}_${n}_r$r.txt | tail -1 | cut -c1-150)"
    done
  done
done
pack
st done

# NOTE (added after the run): KVATTN_TL_FIXED had no effect in this call. The harness gives every Problem an lse
# (lse = 1) and the knob then left the batch varlen; it was fixed afterwards (dev/attn_test.cu). Every timeline
# of this call ran the varlen form, with the prefill kernel after the decode kernel.
