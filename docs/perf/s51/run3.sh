#!/bin/bash
# s51 call 3: call 2's C suite stopped at its 230 s limit inside test_grid, and test_fuzz_bad_data's worst lse error
# was 0.89 of the new 1e-4 bound: the 16-bit lse bound is now 1e-3 max(|lse|,1) + dq (tests rebuilt and relinked:
# dev/bin/s51/tree). Runs the C tests that call 2 did not reach (test_grid, test_inflight, test_pages,
# test_silent) and test_fuzz_bad_data again, then the two-stream test (12 rounds now) against the old
# shared-workspace _cuda.py three times and against the new package once, then the Python suite once.
B=dev/bin/s51/tree
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
for t in test_grid test_inflight test_silent test_pages test_fuzz_bad_data; do
  st $t
  timeout 150 $B/$t > $L/$t.log 2>&1; echo "$t rc=$? $(grep -E "^$t: ([0-9]+ passed|worst)" $L/$t.log | paste -sd' ')"
  grep -E "^FAIL" $L/$t.log | head -5
  pack
done
export KVATTN_LIBRARY=$PWD/$B/libkvattn.so
st two-stream mutant
rm -rf /tmp/oldpkg && cp -r python /tmp/oldpkg && cp dev/experiments/s51_shared_workspace_cuda.py /tmp/oldpkg/kvattn/_cuda.py
for i in 1 2 3; do
  KVATTN_TEST_INSTALLED=1 PYTHONPATH=/tmp/oldpkg timeout 60 python3 -m pytest -q -p no:cacheprovider tests/python/test_cuda.py -k two_streams > $L/two_streams_old_$i.log 2>&1
  echo "old package, run $i: rc=$? $(grep -oE '^E +AssertionError: round [0-9]+: calls \[[0-9, ]+\]' $L/two_streams_old_$i.log | head -1) $(grep -oE '^E +TypeError.*' $L/two_streams_old_$i.log | head -1)"
done
timeout 60 bash tests/run_python.sh -k two_streams > $L/two_streams_new.log 2>&1; echo "new package: rc=$? $(grep '^python:' $L/two_streams_new.log)"
pack
st python
timeout 90 bash tests/run_python.sh > $L/py.log 2>&1; echo "python rc=$?"; grep -E "kvattn tests|^python:" $L/py.log
pack
st done
