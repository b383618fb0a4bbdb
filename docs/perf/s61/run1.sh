#!/bin/bash
# s61 plan, call 1 (NOT RUN in the sixty-first session: no device was lent). For the next session that holds an H200.
# Builds the tree on the device (no carry), then: the GPU tests that the sixty-first session's host changes touch
# (test_bad_input: kvattn_backend_available's reason; test_pages), memcheck of test_bad_input, the quick GPU tests,
# and the full benchmark (the host's enqueue time has not been measured since the sixtieth session's arch check).
B=build-s61
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
sum() { grep -E "^test_[a-z0-9_]+: [0-9]+ passed|FAIL|exited|^[0-9]+ passed" $1 | head -24; }
nvidia-smi --query-gpu=name,compute_cap,clocks.sm,clocks.mem,temperature.gpu --format=csv > $L/gpu.txt; cat $L/gpu.txt
st build
make -j16 BUILD=$B CPU_ARCH=-march=x86-64-v2 lib bench $(ls tests/test_*.c | sed "s|tests/\(.*\)\.c|$B/\1|") \
  $B/decode_step $B/demo > $L/build.log 2>&1; echo "build rc=$?"; tail -3 $L/build.log
pack
st tests
timeout 120 bash tests/run_all.sh $B/test_bad_input $B/test_pages $B/test_cuda_arch > $L/host.log 2>&1; echo "rc=$?"
sum $L/host.log
KVATTN_TEST_QUICK=1 timeout 120 bash tests/run_all.sh $B/test_grid $B/test_inflight $B/test_cuda_graph \
  $B/test_cuda_invariance $B/test_cuda_split > $L/quick.log 2>&1; echo "rc=$?"; sum $L/quick.log
KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout 90 compute-sanitizer --tool memcheck \
  --error-exitcode 99 --leak-check no $B/test_bad_input > $L/mc_bad_input.log 2>&1
echo "memcheck rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_bad_input.log | tail -2 | paste -sd' ')"
pack
st bench full
timeout 150 $B/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "eiling|8x8192|64x4096|FAIL" $L/cuda_bench.md | head -24
grep -A4 "Inflight" $L/cuda_bench.md | tail -2; grep -E "16384" $L/cuda_bench.md | tail -3
st decode_step; timeout 60 $B/decode_step > $L/decode_step.log 2>&1; echo "decode_step rc=$? $(tail -1 $L/decode_step.log)"
st demo; timeout 90 $B/demo --requests 256 > $L/demo.log 2>&1; echo "demo rc=$? $(grep -i checked $L/demo.log | tail -1)"
pack
st done
