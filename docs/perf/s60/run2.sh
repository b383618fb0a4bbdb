#!/bin/bash
# s60 call 2: the candidate's (dev/bin/s60/cand, run1.sh's header) whole C test suite on the GPU, full grids, then
# memcheck of test_grid (quick, exact allocations) and the Python suite with torch CUDA in the time left.
# Carry ["dev/bin/s60/cand"].
T=dev/bin/s60/cand
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
st C suite
timeout 420 bash tests/run_all.sh $T/test_grid $T/test_default_strides $T/test_inflight $T/test_cuda_invariance \
  $T/test_cuda_split $T/test_cuda_packed $T/test_cuda_graph $T/test_big_offsets $T/test_huge_scores $T/test_fp16_max \
  $T/test_silent $T/test_pages $T/test_cuda_reset $T/test_cuda_limits $T/test_cpu_limits $T/test_overlap \
  $T/test_cuda_stress $T/test_cuda_bad_data $T/test_fuzz_bad_data $T/test_bad_input $T/test_rounding > $L/c_suite.log 2>&1
echo "C suite rc=$?"; grep -E "^test_[a-z0-9_]+: [0-9]+ passed|^[0-9]+ passed|FAIL|exited" $L/c_suite.log | head -30
pack
left=$(( 500 - ($(date +%s) - t0) ))
if [ $left -gt 20 ]; then
  st memcheck test_grid, $left s
  KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout $left compute-sanitizer --tool memcheck \
    --error-exitcode 99 --leak-check no $T/test_grid > $L/mc_grid.log 2>&1
  echo "memcheck rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_grid.log | tail -2 | paste -sd' ')"
fi
pack
left=$(( 585 - ($(date +%s) - t0) ))
if [ $left -gt 30 ]; then
  st python, $left s
  KVATTN_LIBRARY=$PWD/$T/libkvattn.so timeout $left bash tests/run_python.sh > $L/py.log 2>&1
  echo "python rc=$? $(tail -1 $L/py.log)"; grep -m5 FAILED $L/py.log
fi
pack
st done
