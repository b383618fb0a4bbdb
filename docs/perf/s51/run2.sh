#!/bin/bash
# s51 call 2: the tree's tests on the H200 (binaries built here from this tree's
# src/ (kernels unchanged since ba67322), C at -march=x86-64-v2, tests linked to its libkvattn.so: dev/bin/s51/tree). (a) the C GPU suite once, fresh seed, with
# the new lse bound (1e-4 max(|lse|,1) + dq in every dtype; each binary prints its worst error / bound), the new
# tests test_big_offsets (caches past 2^32 elements) and test_silent (nothing printed), and the helper's
# strengthened test_grid / test_cuda_invariance / bad-input tests; (b) the Python tests with the per-stream
# workspaces, then test_two_streams_at_once against the old shared-workspace _cuda.py (must fail: "differ");
# (c) memcheck of the new tests and of test_cuda_invariance; (d) examples/generate_inflight.py --quick (graphs).
B=dev/bin/s51/tree
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,memory.used --format=csv > $L/gpu.txt
st C suite
timeout 230 bash tests/run_all.sh $B/test_* > $L/c_suite.log 2>&1; echo "C suite rc=$?"
grep -E "^test_[a-z_]+: ([0-9]+ passed|worst)|^[0-9]+ passed|skipped\)|FAIL" $L/c_suite.log | head -60
pack
export KVATTN_LIBRARY=$PWD/$B/libkvattn.so
st python
timeout 120 bash tests/run_python.sh > $L/py.log 2>&1; echo "python rc=$?"
grep -E "kvattn tests|^python:|FAILED|Error" $L/py.log | head -20
pack
st two-stream mutant
rm -rf /tmp/oldpkg && cp -r python /tmp/oldpkg && cp dev/experiments/s51_shared_workspace_cuda.py /tmp/oldpkg/kvattn/_cuda.py
for i in 1 2; do
  KVATTN_TEST_INSTALLED=1 PYTHONPATH=/tmp/oldpkg timeout 60 python3 -m pytest -q -p no:cacheprovider tests/python/test_cuda.py -k two_streams > $L/py_two_streams_old_$i.log 2>&1
  echo "old package, run $i: rc=$? $(grep -cE 'differ from the same calls' $L/py_two_streams_old_$i.log) 'differ' lines; $(grep -oE 'round [0-9]+: calls \[[0-9, ]+\]' $L/py_two_streams_old_$i.log | head -1)"
done
timeout 60 bash tests/run_python.sh -k two_streams > $L/py_two_streams_new.log 2>&1; echo "new package: rc=$? $(grep '^python:' $L/py_two_streams_new.log)"
pack
mc() {
  local t=$1 secs=$2; shift 2
  st memcheck $t
  env KVATTN_TEST_EXACT_ALLOC=1 KVATTN_TEST_QUICK=1 "$@" timeout $secs compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $B/$t > $L/mc_$t.log 2>&1
  echo "memcheck $t rc=$? $(grep -E "^$t: [0-9]+ passed|ERROR SUMMARY" $L/mc_$t.log | tail -2 | paste -sd' ')"
  pack
}
mc test_big_offsets 70
mc test_silent 25
st generate_inflight
timeout 100 python3 examples/generate_inflight.py --quick --out $L/generate_inflight.json > $L/generate_inflight.log 2>&1; echo "generate_inflight rc=$?"
grep -iE "cuda graphs|fail|error|passed|summary" $L/generate_inflight.log | head -12
pack
mc test_cuda_invariance 45
st done
