#!/bin/bash
# s45 call 1: the final library fin (v100 + v101 + v102, the default build) — the C GPU tests, decode_step, and the
# GPU suite under memcheck (quick, exact allocations)
N=dev/bin/s45/fin
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $L/machine.txt 2>&1
st tests
timeout 200 bash tests/run_all.sh $N/test_* > $L/test_c.log 2>&1; echo "test-c rc=$?"; grep -E "FAIL|passed|exited|no summary" $L/test_c.log | tail -16
timeout 30 $N/decode_step > $L/decode_step.log 2>&1; echo "decode_step rc=$?"; tail -n 1 $L/decode_step.log
pack
mc() {
  st memcheck $1
  KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout $2 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $N/$1 > $L/mc_$1.log 2>&1
  echo "memcheck $1 rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_$1.log | tail -2 | paste -sd' ')"
  pack
}
mc test_cuda_split 80; mc test_cuda_bad_data 90; mc test_cuda_invariance 50; mc test_cuda_graph 50; mc test_inflight 80; mc test_cuda_stress 80; mc test_grid 100
st done
