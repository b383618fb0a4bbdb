#!/bin/bash
# s57 plan, call 3 (PREPARED IN THE FIFTY-SEVENTH SESSION, NOT RUN: no device machine was lent in that session).
# compute-sanitizer memcheck (quick grids, exact allocations, provoked API errors off) of v107's build
# (dev/bin/s57/v107, see run2.sh; carry ["dev/bin/s57/v107"]) at the shipped depths: the tests whose plans v107
# changes (head dim 32's splits: test_grid, test_inflight; the split and lean paths: test_cuda_split,
# test_cuda_invariance), then test_grid again with KVATTN_DEV_STAGES=3 (DP 64 at three blocks per SM), each limited
# to the time left (580 s in all).
V=dev/bin/s57/v107
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
mc() { # mc NAME BINARY LIMIT [ENV...]
  local name=$1 bin=$2 lim=$3; shift 3
  local left=$(( 580 - ($(date +%s) - t0) )); [ $left -lt $lim ] && lim=$left
  [ $lim -lt 10 ] && { echo "memcheck $name not run: no time left"; return; }
  st memcheck $name
  env "$@" KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout $lim \
    compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $V/$bin > $L/mc_$name.log 2>&1
  echo "memcheck $name rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_$name.log | tail -2 | paste -sd' ')"
  pack
}
mc test_cuda_split test_cuda_split 180
mc test_inflight test_inflight 120
mc test_cuda_invariance test_cuda_invariance 120
mc test_grid test_grid 120
mc test_grid_ns3 test_grid 120 KVATTN_DEV_STAGES=3
st done
