#!/bin/bash
# s54 call 3: the library of call 1 (dev/bin/s54/tree): decode_step, the demo, the Python suite, and memcheck of the
# other GPU tests, test_cuda_split again with a longer timeout (quick grids, exact allocations, provoked API errors off).
T=dev/bin/s54/tree
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
st decode_step + demo
$T/decode_step > $L/decode_step.log 2>&1; echo "decode_step rc=$?"; tail -1 $L/decode_step.log
timeout 60 $T/demo --requests 256 > $L/demo.log 2>&1; echo "demo rc=$?"; tail -3 $L/demo.log
pack
st python
KVATTN_LIBRARY=$PWD/$T/libkvattn.so timeout 200 bash tests/run_python.sh > $L/py.log 2>&1; echo "python rc=$?"; grep -E "kvattn tests|^python:|passed|FAILED" $L/py.log | tail -4
pack
mc() {
  st memcheck $1
  KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout $2 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $T/$1 > $L/mc_$1.log 2>&1
  echo "memcheck $1 rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_$1.log | tail -2 | paste -sd' ')"
  pack
}
mc test_cuda_split 150; mc test_cuda_packed 40; mc test_inflight 60; mc test_grid 90
st done
