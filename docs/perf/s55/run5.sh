#!/bin/bash
# s55 call 5: memcheck of test_cuda_split again with a longer timeout (call 4's 70 s ran out, as the fifty-fourth
# session's did), and of test_cuda_graph; the library of call 3 (dev/bin/s55/t2).
T=dev/bin/s55/t2
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
mc() {
  st memcheck $1
  env KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 $3 timeout $2 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $T/$1 > $L/mc_$1.log 2>&1
  echo "memcheck $1 rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_$1.log | tail -2 | paste -sd' ')"
  pack
}
mc test_cuda_split 180; mc test_cuda_graph 40
st done
