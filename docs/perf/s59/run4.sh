#!/bin/bash
# s59 call 4: memcheck of test_bad_input again with the provoked API errors off (call 3's 4 "errors" were the test's own
# deliberate cudaMalloc out-of-memory in run_pending_error, which KVATTN_TEST_NO_API_ERRORS=1 skips), then
# test_default_strides and test_cuda_bad_data (quick, exact allocations). Carry ["dev/bin/s58/t"].
T=dev/bin/s58/t
L=$OUT/logs; mkdir -p $L
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
for b in test_bad_input test_default_strides test_cuda_bad_data; do
  left=$(( 280 - ($(date +%s) - t0) )); [ $left -lt 15 ] && break
  st memcheck $b
  KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout $left compute-sanitizer --tool memcheck \
    --error-exitcode 99 --leak-check no $T/$b > $L/mc_$b.log 2>&1
  echo "memcheck $b rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_$b.log | tail -2 | paste -sd' ')"
done
st done
