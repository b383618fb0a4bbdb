#!/bin/bash
# s49 call 1: (a) the shipped library's full bench_cuda run and demo (this session's figures; no kernel changed);
# (b) repeated runs of the tests that exercise the early-start protocol (graph replays, batch invariance, inflight,
# split merges) on the shipped library, fresh random inputs each run, counting failures; and the same graph test on
# s48's deferred-merge build (dm), which failed once in s48, to see how often it fails and whether HEAD ever does.
D=dev/bin/s48
L=$OUT/logs; mkdir -p $L/fail
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $L/gpu.txt
N=$D/head
st bench
timeout 150 $N/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "eiling|8x8192|64x4096|inflight|16384|^\| [0-9.]+ \|" $L/cuda_bench.md | head -40
pack
st demo
timeout 40 $N/demo --requests 256 > $L/demo.log 2>&1; echo "demo rc=$?"; tail -n 2 $L/demo.log
pack
# loop BUILD SECONDS TEST...: run the tests in turn until SECONDS pass; count runs and failures per test
loop() {
  local b=$1 secs=$2; shift 2
  local end=$(( $(date +%s) + secs ))
  declare -A runs fails
  while [ $(date +%s) -lt $end ]; do
    for t in "$@"; do
      local log=$L/fail/${b}_${t}_${runs[$t]:-0}.log
      timeout 60 $D/$b/$t > $log 2>&1; rc=$?
      runs[$t]=$(( ${runs[$t]:-0} + 1 ))
      if [ $rc -ne 0 ] || grep -q FAIL $log; then fails[$t]=$(( ${fails[$t]:-0} + 1 )); else rm -f $log; fi
    done
  done
  for t in "$@"; do echo "$b $t: ${runs[$t]:-0} runs, ${fails[$t]:-0} failed"; done | tee -a $L/loops.txt
}
st loop head graph
loop head 100 test_cuda_graph
pack
st loop dm graph
loop dm 100 test_cuda_graph
pack
st loop head others
loop head 110 test_cuda_invariance test_inflight test_cuda_split
pack
grep -h -E "FAIL|exited" $L/fail/*.log 2>/dev/null | head -20
st done
