#!/bin/bash
# s53 call 1: (a) bench_cuda's rotary branch (KVATTN_BENCH_APPEND=2), whose bounds were fixed in the fifty-second
# session after its first run failed (inflight 13.4x of the bound) and not re-run there; (b) the default full run
# (bounds unchanged without rotary); (c) the Python suite (new: PagedKVCache.truncate, append's width check, a
# generation loop that drops speculative tokens). Binaries built here from this session's tree (C at
# -march=x86-64-v2, linked to its libkvattn.so: dev/bin/s53/tree). Kernels unchanged since ba67322.
T=dev/bin/s53/tree
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $L/gpu.txt
st rope
KVATTN_BENCH_APPEND=2 timeout 150 $T/bench_cuda --quick > $L/bench_rope.log 2>&1; echo "rope rc=$?"
grep -E "x[0-9]+ |inflight|FAIL" $L/bench_rope.log | head -40
pack
st bench
timeout 240 $T/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "eiling|8x8192|64x4096|inflight|16384|^\| [0-9.]+ \||FAIL" $L/cuda_bench.md | head -60
pack
export KVATTN_LIBRARY=$PWD/$T/libkvattn.so
st python
timeout 150 bash tests/run_python.sh > $L/py.log 2>&1; echo "python rc=$?"; grep -E "kvattn tests|^python:|FAILED" $L/py.log | head
pack
st done
