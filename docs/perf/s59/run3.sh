#!/bin/bash
# s59 call 3: the tree's whole C test suite on the GPU (dev/bin/s58/t, every test binary, full grids: the fifty-eighth
# session's stricter validation must accept every valid call of every test), after a memcheck of test_bad_input
# (quick, exact allocations: its new cases). Carry ["dev/bin/s58/t"].
T=dev/bin/s58/t
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
st memcheck test_bad_input
KVATTN_TEST_QUICK=1 KVATTN_TEST_EXACT_ALLOC=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 99 \
  --leak-check no $T/test_bad_input > $L/mc_test_bad_input.log 2>&1
echo "memcheck test_bad_input rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_test_bad_input.log | tail -2 | paste -sd' ')"
pack
left=$(( 585 - ($(date +%s) - t0) ))
st C suite, $left s
timeout $left bash tests/run_all.sh $T/test_grid $T/test_default_strides $T/test_inflight $T/test_cuda_invariance \
  $T/test_cuda_split $T/test_cuda_packed $T/test_cuda_graph $T/test_big_offsets $T/test_huge_scores $T/test_fp16_max \
  $T/test_silent $T/test_pages $T/test_cuda_reset $T/test_cuda_limits $T/test_cpu_limits $T/test_overlap \
  $T/test_cuda_stress $T/test_cuda_bad_data $T/test_fuzz_bad_data $T/test_bad_input > $L/c_suite.log 2>&1
echo "C suite rc=$?"; grep -E "^test_[a-z0-9_]+: [0-9]+ passed|^[0-9]+ passed|FAIL|exited" $L/c_suite.log | head -30
pack
st done
