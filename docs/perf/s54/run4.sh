#!/bin/bash
# s54 call 4: the library of call 1 (dev/bin/s54/tree) under compute-sanitizer memcheck: the GPU tests that calls 2 - 3
# did not run under it (quick grids, exact allocations, provoked API errors off; the small-page stress at its full
# 1000 iterations).
T=dev/bin/s54/tree
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
mc() {
  st memcheck $1
  env KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 $3 timeout $2 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $T/$1 > $L/mc_$1.log 2>&1
  echo "memcheck $1 rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_$1.log | tail -2 | paste -sd' ')"
  pack
}
mc test_cuda_stress 200 KVATTN_STRESS_ITERS=1000; mc test_cuda_bad_data 110; mc test_fuzz_bad_data 80; mc test_cuda_reset 30
mc test_bad_input 40
st done
