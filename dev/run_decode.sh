#!/bin/bash
# dev/run_decode.sh — one device call for the decode/launch work: validate + memcheck the dev harness, its
# bench (decode, fixed cost, inflight split by part, prefill), ncu kernel durations of the inflight step, then
# the library's GPU tests. Logs under $OUT.
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
BIN=dev/bin/attn_test
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem --format=csv > $OUT/gpu.txt
echo "== validate"; timeout 120 $BIN validate > $OUT/validate.log 2>&1; echo "rc=$?"; tail -4 $OUT/validate.log
echo "== bench"; timeout 150 $BIN bench > $OUT/bench.log 2>&1; cat $OUT/bench.log
echo "== ncu"; timeout 120 ncu --clock-control none --metrics gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed,sm__warps_active.avg.pct_of_peak_sustained_active -k regex:kv_ $BIN profile_inflight > $OUT/ncu.log 2>&1
grep -E "kv_|duration|dram__|warps_active" $OUT/ncu.log | tail -24
if [ "${LIBTEST:-1}" = 1 ]; then
  echo "== lib tests"; SKIP_PYTHON=${SKIP_PYTHON:-1} OUT=$OUT/lib timeout 300 bash bench/gpu_run.sh test | tail -12
fi
if [ "${MEMCHECK:-1}" = 1 ]; then
  echo "== memcheck"; timeout 150 compute-sanitizer --tool memcheck --print-limit 10 $BIN quick > $OUT/memcheck.log 2>&1; tail -3 $OUT/memcheck.log
fi
