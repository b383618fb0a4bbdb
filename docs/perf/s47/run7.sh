#!/bin/bash
# s47 call 7: what makes self-planned first items slow (calls 3 - 6: every such item ~8 - 10% slower per tile, on
# every SM, whatever its SM-mate; not the scheduler overlap, not the fixed / varlen form)? attn_tl_p
# (-DKV_DEV_SELF_PERM=1), a run-time knob KVATTN_DEV_SELF_PERM=m: m > 1, block b runs self slot (b m) mod
# min(total, grid); m = -1, the identity with a fence.acq_rel.gpu by thread 0 before the first item (what the
# list-fed blocks' wait does: it also invalidates the SM's L1, through which K rows are copied); 0 identity.
D=dev/bin/s47
L=$OUT/logs; mkdir -p $L/tl
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
export KVATTN_TL_FUSED=1 KVATTN_TL_NONEW=1 KVATTN_TL_REPS=6 KVATTN_TL_FIXED=1
for r in 1 2; do
  for mode in m0 mf m3 m127 nolean; do
    unset KVATTN_NO_LEAN KVATTN_DEV_SELF_PERM
    case $mode in m0) export KVATTN_DEV_SELF_PERM=0;; mf) export KVATTN_DEV_SELF_PERM=-1;; m3) export KVATTN_DEV_SELF_PERM=3;;
      m127) export KVATTN_DEV_SELF_PERM=127;; nolean) export KVATTN_NO_LEAN=1;; esac
    for c in "decode 8x8192 contig" "decode 8x8192 p16" "decode 64x4096 contig" "decode 1x32768 contig"; do
      n=$(echo $c | cut -d' ' -f2)_$(echo $c | cut -d' ' -f3)
      st tl $mode $n r$r
      KVATTN_TL_CASE="$c" KVATTN_TL_RAW=$L/tl/raw_${mode}_${n}_r$r.tsv timeout 60 $D/attn_tl_p timeline > $L/tl/tl_${mode}_${n}_r$r.txt 2>&1
      echo "rc=$? $(grep -E '^ +items' $L/tl/tl_${mode}_${n}_r$r.txt | tail -1 | cut -c1-150)"
    done
  done
done
pack
st done

# NOTE (added after the run): KVATTN_TL_FIXED had no effect in this call. The harness gives every Problem an lse
# (lse = 1) and the knob then left the batch varlen; it was fixed afterwards (dev/attn_test.cu). Every timeline
# of this call ran the varlen form, with the prefill kernel after the decode kernel.
