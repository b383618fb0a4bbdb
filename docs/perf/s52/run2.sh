#!/bin/bash
# s52 call 2: this session's tree (36b7e21: CPU split bounds in int64, the written-tensor overlap check in validate.c,
# Python offset checks; kernels unchanged) built here (C at -march=x86-64-v2, tests linked to its libkvattn.so:
# dev/bin/s52/tree). test_grid (not reached in call 1), test_bad_input (validation changed for both backends), the
# new test_overlap and test_cpu_limits, the Python suite (the fifty-first session's NaN-filled out and empty-out
# changes never ran on a GPU; this session's new Python tests), and examples/generate_inflight.py --quick (graphs).
T=dev/bin/s52/tree
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
for t in test_grid test_bad_input test_overlap test_cpu_limits; do
  st $t
  timeout 170 $T/$t > $L/$t.log 2>&1; echo "$t rc=$? $(grep -E "^$t: ([0-9]+ passed|worst)" $L/$t.log | paste -sd' ')"
  grep -E "^FAIL" $L/$t.log | head -5
  pack
done
export KVATTN_LIBRARY=$PWD/$T/libkvattn.so
st python
timeout 150 bash tests/run_python.sh > $L/py.log 2>&1; echo "python rc=$?"; grep -E "kvattn tests|^python:|worst" $L/py.log | head
pack
st generate_inflight
timeout 110 python3 examples/generate_inflight.py --quick --out $L/generate_inflight.json > $L/generate_inflight.log 2>&1; echo "generate_inflight rc=$?"
grep -iE "cuda graphs|fail|error|passed|summary" $L/generate_inflight.log | head -12
pack
st done
