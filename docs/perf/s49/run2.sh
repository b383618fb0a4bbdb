#!/bin/bash
# s49 call 2: the forty-eighth session's one graph-replay failure (dm build, KVATTN_TEST_SEED=913149870784).
# (1) the same seed on the shipped library's own test binary (old/): same failure => not the dm experiment;
# (2) the new test (t/: lse / out bounds plus the harness's rotated-query rounding term) on the same seed and
#     library, printing each case's worst error / bound; (3) its mutant (the reference drops each cache's first
#     key) must fail; (4) the new test and test_cuda_invariance repeated with fresh seeds.
D=dev/bin/s49
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
S=913149870784
st old seed; KVATTN_TEST_SEED=$S timeout 60 $D/old/test_cuda_graph > $L/old_seed.log 2>&1; echo "rc=$?"; grep -E "FAIL|passed" $L/old_seed.log
st new seed; KVATTN_TEST_SEED=$S timeout 60 $D/t/test_cuda_graph > $L/new_seed.log 2>&1; echo "rc=$?"; cat $L/new_seed.log
st mutant seed; KVATTN_TEST_SEED=$S timeout 60 $D/t/test_cuda_graph_mutant > $L/mut_seed.log 2>&1; echo "rc=$?"; grep -c FAIL $L/mut_seed.log; grep -E "passed" $L/mut_seed.log
for i in 1 2 3; do timeout 60 $D/t/test_cuda_graph_mutant > $L/mut_$i.log 2>&1; echo "mutant run $i rc=$? $(grep -E 'passed' $L/mut_$i.log)"; done
pack
st loop new graph
n=0; f=0; end=$(( $(date +%s) + 120 ))
while [ $(date +%s) -lt $end ]; do
  timeout 60 $D/t/test_cuda_graph > $L/g_$n.log 2>&1; rc=$?
  if [ $rc -ne 0 ] || grep -q FAIL $L/g_$n.log; then f=$((f+1)); else grep -h worst $L/g_$n.log >> $L/worst_all.txt; rm -f $L/g_$n.log; fi
  n=$((n+1))
done
echo "new test_cuda_graph: $n runs, $f failed" | tee $L/loop.txt
python3 - $L/worst_all.txt <<'PY' | tee -a $L/loop.txt
import sys,re
o=[];l=[]
for line in open(sys.argv[1]):
    m=re.search(r"out ([0-9.]+), lse ([0-9.]+)",line)
    if m: o.append(float(m.group(1))); l.append(float(m.group(2)))
print("cases %d: worst out/bound max %.2f, lse/bound max %.2f" % (len(o), max(o), max(l)))
PY
pack
st invariance
for i in 1 2 3; do timeout 100 $D/t/test_cuda_invariance > $L/inv_$i.log 2>&1; echo "invariance run $i rc=$? $(grep -E 'passed' $L/inv_$i.log)"; done
pack
st memcheck
KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout 60 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $D/t/test_cuda_graph > $L/mc_graph.log 2>&1
echo "memcheck graph rc=$? $(grep -E 'passed|ERROR SUMMARY' $L/mc_graph.log | tail -2 | paste -sd' ')"
pack
st done
