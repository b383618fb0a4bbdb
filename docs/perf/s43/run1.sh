#!/bin/bash
# s43 call 1: HEAD's library (no kernel change since v95b): make test's C and Python halves on the GPU, test_cuda_split
# (its window case moved to 20x4096 after s42's last call) under memcheck, the full bench_cuda, the demo, peers at
# the stream-K shapes
N=dev/bin/s43/fin
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $L/machine.txt 2>&1
st tests
timeout 200 bash tests/run_all.sh $N/decode_step $N/test_* > $L/test_c.log 2>&1; echo "test-c rc=$?"; grep -E "FAIL|passed|exited|no summary" $L/test_c.log | tail -16
st python
KVATTN_LIBRARY=$PWD/$N/libkvattn.so timeout 120 bash tests/run_python.sh > $L/test_py.log 2>&1; echo "python rc=$?"; tail -3 $L/test_py.log
pack
st memcheck split
KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $N/test_cuda_split > $L/mc_split.log 2>&1
echo "memcheck split rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_split.log | tail -2 | paste -sd' ')"
pack
st bench
timeout 200 $N/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "Ceiling|8x8192|64x4096|inflight|16384" $L/bench.log | head -30
pack
st demo
timeout 40 $N/demo --requests 256 > $L/demo.log 2>&1; echo "demo rc=$?"; tail -4 $L/demo.log
pack
st compare
KVATTN_LIBRARY=$PWD/$N/libkvattn.so PYTHONPATH=python timeout 150 python3 bench/compare.py --workloads decode --bl 17x8192,18x4096,20x4096,12x4096,8x8192 --pages contig,16 --systems kvattn,fa2,cudnn --no-plots --out $L/cmp > $L/compare.log 2>&1; echo "compare rc=$?"
tail -30 $L/compare.log
pack
st done
