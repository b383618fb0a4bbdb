#!/bin/bash
# s55 call 4: the library of call 3 (dev/bin/s55/t2: fp16 outputs clamped). (a) the C test binaries call 3 did not
# run; (b) compute-sanitizer memcheck (quick grids, exact allocations, provoked API errors off) of test_fp16_max,
# test_cuda_split, test_cuda_packed; (c) Python with torch, demo, decode_step, numerics probe; (d) memcheck of the
# small-page prefill stress at 1000 iterations.
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
st C suite part 2
timeout 200 bash tests/run_all.sh $T/test_default_strides $T/test_fp16_max $T/test_fuzz_bad_data $T/test_grid \
  $T/test_huge_scores $T/test_inflight $T/test_overlap $T/test_pages $T/test_silent > $L/c_part2.log 2>&1
echo "C part 2 rc=$?"; grep -E "^test_[a-z_]+: [0-9]+ passed|^[0-9]+ passed|FAIL|exited" $L/c_part2.log | head -20
pack
mc test_fp16_max 60; mc test_cuda_split 70; mc test_cuda_packed 40
st python
KVATTN_LIBRARY=$PWD/$T/libkvattn.so timeout 60 bash tests/run_python.sh > $L/py.log 2>&1; echo "python rc=$?"
grep -E "^python:|FAILED" $L/py.log | tail -3
timeout 40 $T/demo --requests 256 > $L/demo.log 2>&1; echo "demo rc=$?"; tail -1 $L/demo.log
$T/decode_step > $L/decode_step.log 2>&1; echo "decode_step rc=$?"
PYTHONPATH=$PWD/python KVATTN_LIBRARY=$PWD/$T/libkvattn.so timeout 60 python3 dev/numerics_probe.py > $L/numerics_probe.log 2>&1
echo "probe rc=$?"; grep "P up, v = 65504  " $L/numerics_probe.log | cut -c1-200
pack
left=$(( 560 - ($(date +%s) - t0) )); echo "left for the stress: $left s"
mc test_cuda_stress $left KVATTN_STRESS_ITERS=1000
st done
