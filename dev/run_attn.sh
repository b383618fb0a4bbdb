#!/bin/bash
# dev/run_attn.sh — one device call: validate every variant against the float64 reference, memcheck the
# validation, then time decode / inflight / prefill. Logs under $OUT. Binary built beforehand (see
# docs/perf/attn_notes.md): nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -DKVATTN_SM90A=1 -Iinclude -Isrc \
#   --expt-relaxed-constexpr dev/attn_test.cu -o dev/bin/attn_test   (carried as dev/bin)
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
BIN=${BIN:-dev/bin/attn_test}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee $OUT/gpu.txt
echo "== validate"; timeout 150 $BIN validate 2>&1 | tee $OUT/validate.log
if [ "${MEMCHECK:-1}" = 1 ]; then
  echo "== memcheck"; timeout 200 compute-sanitizer --tool memcheck --print-limit 20 $BIN quick 2>&1 | tail -25 | tee $OUT/memcheck.log
fi
for ns in ${STAGES:-0}; do
  echo "== bench stages=$ns"; timeout 200 $BIN bench $ns 2>&1 | tee -a $OUT/bench.log
done
