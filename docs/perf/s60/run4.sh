#!/bin/bash
# s60 call 4: the final library after the review of the arch check (dev/bin/s60/fin: the tree, C at -march=x86-64-v2,
# tests relinked to its .so except test_cuda_arch, which calls an internal function and links the static library;
# stripped): kvattn_forward now answers NOT_AVAILABLE before looking at the workspace, devices below 8.0 get their own
# message, and test_cuda_arch checks that kvattn_backend_available / kvattn_workspace_size create no CUDA context.
# dev/bin/s60/a80b = the same tree built with make CUDA_ARCH=80. Carry ["dev/bin/s60/fin", "dev/bin/s60/a80b"].
F=dev/bin/s60/fin; A=dev/bin/s60/a80b
L=$OUT/logs; mkdir -p $L
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
sum() { grep -E "^test_[a-z0-9_]+: [0-9]+ passed|FAIL|exited|^[0-9]+ passed|not available" $1 | head -14; }
st fin
timeout 120 bash tests/run_all.sh $F/test_cuda_arch $F/test_bad_input > $L/fin_full.log 2>&1; echo "rc=$?"; sum $L/fin_full.log
KVATTN_TEST_QUICK=1 timeout 120 bash tests/run_all.sh $F/test_cuda_graph $F/test_default_strides $F/test_grid \
  $F/test_inflight $F/test_cuda_bad_data > $L/fin_quick.log 2>&1; echo "rc=$?"; sum $L/fin_quick.log
timeout 30 $F/decode_step > $L/decode_step.log 2>&1; echo "decode_step rc=$? $(tail -1 $L/decode_step.log)"
st a80b
timeout 60 bash tests/run_all.sh $A/test_cuda_arch $A/test_bad_input $A/test_cuda_graph > $L/a80b.log 2>&1; echo "rc=$?"
sum $L/a80b.log
st python
KVATTN_LIBRARY=$PWD/$F/libkvattn.so timeout 90 bash tests/run_python.sh > $L/py.log 2>&1
echo "python rc=$? $(tail -1 $L/py.log)"; grep -m5 FAILED $L/py.log
left=$(( 280 - ($(date +%s) - t0) ))
if [ $left -gt 20 ]; then
  st memcheck test_bad_input, $left s
  KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout $left compute-sanitizer --tool memcheck \
    --error-exitcode 99 --leak-check no $F/test_bad_input > $L/mc_bad_input.log 2>&1
  echo "memcheck rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_bad_input.log | tail -2 | paste -sd' ')"
fi
(cd $OUT && tar czf logs.tgz logs)
st done
