#!/bin/bash
# s52 call 4: the kernels' smem settings cached per context (cudaDeviceReset), on top of call 3's tree. Kernels
# unchanged. (a) test_cuda_reset against the library before this change (dev/bin/s52/old, expected to fail after the
# first reset) and after it; (b) the whole C GPU suite and the Python suite on the new library; (c) the full bench
# (host time per call with the context query); (d) memcheck of test_cuda_reset.
# Outcome: the old library passed test_cuda_reset too (the runtime keeps the attribute across a reset), so the
# per-context cache was not kept; the committed library is call 3's (dev/bin/s52/old is that build).
T=dev/bin/s52/tree
O=dev/bin/s52/old
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
st reset-old
timeout 60 $O/test_cuda_reset > $L/reset_old.log 2>&1; echo "old library: rc=$? $(grep -E '^test_cuda_reset: [0-9]+ passed' $L/reset_old.log)"; grep -m2 FAIL $L/reset_old.log | cut -c1-300
st reset-new
timeout 60 $T/test_cuda_reset > $L/reset_new.log 2>&1; echo "new library: rc=$? $(grep -E '^test_cuda_reset: [0-9]+ passed' $L/reset_new.log)"; grep -m2 FAIL $L/reset_new.log | cut -c1-300
pack
st C suite
timeout 330 bash tests/run_all.sh $(ls $T/test_* | grep -v test_cpu_limits) > $L/c_suite.log 2>&1; echo "C suite rc=$?"
grep -E "^test_[a-z_]+: [0-9]+ passed|^[0-9]+ passed|skipped\)|^FAIL" $L/c_suite.log | head -40
pack
export KVATTN_LIBRARY=$PWD/$T/libkvattn.so
st python
timeout 90 bash tests/run_python.sh > $L/py.log 2>&1; echo "python rc=$?"; grep -E "^python:" $L/py.log
pack
st bench
timeout 120 $T/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "8x8192 \| (contig|paged 16)|64x4096 \| (contig|paged 16)|^\| [0-9.]+ \||16384 \| [0-9]|FAIL" $L/cuda_bench.md | head
pack
st memcheck
KVATTN_TEST_EXACT_ALLOC=1 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $T/test_cuda_reset > $L/mc_reset.log 2>&1
echo "memcheck test_cuda_reset rc=$? $(grep -E '^test_cuda_reset: [0-9]+ passed|ERROR SUMMARY' $L/mc_reset.log | paste -sd' ')"
pack
st done
