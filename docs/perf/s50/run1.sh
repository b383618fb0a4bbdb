#!/bin/bash
# s50 call 1: (a) the shipped library's full bench_cuda run and demo (this session's figures; no kernel changed);
# (b) the Python tests, now drawing fresh inputs each run (session seed) with the rotated-query term in their
# bounds, run repeatedly on the shipped library with fresh seeds, counting failures and the worst error / bound;
# (c) the same tests with KVATTN_TEST_MUTANT=1 (the reference drops each sequence's first key): must fail.
N=dev/bin/s48/head
L=$OUT/logs; mkdir -p $L/fail
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $L/gpu.txt
st bench
timeout 150 $N/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "eiling|8x8192|64x4096|inflight|16384|^\| [0-9.]+ \|" $L/cuda_bench.md | head -40
pack
st demo
timeout 40 $N/demo --requests 256 > $L/demo.log 2>&1; echo "demo rc=$?"; tail -n 2 $L/demo.log
pack
export KVATTN_LIBRARY=$PWD/$N/libkvattn.so
st mutant
KVATTN_TEST_MUTANT=1 timeout 60 bash tests/run_python.sh -rA > $L/py_mutant.log 2>&1; echo "mutant rc=$?"
grep -E "kvattn tests|^python:" $L/py_mutant.log
echo "mutant: test_grid torch-cuda passed: $(grep -c '^PASSED.*test_grid\[torch-cuda' $L/py_mutant.log), failed: $(grep -c '^FAILED.*test_grid\[torch-cuda' $L/py_mutant.log)"
grep '^PASSED.*test_grid\[torch-cuda' $L/py_mutant.log | head
pack
st python loop
end=$(( $(date +%s) + 240 )); runs=0; fails=0
while [ $(date +%s) -lt $end ]; do
  log=$L/fail/py_$runs.log
  timeout 60 bash tests/run_python.sh > $log 2>&1; rc=$?
  runs=$((runs + 1))
  grep -E "kvattn tests|^python:" $log | paste -sd' ' >> $L/py_loop.txt
  if [ $rc -ne 0 ]; then fails=$((fails + 1)); else rm -f $log; fi
done
echo "python loop: $runs runs, $fails failed" | tee -a $L/py_loop.txt
python3 - $L/py_loop.txt <<'PY'
import re, sys
o = l = 0.0
for line in open(sys.argv[1]):
    m = re.search(r"out ([0-9.]+), lse ([0-9.]+)", line)
    if m:
        o, l = max(o, float(m.group(1))), max(l, float(m.group(2)))
print(f"worst over the loop: out {o:.3f}, lse {l:.3f}")
PY
tail -n 3 $L/py_loop.txt
pack
st done
