#!/bin/bash
# s47 call 5: the harness's decode batches are varlen (cu_seqlens_q), which launch_fast runs decode-first with the
# prefill kernel after it; flash_attn_with_kvcache / bench_cuda call the fixed mode (decode kernel only). Timelines
# (per-item records) and isolated-call medians (bench mode) of both forms (KVATTN_TL_FIXED=1: the fixed mode).
# attn_tl_sw: the same built with -DKV_DEV_SELF_WAIT=1 (self-planned blocks start their first item only after the
# scheduler's sched_done): do the SELF items stream slower because of their overlap with the scheduler, or always?
D=dev/bin/s47
L=$OUT/logs; mkdir -p $L/tl
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
export KVATTN_TL_FUSED=1 KVATTN_TL_NONEW=1 KVATTN_TL_REPS=6
for r in 1 2; do
  for mode in var fixed swvar swfixed; do
    unset KVATTN_TL_FIXED
    case $mode in *fixed) export KVATTN_TL_FIXED=1;; esac
    B=$D/attn_tl; case $mode in sw*) B=$D/attn_tl_sw;; esac
    for c in "decode 8x8192 contig" "decode 8x8192 p16" "decode 12x4096 contig" "decode 64x4096 contig" "decode 1x32768 contig"; do
      n=$(echo $c | cut -d' ' -f2)_$(echo $c | cut -d' ' -f3)
      st tl $mode $n r$r
      KVATTN_TL_CASE="$c" KVATTN_TL_RAW=$L/tl/raw_${mode}_${n}_r$r.tsv timeout 60 $B timeline > $L/tl/tl_${mode}_${n}_r$r.txt 2>&1
      echo "rc=$?"; grep -E "sched start" $L/tl/tl_${mode}_${n}_r$r.txt | tail -1 | cut -c1-200; grep -E "^ +(items|blocks)" $L/tl/tl_${mode}_${n}_r$r.txt | tail -2
    done
  done
done
pack
unset KVATTN_TL_NONEW KVATTN_TL_FIXED
export KVATTN_BENCH_NONEW=1 KVATTN_DEC_ONLY=1 KVATTN_DEV_DECS="8x8192:0,8x8192:16,12x4096:0,64x4096:0,64x4096:16,1x32768:0"
for r in 1 2 3; do for mode in var fixed; do
  unset KVATTN_TL_FIXED; [ $mode = fixed ] && export KVATTN_TL_FIXED=1
  st bench $mode r$r
  timeout 90 $D/attn_tl bench > $L/bench_${mode}_r$r.txt 2>&1; echo "rc=$?"; grep -E "ceiling|decode B" $L/bench_${mode}_r$r.txt
done; done
pack
st done

# NOTE (added after the run): KVATTN_TL_FIXED had no effect in this call. The harness gives every Problem an lse
# (lse = 1) and the knob then left the batch varlen; it was fixed afterwards (dev/attn_test.cu). Every timeline
# of this call ran the varlen form, with the prefill kernel after the decode kernel.
