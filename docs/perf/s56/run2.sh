#!/bin/bash
# s56 call 2: the shipped library (dev/bin/s56/t). (a) the first eleven C test binaries; (b) Python with torch;
# (c) demo and decode_step.
T=dev/bin/s56/t
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
st C suite part 1
timeout 380 bash tests/run_all.sh $T/test_bad_input $T/test_big_offsets $T/test_cpu_limits $T/test_cuda_bad_data \
  $T/test_cuda_graph $T/test_cuda_invariance $T/test_cuda_limits $T/test_cuda_packed $T/test_cuda_reset \
  $T/test_cuda_split $T/test_cuda_stress > $L/c_part1.log 2>&1; echo "C part 1 rc=$?"
grep -E "^test_[a-z0-9_]+: [0-9]+ passed|^[0-9]+ passed|FAIL|exited" $L/c_part1.log | head -40
pack
st python
KVATTN_LIBRARY=$PWD/$T/libkvattn.so timeout 80 bash tests/run_python.sh > $L/py.log 2>&1; echo "python rc=$?"
grep -E "^python:|FAILED" $L/py.log | tail -3
pack
timeout 40 $T/demo --requests 256 > $L/demo.log 2>&1; echo "demo rc=$?"; tail -1 $L/demo.log
$T/decode_step > $L/decode_step.log 2>&1; echo "decode_step rc=$?"
pack
st done
