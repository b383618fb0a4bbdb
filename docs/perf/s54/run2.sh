#!/bin/bash
# s54 call 2: the library of call 1 (dev/bin/s54/tree, the (m, log2 l) split merge). (a) the C tests that call 1's
# suite did not reach before its timeout (test_fuzz_bad_data onwards; test_huge_scores with the CUDA prefill rows'
# bound of one 16-bit ulp, whose reason call 1 measured); (b) compute-sanitizer memcheck of the split-merge tests
# (quick grids, exact allocations, provoked API errors off).
T=dev/bin/s54/tree
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
st C suite rest
timeout 280 bash tests/run_all.sh $T/test_fuzz_bad_data $T/test_grid $T/test_huge_scores $T/test_inflight $T/test_overlap $T/test_pages $T/test_silent > $L/c_rest.log 2>&1; echo "C rest rc=$?"
grep -E "^test_[a-z_]+: [0-9]+ passed|^[0-9]+ passed|FAIL|exited" $L/c_rest.log | head -20
pack
mc() {
  st memcheck $1
  KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout $2 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $T/$1 > $L/mc_$1.log 2>&1
  echo "memcheck $1 rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_$1.log | tail -2 | paste -sd' ')"
  pack
}
mc test_huge_scores 60; mc test_cuda_split 70; mc test_cuda_graph 40; mc test_cuda_invariance 40
st done
