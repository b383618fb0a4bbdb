#!/bin/bash
# s54 call 2: the library of call 1 (dev/bin/s54/tree, the (m, log2 l) split merge) under compute-sanitizer memcheck:
# the GPU suite, quick grids, exact allocations (no guard bytes), provoked API errors off.
T=dev/bin/s54/tree
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
mc() {
  st memcheck $1
  KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout $2 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $T/$1 > $L/mc_$1.log 2>&1
  echo "memcheck $1 rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_$1.log | tail -2 | paste -sd' ')"
  pack
}
mc test_huge_scores 50; mc test_cuda_split 70; mc test_cuda_packed 40; mc test_cuda_graph 40; mc test_cuda_invariance 40
mc test_inflight 70; mc test_cuda_stress 70; mc test_cuda_bad_data 80; mc test_grid 100
st done
