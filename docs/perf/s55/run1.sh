#!/bin/bash
# s55 call 1: the library with strides left at KVATTN_STRIDE_PACKED resolved at the entry points (src/api.c
# with_strides; no kernel change). (a) the full benchmark (bench_cuda --md --json); (b) the first eleven C test
# binaries (test_bad_input .. test_cuda_stress; the rest in call 2). Binaries built here (C at -march=x86-64-v2,
# linked to their libkvattn.so: dev/bin/relink.sh dev/bin/s55/build dev/bin/s55/t).
T=dev/bin/s55/t
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $L/gpu.txt
st bench
timeout 200 $T/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "eiling|8x8192|64x4096|inflight|16384|FAIL" $L/cuda_bench.md | head -40
pack
st C suite part 1
timeout 360 bash tests/run_all.sh $T/test_bad_input $T/test_big_offsets $T/test_cpu_limits $T/test_cuda_bad_data \
  $T/test_cuda_graph $T/test_cuda_invariance $T/test_cuda_limits $T/test_cuda_packed $T/test_cuda_reset \
  $T/test_cuda_split $T/test_cuda_stress > $L/c_part1.log 2>&1; echo "C part 1 rc=$?"
grep -E "^test_[a-z_]+: [0-9]+ passed|^[0-9]+ passed|FAIL|exited" $L/c_part1.log | head -40
pack
st done
