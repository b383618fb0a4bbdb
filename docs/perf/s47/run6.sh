#!/bin/bash
# s47 call 6: call 5 showed the self-planned (SELF) items as slow (2.17 - 2.24 us per tile at 8x8192) in the fixed
# mode too, and when they start only after the scheduler (KV_DEV_SELF_WAIT=1); list-fed items run 1.91 (call 3).
# attn_tl_sw2 (-DKV_DEV_SELF_WAIT=2): the SELF kernel's code, its blocks waiting for sched_done and then taking their
# items from the list by the counter (as the list-fed kernels do): is it the SELF kernel's code or its block-to-item
# mapping (block i runs item i)? Fixed mode, timelines with per-item records.
D=dev/bin/s47
L=$OUT/logs; mkdir -p $L/tl
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
export KVATTN_TL_FUSED=1 KVATTN_TL_NONEW=1 KVATTN_TL_REPS=6 KVATTN_TL_FIXED=1
for r in 1 2; do
  for mode in def nolean sw2; do
    unset KVATTN_NO_LEAN; [ $mode = nolean ] && export KVATTN_NO_LEAN=1
    B=$D/attn_tl; [ $mode = sw2 ] && B=$D/attn_tl_sw2
    for c in "decode 8x8192 contig" "decode 8x8192 p16" "decode 12x4096 contig" "decode 1x32768 contig"; do
      n=$(echo $c | cut -d' ' -f2)_$(echo $c | cut -d' ' -f3)
      st tl $mode $n r$r
      KVATTN_TL_CASE="$c" KVATTN_TL_RAW=$L/tl/raw_${mode}_${n}_r$r.tsv timeout 60 $B timeline > $L/tl/tl_${mode}_${n}_r$r.txt 2>&1
      echo "rc=$? $(grep -E '^ +items' $L/tl/tl_${mode}_${n}_r$r.txt | tail -1 | cut -c1-160)"
    done
  done
done
pack
st done

# NOTE (added after the run): KVATTN_TL_FIXED had no effect in this call. The harness gives every Problem an lse
# (lse = 1) and the knob then left the batch varlen; it was fixed afterwards (dev/attn_test.cu). Every timeline
# of this call ran the varlen form, with the prefill kernel after the decode kernel.
