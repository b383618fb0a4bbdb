#!/bin/bash
# asan_loop.sh — fresh-seed runs of the CPU randomized tests under AddressSanitizer + UBSan, one thread, until a time
# limit; prints each failure (its seed lines) and "runs=N fails=M". Not a CI step: a longer search for rare failures.
#   make test-asan (or .ci/run) first, then: bash dev/asan_loop.sh build-asan 1500
# (fifty-seventh session: 1500 s on a CI clone's build-asan, 250 runs, 0 failed)
B=${1:?usage: asan_loop.sh BUILD_DIR SECONDS}; end=$(( $(date +%s) + ${2:?seconds} )); n=0; fails=0
while [ $(date +%s) -lt $end ]; do
  for t in test_fuzz_bad_data test_bad_input test_pages test_grid test_inflight; do
    out=$(KVATTN_TEST_QUICK=1 KVATTN_TEST_EXACT_ALLOC=1 OMP_NUM_THREADS=1 timeout 300 "$B/$t" 2>&1); rc=$?
    n=$((n + 1))
    if [ $rc -ne 0 ]; then
      fails=$((fails + 1)); echo "FAIL rc=$rc $t"
      echo "$out" | grep -E "seed|FAIL|ERROR|runtime error" | head -5
    fi
  done
done
echo "runs=$n fails=$fails"
[ $fails = 0 ]
