#!/bin/bash
# s44 call 3: the final library (dev/bin/s44/fin, built from the committed tree): the Python GPU tests (the C ones: call 2), memcheck
# (split, invariance, bad_data, grid quick, stress quick), the full bench_cuda, the demo
N=dev/bin/s44/fin
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $L/machine.txt 2>&1
st python
KVATTN_LIBRARY=$PWD/$N/libkvattn.so timeout 100 bash tests/run_python.sh > $L/test_py.log 2>&1; echo "python rc=$?"; tail -n 2 $L/test_py.log
pack
st bench
timeout 200 $N/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "Ceiling|ceiling|8x8192|64x4096|inflight|16384" $L/bench.log | head -30
pack
st demo
timeout 40 $N/demo --requests 256 > $L/demo.log 2>&1; echo "demo rc=$?"; tail -n 3 $L/demo.log
pack
for t in test_cuda_split test_cuda_invariance test_cuda_bad_data test_grid test_cuda_stress; do
  st memcheck $t
  KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $N/$t > $L/mc_$t.log 2>&1
  echo "memcheck $t rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_$t.log | tail -2 | paste -sd' ')"
  pack
done
st done
