#!/bin/bash
# s52 call 1: the full bench_cuda run and demo on binaries built here from this tree (src/ unchanged since 0f24afb,
# kernels of ba67322; C at -march=x86-64-v2, linked to its libkvattn.so: dev/bin/s52/tree), then every C GPU test
# but test_grid on the same build: the fifty-first session's test changes that never ran on a GPU (the 2e-3 lse
# bound, kvt_is_poison / kvt_problem_run_case in harness.c) and this session's test_cuda_stress skip count.
T=dev/bin/s52/tree
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $L/gpu.txt
st bench
timeout 150 $T/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "eiling|8x8192|64x4096|inflight|16384|^\| [0-9.]+ \|" $L/cuda_bench.md | head -40
pack
st demo
timeout 40 $T/demo --requests 256 > $L/demo.log 2>&1; echo "demo rc=$?"; tail -n 2 $L/demo.log
pack
for t in test_bad_input test_big_offsets test_cuda_bad_data test_cuda_graph test_cuda_invariance test_cuda_limits \
         test_cuda_split test_cuda_stress test_fuzz_bad_data test_inflight test_pages test_silent; do
  st $t
  timeout 120 $T/$t > $L/$t.log 2>&1; echo "$t rc=$? $(grep -E "^$t: ([0-9]+ passed|worst)" $L/$t.log | paste -sd' ')"
  grep -E "^FAIL" $L/$t.log | head -5
  pack
done
st done
