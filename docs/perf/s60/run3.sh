#!/bin/bash
# s60 call 3: more of the shipped library (dev/bin/s60/cand = the tree's library, run1.sh's header) under
# compute-sanitizer memcheck, quick grids, exact allocations, provoked API errors off, each test in turn while time
# is left (run1 / run2 covered test_cuda_invariance and test_grid). Carry ["dev/bin/s60/cand"].
T=dev/bin/s60/cand
L=$OUT/logs; mkdir -p $L
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
for b in test_cuda_split test_inflight test_cuda_graph test_cuda_packed test_default_strides test_big_offsets \
         test_cuda_stress test_cuda_bad_data test_fuzz_bad_data test_huge_scores test_fp16_max test_rounding; do
  left=$(( 470 - ($(date +%s) - t0) )); [ $left -lt 20 ] && break
  st memcheck $b
  KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout $left compute-sanitizer --tool memcheck \
    --error-exitcode 99 --leak-check no $T/$b > $L/mc_$b.log 2>&1
  echo "memcheck $b rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_$b.log | tail -2 | paste -sd' ')"
done
(cd $OUT && tar czf logs.tgz logs)
st done
