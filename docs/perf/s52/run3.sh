#!/bin/bash
# s52 call 3: this session's tree after the host-side CUDA fixes (failed launches clear the runtime's last error,
# the v0 launch's message names the kernel) and bench_cuda's stronger check (up to 8 sequences per decode row,
# 12 in the inflight step, first / middle / last rows of prompts, appended rows checked, bounds at the row's scale,
# NaN-poisoned outputs; each row prints its worst error as a fraction of its bound). Kernels unchanged.
# Binaries built here (C at -march=x86-64-v2, linked to its libkvattn.so: dev/bin/s52/tree).
T=dev/bin/s52/tree
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $L/gpu.txt
st bench
timeout 240 $T/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "eiling|8x8192|64x4096|inflight|16384|^\| [0-9.]+ \||FAIL" $L/cuda_bench.md | head -60
pack
for t in test_cuda_graph test_cuda_bad_data test_inflight test_big_offsets test_silent; do
  st $t
  timeout 100 $T/$t > $L/$t.log 2>&1; echo "$t rc=$? $(grep -E "^$t: ([0-9]+ passed|worst)" $L/$t.log | paste -sd' ')"
  grep -E "^FAIL" $L/$t.log | head -5
  pack
done
export KVATTN_LIBRARY=$PWD/$T/libkvattn.so
st python
timeout 120 bash tests/run_python.sh > $L/py.log 2>&1; echo "python rc=$?"; grep -E "kvattn tests|^python:" $L/py.log | head
pack
st done
