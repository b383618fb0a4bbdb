#!/bin/bash
# s54 call 3: the library of call 1 (dev/bin/s54/tree): decode_step, the demo, and the Python suite.
T=dev/bin/s54/tree
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
st decode_step + demo
$T/decode_step > $L/decode_step.log 2>&1; echo "decode_step rc=$?"; tail -1 $L/decode_step.log
timeout 60 $T/demo --requests 256 > $L/demo.log 2>&1; echo "demo rc=$?"; tail -4 $L/demo.log
pack
export KVATTN_LIBRARY=$PWD/$T/libkvattn.so
st python
timeout 240 bash tests/run_python.sh > $L/py.log 2>&1; echo "python rc=$?"; grep -E "kvattn tests|^python:|passed|FAILED" $L/py.log | tail -5
pack
st done
