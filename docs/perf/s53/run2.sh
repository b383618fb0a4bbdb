#!/bin/bash
# s53 call 2: this session's tree (host-side C changes: validate.c refuses total_q/total_knew without offsets, CPU
# messages, kvattn_pages_truncate; kernels unchanged since ba67322) with the coverage audit's new tests: the whole C
# GPU suite, decode_step and the demo (now reading the device status after every call), and compute-sanitizer
# memcheck of the new test_cuda_packed and test_cuda_split cases. Binaries: dev/bin/s53/tree (built here).
T=dev/bin/s53/tree
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
st C suite
timeout 330 bash tests/run_all.sh $T/test_* > $L/c_suite.log 2>&1; echo "C suite rc=$?"
grep -E "^test_[a-z_]+: [0-9]+ passed|^[0-9]+ passed|^FAIL" $L/c_suite.log | head -40
pack
st decode_step + demo
$T/decode_step > $L/decode_step.log 2>&1; echo "decode_step rc=$?"
timeout 60 $T/demo --requests 256 > $L/demo.log 2>&1; echo "demo rc=$?"; tail -6 $L/demo.log
pack
st memcheck
for t in test_cuda_packed test_cuda_split; do
  KVATTN_TEST_QUICK=1 KVATTN_TEST_EXACT_ALLOC=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 9 \
    $T/$t > $L/memcheck_$t.log 2>&1; echo "memcheck $t rc=$?"; grep -E "ERROR SUMMARY|passed" $L/memcheck_$t.log | tail -2
  pack
done
st done
