#!/bin/bash
# dev/run_prefill_sm90.sh — one device call for the sm_90a prefill kernel: wgmma unit test, validation against
# the float64 reference, memcheck of the quick validation, then timings. Logs under $OUT. Binary built
# beforehand (carried as dev/bin):
#   nvcc -O3 -std=c++17 -gencode arch=compute_90a,code=sm_90a -Iinclude -Isrc --expt-relaxed-constexpr \
#     -Xcompiler -fopenmp dev/prefill_sm90_test.cu -o dev/bin/prefill_sm90_test -lgomp
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
BIN=${BIN:-dev/bin/prefill_sm90_test}
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv | tee $OUT/gpu.txt
echo "== unit"; timeout 60 $BIN unit 2>&1 | tee $OUT/unit.log
for v in ${VARIANTS:-0 1 2}; do
  echo "== validate variant $v"; timeout 240 $BIN validate $v 2>&1 | tee -a $OUT/validate.log
done
if [ "${MEMCHECK:-1}" = 1 ]; then
  echo "== memcheck"; timeout 240 compute-sanitizer --tool memcheck --print-limit 10 $BIN quick 2>&1 | tail -15 | tee $OUT/memcheck.log
fi
echo "== bench"; timeout 150 $BIN bench 2>&1 | tee $OUT/bench.log
