#!/bin/bash
# s49 call 4: hunting other rare failures: the tree's C GPU suite three times in a row with fresh seeds
# (each test prints its KVATTN_TEST_SEED); every run's summary kept, full logs of failing tests kept.
N=dev/bin/s49/tree
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
for r in 1 2 3; do
  st round $r
  timeout 175 bash tests/run_all.sh $N/test_* > $L/suite_$r.log 2>&1; echo "round $r rc=$?"
  grep -E "FAIL|exited|no summary" $L/suite_$r.log | head -10; tail -n 1 $L/suite_$r.log
  grep -E "seed=" $L/suite_$r.log > $L/seeds_$r.txt
  pack
  [ $(( $(date +%s) - t0 )) -gt 370 ] && break
done
st done
