#!/bin/bash
# s51 call 4: test_two_streams_at_once reshaped so that two calls fit on the GPU at once (2 sequences x 2 kv heads x
# 8 splits = 32 blocks of 8k keys each): against the old shared-workspace _cuda.py four times (must fail with
# "differ"), against the new package twice (must pass). Call 3's shape (512 blocks per call) caught the old
# package in 1 of 3 runs.
B=dev/bin/s51/tree
L=$OUT/logs; mkdir -p $L
export KVATTN_LIBRARY=$PWD/$B/libkvattn.so
rm -rf /tmp/oldpkg && cp -r python /tmp/oldpkg && cp dev/experiments/s51_shared_workspace_cuda.py /tmp/oldpkg/kvattn/_cuda.py
for i in 1 2 3 4; do
  KVATTN_TEST_INSTALLED=1 PYTHONPATH=/tmp/oldpkg timeout 40 python3 -m pytest -q -p no:cacheprovider tests/python/test_cuda.py -k two_streams > $L/two_streams_old_$i.log 2>&1
  echo "old package, run $i: rc=$? $(grep -oE '^E +AssertionError: round [0-9]+: calls \[[0-9, ]+\]' $L/two_streams_old_$i.log | head -1) $(grep -oE '^E +TypeError.*' $L/two_streams_old_$i.log | head -1)"
done
for i in 1 2; do
  timeout 40 bash tests/run_python.sh -k two_streams > $L/two_streams_new_$i.log 2>&1; echo "new package, run $i: rc=$? $(grep '^python:' $L/two_streams_new_$i.log)"
done
(cd $OUT && tar czf logs.tgz logs)
