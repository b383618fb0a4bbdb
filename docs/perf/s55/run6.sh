#!/bin/bash
# s55 call 6: the final library (dev/bin/s55/t3: call 3's kernels; host validation now refuses a tensor whose set and
# unset strides overlap, kv_check_mixed_strides) with the tests changed after call 5: test_default_strides (new
# validation cases), test_fp16_max (a third mode: +-inf and NaN values must pass the clamp), test_bad_input; then
# test_inflight, test_cuda_graph, the Python suite, decode_step, demo. Short device budget: each under a timeout.
T=dev/bin/s55/t3
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
st C tests
timeout 120 bash tests/run_all.sh $T/test_default_strides $T/test_fp16_max $T/test_bad_input $T/test_cuda_graph \
  $T/test_inflight > $L/c_tests.log 2>&1; echo "C rc=$?"
grep -E "^test_[a-z0-9_]+: [0-9]+ passed|^[0-9]+ passed|FAIL|exited" $L/c_tests.log | head -20
pack
st python
KVATTN_LIBRARY=$PWD/$T/libkvattn.so timeout 40 bash tests/run_python.sh > $L/py.log 2>&1; echo "python rc=$?"
grep -E "^python:|FAILED" $L/py.log | tail -3
$T/decode_step > $L/decode_step.log 2>&1; echo "decode_step rc=$?"
timeout 25 $T/demo --requests 128 > $L/demo.log 2>&1; echo "demo rc=$?"; tail -1 $L/demo.log
pack
st done
