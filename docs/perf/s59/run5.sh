#!/bin/bash
# s59 call 5, PREPARED, NOT RUN: the first try was refused (no machine could be started), the second because too
# little device time was left. v107 as it would ship: dev/experiments/v107_split_resident_blocks.patch applied to the
# tree, default build (no dev variants), shipped depths, so only DP 32 (head dims 8 - 32, four decode blocks per SM)
# changes plan. dev/bin/s59/t (untracked; rebuild: git apply dev/experiments/v107_split_resident_blocks.patch &&
#   make BUILD=dev/bin/s59/build CPU_ARCH=-march=x86-64-v2 -j2 lib && bash dev/relink.sh dev/bin/s59/build dev/bin/s59/t
#   && git checkout src dev/attn_test.cu; keep libkvattn.so, bench_cuda and the six tests below, 19 MiB).
# GPU tests (quick grids; test_grid runs every head dim 8 - 256 among its forced cases), the bench at head dim 32
# (its check against the reference included), then memcheck of test_grid with the time left. Carry ["dev/bin/s59/t"].
# Sized for the ~3 minutes that were left; a session with a full budget should run the tests without quick too.
T=dev/bin/s59/t
L=$OUT/logs; mkdir -p $L
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
st tests
KVATTN_TEST_QUICK=1 timeout 90 bash tests/run_all.sh $T/test_grid $T/test_inflight $T/test_cuda_invariance $T/test_cuda_graph \
  $T/test_default_strides $T/test_cuda_split > $L/tests.log 2>&1
echo "tests rc=$?"; grep -E "^test_[a-z0-9_]+: [0-9]+ passed|FAIL|exited|^[0-9]+ passed" $L/tests.log | head -12
st bench d32
KVATTN_BENCH_D=32 KVATTN_BENCH_DECODE=8x8192,64x4096,128x2048,256x1024 timeout 40 $T/bench_cuda --quick \
  --md $L/d32.md --json $L/d32.json > $L/d32.log 2>&1; echo "rc=$?"
grep -E "x[0-9]+ \| (contiguous|paged 16)|FAIL" $L/d32.md | cut -d'|' -f2-8; grep -c "| ok" $L/d32.md
left=$(( 175 - ($(date +%s) - t0) ))
if [ $left -gt 20 ]; then
  st memcheck test_grid, $left s
  KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout $left compute-sanitizer --tool memcheck \
    --error-exitcode 99 --leak-check no $T/test_grid > $L/mc_test_grid.log 2>&1
  echo "memcheck test_grid rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_test_grid.log | tail -2 | paste -sd' ')"
fi
st done
