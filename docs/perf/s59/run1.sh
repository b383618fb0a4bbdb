#!/bin/bash
# s59 call 1: the fifty-eighth session's plan (docs/perf/s58/run1.sh: the GPU tests of its host-side checks, the
# Python suite with torch CUDA, decode_step, the demo) plus the full benchmark, on dev/bin/s58/t (the tree's library,
# built as that script's header says; no kernel changed since the fifty-sixth session's full run). Carry ["dev/bin/s58/t"].
T=dev/bin/s58/t
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $L/gpu.txt
for b in test_bad_input test_default_strides test_cuda_bad_data test_fuzz_bad_data test_inflight test_cuda_graph; do
  st $b
  KVATTN_TEST_QUICK=1 timeout 100 $T/$b > $L/$b.log 2>&1
  echo "$b rc=$? $(grep -E "passed, [0-9]+ failed" $L/$b.log | tail -1)"
  grep -m3 FAIL $L/$b.log
done
pack
st decode_step; timeout 60 $T/decode_step > $L/decode_step.log 2>&1; echo "decode_step rc=$? $(tail -1 $L/decode_step.log)"
st demo; timeout 90 $T/demo --requests 256 > $L/demo.log 2>&1; echo "demo rc=$? $(grep -i checked $L/demo.log | tail -1)"
pack
st bench
timeout 220 $T/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "eiling|8x8192|64x4096|FAIL" $L/cuda_bench.md | head -24
grep -A4 "Inflight" $L/cuda_bench.md | tail -2; grep -E "16384" $L/cuda_bench.md | tail -3
pack
left=$(( 575 - ($(date +%s) - t0) ))
st python, $left s left
KVATTN_LIBRARY=$PWD/$T/libkvattn.so timeout $left bash tests/run_python.sh > $L/py.log 2>&1
echo "python rc=$? $(tail -1 $L/py.log)"; grep -m5 FAILED $L/py.log
pack
st done
