#!/bin/bash
# s44 call 3: the rest of the GPU suite under memcheck on fin (v98), then the peers at the decode shapes
N=dev/bin/s44/fin
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
for t in test_cuda_graph test_cuda_limits test_inflight test_cuda_stress test_pages test_grid; do
  st memcheck $t
  KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $N/$t > $L/mc_$t.log 2>&1
  echo "memcheck $t rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_$t.log | tail -2 | paste -sd' ')"
  pack
done
st compare
KVATTN_LIBRARY=$PWD/$N/libkvattn.so PYTHONPATH=python timeout 150 python3 bench/compare.py --workloads decode --bl 8x8192,12x4096,18x4096,17x8192 --pages contig,16 --systems kvattn,fa2,cudnn --no-plots --out $L/cmp > $L/compare.log 2>&1; echo "compare rc=$?"
tail -n 24 $L/compare.log
pack
st done
