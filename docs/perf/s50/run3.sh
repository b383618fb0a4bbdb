#!/bin/bash
# s50 call 3: the shipped library (kernels of ba67322) and the tree's C tests (dev/bin/s49/tree, unchanged since
# s49) under compute-sanitizer: memcheck of every GPU test (quick, exact allocations; the page-16 prefill stress at
# its full 1000 iterations), then racecheck (KVATTN_NO_LEAN=1, hazard report) of test_grid (quick), test_cuda_graph
# and test_inflight (quick): the decode kernels changed after the fortieth session's last racecheck.
N=dev/bin/s49/tree
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
mc() {
  local t=$1 secs=$2; shift 2
  st memcheck $t
  env KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 "$@" timeout $secs compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $N/$t > $L/mc_$t.log 2>&1
  echo "memcheck $t rc=$? $(grep -E "^$t: [0-9]+ passed|ERROR SUMMARY" $L/mc_$t.log | tail -2 | paste -sd' ')"
  pack
}
mc test_cuda_stress 130 KVATTN_STRESS_ITERS=1000
mc test_cuda_split 50 KVATTN_TEST_QUICK=1
mc test_cuda_bad_data 50 KVATTN_TEST_QUICK=1
mc test_cuda_invariance 40 KVATTN_TEST_QUICK=1
mc test_cuda_graph 20 KVATTN_TEST_QUICK=1
mc test_inflight 20 KVATTN_TEST_QUICK=1
mc test_fuzz_bad_data 40 KVATTN_TEST_QUICK=1
mc test_bad_input 25 KVATTN_TEST_QUICK=1
mc test_cuda_limits 15 KVATTN_TEST_QUICK=1
mc test_grid 40 KVATTN_TEST_QUICK=1
rc_() {
  local t=$1 secs=$2
  st racecheck $t
  KVATTN_NO_LEAN=1 KVATTN_TEST_QUICK=1 timeout $secs compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 99 $N/$t > $L/rc_$t.log 2>&1
  echo "racecheck $t rc=$? $(grep -E "^$t: [0-9]+ passed|RACECHECK SUMMARY|ERROR SUMMARY" $L/rc_$t.log | tail -2 | paste -sd' ')"
  pack
}
rc_ test_cuda_graph 40; rc_ test_inflight 40; rc_ test_grid 50
st done
