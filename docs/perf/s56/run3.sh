#!/bin/bash
# s56 call 3: the shipped library (dev/bin/s56/t). (a) the other nine C test binaries; (b) compute-sanitizer memcheck
# (quick grids, exact allocations, provoked API errors off) of the GPU test binaries the fifty-fifth session did not
# memcheck.
T=dev/bin/s56/t
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
mc() {
  left=$(( 580 - ($(date +%s) - t0) )); lim=$2; [ $left -lt $lim ] && lim=$left
  [ $lim -lt 10 ] && { echo "memcheck $1 not run: no time left"; return; }
  st memcheck $1
  env KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout $lim compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $T/$1 > $L/mc_$1.log 2>&1
  echo "memcheck $1 rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_$1.log | tail -2 | paste -sd' ')"
  pack
}
st C suite part 2
timeout 200 bash tests/run_all.sh $T/test_default_strides $T/test_fp16_max $T/test_fuzz_bad_data $T/test_grid \
  $T/test_huge_scores $T/test_inflight $T/test_overlap $T/test_pages $T/test_silent > $L/c_part2.log 2>&1
echo "C part 2 rc=$?"; grep -E "^test_[a-z0-9_]+: [0-9]+ passed|^[0-9]+ passed|FAIL|exited" $L/c_part2.log | head -20
pack
for t in test_huge_scores test_cuda_bad_data test_cuda_invariance test_inflight test_silent test_overlap \
         test_big_offsets test_fuzz_bad_data test_grid test_cuda_limits; do mc $t 90; done
st done
