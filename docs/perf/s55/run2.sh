#!/bin/bash
# s55 call 2: the library of call 1 (dev/bin/s55/t: strides left at KVATTN_STRIDE_PACKED resolved in src/api.c).
# (a) the C test binaries call 1 did not run (test_default_strides onwards); (b) compute-sanitizer memcheck of the
# new test (quick grid, exact allocations, provoked API errors off); (c) the Python suite with torch; (d) make demo's
# program at 256 requests and decode_step; (e) dev/numerics_probe.py (parts (c) - (e) new: fp16 P underflow, fp16
# output near 65504, a non-finite key masked for earlier rows).
T=dev/bin/s55/t
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
st C suite part 2
timeout 300 bash tests/run_all.sh $T/test_default_strides $T/test_fuzz_bad_data $T/test_grid $T/test_huge_scores \
  $T/test_inflight $T/test_overlap $T/test_pages $T/test_silent > $L/c_part2.log 2>&1; echo "C part 2 rc=$?"
grep -E "^test_[a-z_]+: [0-9]+ passed|^[0-9]+ passed|FAIL|exited" $L/c_part2.log | head -20
pack
st memcheck test_default_strides
KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout 60 compute-sanitizer --tool memcheck \
  --error-exitcode 99 --leak-check no $T/test_default_strides > $L/mc_test_default_strides.log 2>&1
echo "memcheck rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_test_default_strides.log | tail -2 | paste -sd' ')"
pack
st python
KVATTN_LIBRARY=$PWD/$T/libkvattn.so timeout 150 bash tests/run_python.sh > $L/py.log 2>&1; echo "python rc=$?"
grep -E "kvattn tests|^python:|FAILED|passed|failed" $L/py.log | tail -5
pack
st demo and decode_step
timeout 40 $T/demo --requests 256 > $L/demo.log 2>&1; echo "demo rc=$?"; tail -3 $L/demo.log
$T/decode_step > $L/decode_step.log 2>&1; echo "decode_step rc=$?"; cat $L/decode_step.log
pack
st numerics probe
PYTHONPATH=$PWD/python KVATTN_LIBRARY=$PWD/$T/libkvattn.so timeout 90 python3 dev/numerics_probe.py > $L/numerics_probe.log 2>&1
echo "probe rc=$?"; grep -c "does not" $L/numerics_probe.log
pack
st done
