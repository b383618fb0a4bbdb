#!/bin/bash
# s55 call 7: more of the C GPU suite on the final library (dev/bin/s55/t3), in the device time left (one 95 s run).
T=dev/bin/s55/t3
L=$OUT/logs; mkdir -p $L
timeout 95 bash tests/run_all.sh $T/test_cuda_packed $T/test_cuda_reset $T/test_cuda_invariance $T/test_cuda_split \
  $T/test_huge_scores $T/test_cuda_stress > $L/c_tests.log 2>&1; echo "C rc=$?"
grep -E "^test_[a-z0-9_]+: [0-9]+ passed|^[0-9]+ passed|FAIL|exited" $L/c_tests.log | head -20
(cd $OUT && tar czf logs.tgz logs)
