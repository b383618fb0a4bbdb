#!/bin/bash
# s48 call 2: stall reasons of the decode kernel at 8x8192 (and 64x4096), three ways of starting the same items:
# self-planned (default), list-fed early (KVATTN_NO_LEAN=1), not early (KVATTN_NO_EARLY=1). Question: do the SELF
# kernel's extra cycles per instruction (ncu s47: 8.58 against 8.38 / 8.37) come from instruction fetch
# (no_instruction stalls: the "code that never runs costs time" effect of the forty-second session) or from memory?
D=dev/bin/s47
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
export KVATTN_PROF_PAGE=0 KVATTN_TL_FUSED=1 KVATTN_TL_NONEW=1
M='regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio'
for s in 8x8192 64x4096; do for mode in def nolean noearly; do
  unset KVATTN_NO_LEAN KVATTN_NO_EARLY
  [ $mode = nolean ] && export KVATTN_NO_LEAN=1
  [ $mode = noearly ] && export KVATTN_NO_EARLY=1
  st ncu $s $mode
  KVATTN_PROF_B=${s%x*} KVATTN_PROF_L=${s#*x} timeout 120 ncu --clock-control none -k regex:kv_attn_kernel -s 1 -c 1 \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section InstructionStats \
    --metrics gpu__time_duration.sum,smsp__inst_executed.sum,sm__cycles_active.avg,$M \
    $D/attn_test profile_8x8192 > $L/ncu_${s}_$mode.txt 2>&1
  echo "rc=$?"; grep -E "gpu__time_duration|stalled_(no_instruction|long_scoreboard|short_scoreboard|wait|barrier|lg_throttle|mio_throttle|branch_resolving|membar|math_pipe|dispatch|imc|selected|not_selected|drain|sleeping)_per" $L/ncu_${s}_$mode.txt
done; done
pack
st done
