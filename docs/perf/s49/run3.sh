#!/bin/bash
# s49 call 3: the tree's tests (two changed this session) on the shipped library: the C GPU suite, decode_step,
# the Python tests, memcheck of the two changed tests (quick).
N=dev/bin/s49/tree
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
export PYTHONPATH=python
st tests
timeout 260 bash tests/run_all.sh $N/test_* > $L/test_c.log 2>&1; echo "test-c rc=$?"; grep -E "FAIL|passed|exited|no summary|worst" $L/test_c.log | tail -30
timeout 20 $N/decode_step > $L/decode_step.log 2>&1; echo "decode_step rc=$?"; tail -n 1 $L/decode_step.log
pack
st python
KVATTN_LIBRARY=$PWD/$N/libkvattn.so timeout 120 bash tests/run_python.sh > $L/test_py.log 2>&1; echo "python rc=$?"; tail -n 1 $L/test_py.log
pack
mc() {
  st memcheck $1
  KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout $2 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $N/$1 > $L/mc_$1.log 2>&1
  echo "memcheck $1 rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_$1.log | tail -2 | paste -sd' ')"
  pack
}
mc test_cuda_graph 40; mc test_cuda_invariance 120
st done
