#!/bin/bash
# s59 call 2: the fifty-seventh session's run2 + run4 bench parts in one call (the benchmark is faster than they
# assumed: the full run took 46 s in call 1). Builds (prepared in the fifty-seventh session, dev/bin/s57/, headers of
# docs/perf/s57/run2.sh and run4.sh): dvbench = shipped kernels, dev build; v107 = the split aimed at every resident
# decode block (dev/experiments/v107_split_resident_blocks.patch), dev build; swz = v107 + DP 64 swizzled stages.
# Carry ["dev/bin/s57/dvbench", "dev/bin/s57/v107", "dev/bin/s57/swz"].
# (a) bench_cuda --quick, decode 8x8192, 64x4096, 128x2048, 256x1024, two rounds in reversed order, guard 260 s;
# (b) v107's and swz's GPU tests (quick grids), v107's at the depths of its candidates too;
# (c) memcheck of v107's test_cuda_split and test_inflight with the time left.
V=dev/bin/s57/v107; T=dev/bin/s57/dvbench; S=dev/bin/s57/swz
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
CFG=("d32_dv:$T:32:" "d32_v107:$V:32:" "d64_dv:$T:64:" "d64_v107_ns3:$V:64:KVATTN_DEV_STAGES=3" "d64_swz:$S:64:"
     "d96_dv:$T:96:" "d96_v107_ns2:$V:96:KVATTN_DEV_STAGES=2" "d128_dv:$T:128:" "d128_v107:$V:128:")
for r in 1 2; do
  for i in "${!CFG[@]}"; do
    c=${CFG[$(( r == 1 ? i : ${#CFG[@]} - 1 - i ))]}
    IFS=: read -r name bin d envs <<< "$c"
    [ $(( $(date +%s) - t0 )) -gt 260 ] && break 2
    st round $r $name "($envs)"
    env $envs KVATTN_DEV_OCC_LOG=1 KVATTN_BENCH_D=$d KVATTN_BENCH_DECODE=8x8192,64x4096,128x2048,256x1024 timeout 60 \
      $bin/bench_cuda --quick --md $L/${name}_r$r.md --json $L/${name}_r$r.json > $L/${name}_r$r.log 2>&1; echo "rc=$?"
    grep -E "x[0-9]+ \| (contiguous|paged 16)|FAIL" $L/${name}_r$r.md | cut -d'|' -f2-8
    [ $r = 1 ] && grep -E "kvattn (occupancy: dtype bf16 DP $d .* decode 1 early 1 self 0 append 0|decode grid)" $L/${name}_r$r.log | sort -u | head -4
  done
  pack
done
for s in "" 3 2; do
  [ $(( $(date +%s) - t0 )) -gt 400 ] && { echo "no time left for v107 tests at stages ${s:-shipped}"; continue; }
  st tests v107 stages "${s:-shipped}"
  B="$V/test_grid $V/test_inflight"; [ -z "$s" ] && B="$B $V/test_cuda_split $V/test_cuda_invariance $V/test_cuda_graph"
  env ${s:+KVATTN_DEV_STAGES=$s} KVATTN_TEST_QUICK=1 timeout 90 bash tests/run_all.sh $B > $L/tests_v107_${s:-shipped}.log 2>&1
  echo "tests rc=$?"; grep -E "^test_[a-z0-9_]+: [0-9]+ passed|FAIL|exited|^[0-9]+ passed" $L/tests_v107_${s:-shipped}.log | head -8
  pack
done
if [ $(( $(date +%s) - t0 )) -lt 430 ]; then
  st tests swz
  KVATTN_TEST_QUICK=1 timeout 90 bash tests/run_all.sh $S/test_grid $S/test_inflight $S/test_cuda_split > $L/tests_swz.log 2>&1
  echo "tests rc=$?"; grep -E "^test_[a-z0-9_]+: [0-9]+ passed|FAIL|exited|^[0-9]+ passed" $L/tests_swz.log | head -8
  pack
fi
for b in test_cuda_split test_inflight; do
  left=$(( 580 - ($(date +%s) - t0) )); [ $left -lt 20 ] && break
  st memcheck v107 $b, $left s
  KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout $left compute-sanitizer --tool memcheck \
    --error-exitcode 99 --leak-check no $V/$b > $L/mc_$b.log 2>&1
  echo "memcheck $b rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_$b.log | tail -2 | paste -sd' ')"
  pack
done
st done
