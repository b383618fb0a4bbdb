#!/usr/bin/env bash
# One device call that checks a kernel change with prebuilt binaries and times it against the old code (eighth
# session, v30): the GPU tests, memcheck on the bad-data and grid tests, a timeline, then ROUNDS alternating rounds
# of bench_cuda --quick for bench_old, bench_new and bench_new with KVATTN_NO_EARLY=1.
#   carry D (default dev/bin/t8) with test_* binaries, attn_tl (dev/attn_test.cu, -DKVATTN_TIMELINE), bench_old,
#   bench_new; run: bash dev/device_ab.sh; the logs come back as $OUT/res.tgz and $OUT/log.txt
D=${D:-dev/bin/t8}; L=$OUT/log.txt
s() { echo "== [$(date +%s)] $*" | tee -a $L; }
s grid; $D/test_grid 2>&1 | tail -1 >> $L
s bad_data; $D/test_cuda_bad_data > $OUT/bad.txt 2>&1; grep -E "FAIL|passed" $OUT/bad.txt | tail -15 >> $L
for t in test_cuda_graph test_cuda_invariance test_inflight test_bad_input; do s $t; $D/$t 2>&1 | tail -1 >> $L; done
s stress; KVATTN_STRESS_ITERS=200 $D/test_cuda_stress 2>&1 | tail -1 >> $L
s memcheck bad_data; KVATTN_TEST_QUICK=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $D/test_cuda_bad_data > $OUT/mc_bad.txt 2>&1; echo rc=$? >> $L; grep -E "ERROR SUMMARY|passed" $OUT/mc_bad.txt | tail -3 >> $L
s memcheck grid; KVATTN_TEST_QUICK=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $D/test_grid > $OUT/mc_grid.txt 2>&1; echo rc=$? >> $L; grep -E "ERROR SUMMARY|passed" $OUT/mc_grid.txt | tail -3 >> $L
s timeline; KVATTN_TL_FUSED=1 KVATTN_TL_NONEW=1 $D/attn_tl timeline > $OUT/tl.txt 2>&1
for r in $(seq 1 ${ROUNDS:-3}); do
  s "A/B round $r old"; $D/bench_old --quick > $OUT/old$r.txt 2>&1
  s "A/B round $r new"; $D/bench_new --quick > $OUT/new$r.txt 2>&1
  s "A/B round $r new, no early"; KVATTN_NO_EARLY=1 $D/bench_new --quick > $OUT/noe$r.txt 2>&1
done
s done
cd $OUT && tar czf res.tgz *.txt && rm -f old*.txt new*.txt noe*.txt mc_*.txt bad.txt tl.txt
