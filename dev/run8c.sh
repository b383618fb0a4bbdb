#!/usr/bin/env bash
# session 8, run c: early start v3 (EARLY template instance, prefill kernels start on sched_done)
D=dev/bin/t8; L=$OUT/log.txt
s() { echo "== [$(date +%s)] $*" | tee -a $L; }
s grid; $D/test_grid 2>&1 | tail -1 >> $L
s bad_data; $D/test_cuda_bad_data > $OUT/bad.txt 2>&1; grep -E "FAIL|passed" $OUT/bad.txt | tail -15 >> $L
for t in test_cuda_graph test_cuda_invariance test_inflight test_bad_input; do s $t; $D/$t 2>&1 | tail -1 >> $L; done
s stress; KVATTN_STRESS_ITERS=200 $D/test_cuda_stress 2>&1 | tail -1 >> $L
s memcheck bad_data; KVATTN_TEST_QUICK=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $D/test_cuda_bad_data > $OUT/mc_bad.txt 2>&1; echo rc=$? >> $L; grep -E "ERROR SUMMARY|passed" $OUT/mc_bad.txt | tail -3 >> $L
s memcheck grid; KVATTN_TEST_QUICK=1 timeout 120 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $D/test_grid > $OUT/mc_grid.txt 2>&1; echo rc=$? >> $L; grep -E "ERROR SUMMARY|passed" $OUT/mc_grid.txt | tail -3 >> $L
s timeline; KVATTN_TL_FUSED=1 KVATTN_TL_NONEW=1 $D/attn_tl timeline > $OUT/tl.txt 2>&1
for r in 1 2 3; do
  s "A/B round $r old"; $D/bench_old --quick > $OUT/old$r.txt 2>&1
  s "A/B round $r new"; $D/bench_new --quick > $OUT/new$r.txt 2>&1
  s "A/B round $r new, no early"; KVATTN_NO_EARLY=1 $D/bench_new --quick > $OUT/noe$r.txt 2>&1
done
s done
cd $OUT && tar czf res.tgz *.txt && rm -f old*.txt new*.txt noe*.txt mc_*.txt bad.txt tl.txt
