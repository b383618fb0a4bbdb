#!/bin/bash
# s54 calls 9, 10 and 11: the Python suite with torch on the H200 after the Python errors' naming change (python/kvattn only;
# the library is call 1's, dev/bin/s54/tree).
T=dev/bin/s54/tree
L=$OUT/logs; mkdir -p $L
KVATTN_LIBRARY=$PWD/$T/libkvattn.so timeout 200 bash tests/run_python.sh > $L/py.log 2>&1; echo "python rc=$?"
grep -E "kvattn tests|^python:|FAILED" $L/py.log | tail -5
(cd $OUT && tar czf logs.tgz logs)
