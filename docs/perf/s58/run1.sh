#!/bin/bash
# s58 plan, one call (PREPARED IN THE FIFTY-EIGHTH SESSION, NOT RUN: no device machine was lent in that session).
# The fifty-eighth session changed host code only (src/validate.c, src/api.c: index arrays may not share memory with
# written tensors or the CUDA workspace; base addresses multiples of their element size; the mixed-strides message);
# no kernel changed. This call runs the GPU tests that exercise those checks, on the tree's library:
# dev/bin/s58/t = the tree built with `make BUILD=dev/bin/s58/build CPU_ARCH=-march=x86-64-v2 -j2 lib` and
# `bash dev/relink.sh dev/bin/s58/build dev/bin/s58/t` (~3 minutes here). Carry ["dev/bin/s58/t"] (~39 MiB; with the
# tree ~49 MiB, under the 64 MiB limit). About 5 minutes with a warm machine (an estimate, not timed); no memcheck needed (no kernel change),
# but test_bad_input under memcheck is cheap and is run last while time is left.
#   test_bad_input: its CUDA cases, with the new "cuda index array or out inside the workspace" (refused before any
#     launch) and the index-array / misalignment argument cases on the CUDA backend;
#   test_default_strides, test_cuda_bad_data, test_fuzz_bad_data, test_inflight, test_cuda_graph (quick): valid calls
#     on the GPU must still be accepted by the stricter validation;
#   the Python suite (torch CUDA): the package's fixes of this session (python/kvattn/*.py, tests/python);
#   decode_step and the demo: the README's two user paths.
T=dev/bin/s58/t
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $L/gpu.txt
for b in test_bad_input test_default_strides test_cuda_bad_data test_fuzz_bad_data test_inflight test_cuda_graph; do
  st $b
  KVATTN_TEST_QUICK=1 timeout 120 $T/$b > $L/$b.log 2>&1
  echo "$b rc=$? $(grep -E "passed, [0-9]+ failed" $L/$b.log | tail -1)"
  grep -m3 FAIL $L/$b.log
done
pack
st python; KVATTN_LIBRARY=$PWD/$T/libkvattn.so timeout 240 bash tests/run_python.sh > $L/py.log 2>&1
echo "python rc=$? $(tail -1 $L/py.log)"; grep -m5 FAILED $L/py.log
pack
st decode_step; timeout 60 $T/decode_step > $L/decode_step.log 2>&1; echo "decode_step rc=$? $(tail -1 $L/decode_step.log)"
st demo; timeout 120 $T/demo --requests 256 > $L/demo.log 2>&1; echo "demo rc=$? $(grep -i checked $L/demo.log | tail -1)"
pack
left=$(( 560 - ($(date +%s) - t0) ))
if [ $left -gt 60 ]; then
  st memcheck test_bad_input
  KVATTN_TEST_QUICK=1 KVATTN_TEST_EXACT_ALLOC=1 timeout $left compute-sanitizer --tool memcheck --error-exitcode 99 \
    --leak-check no $T/test_bad_input > $L/mc_test_bad_input.log 2>&1
  echo "memcheck test_bad_input rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_test_bad_input.log | tail -2 | paste -sd' ')"
fi
pack
st done
