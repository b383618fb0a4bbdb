#!/bin/bash
# run.sh ID [full]  -- apply mutant ID, rebuild, run the CPU tests (quick; full with 2nd arg), revert
cd /tmp/mutaudit
id=$1; mode=${2:-quick}
git checkout -q src
loc=$(python3 mutrun/apply.py mutrun/mutants.json $id) || { echo "$id: apply failed: $loc"; exit 2; }
T="test_rounding test_pages test_bad_input test_overlap test_silent test_big_offsets test_default_strides test_inflight test_fuzz_bad_data test_fp16_max test_huge_scores test_grid test_cpu_limits"
if ! make BUILD=build-mut NVCC= -j2 $(for t in $T; do echo build-mut/$t; done) > mutrun/$id.build.log 2>&1; then echo "$id $loc: BUILD FAILED"; tail -5 mutrun/$id.build.log; git checkout -q src; exit 3; fi
caught=""
for t in $T; do
  if [ "$mode" = quick ]; then export KVATTN_TEST_QUICK=1; else unset KVATTN_TEST_QUICK; fi
  OMP_NUM_THREADS=2 timeout 300 ./build-mut/$t > mutrun/$id.$mode.$t.log 2>&1; rc=$?
  summ=$(grep -E '^[^ ]+: [0-9]+ passed, [0-9]+ failed' mutrun/$id.$mode.$t.log | tail -1)
  if [ $rc -ne 0 ]; then caught="$caught $t(rc=$rc: ${summ#*: })"; fi
done
git checkout -q src
echo "$id $loc [$mode]: ${caught:-SURVIVED}"
