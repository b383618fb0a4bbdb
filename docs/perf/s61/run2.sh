#!/bin/bash
# s61 plan, call 2 (NOT RUN in the sixty-first session: no device was lent). Needs run1.sh's build-s61 on the same
# warm machine (else rebuild as run1.sh does): the whole C suite with full grids, then the Python suite with torch CUDA.
B=build-s61
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
[ -x $B/test_grid ] || { echo "no $B: run run1.sh first on this machine"; exit 2; }
st C suite
timeout 480 bash tests/run_all.sh $(ls tests/test_*.c | sed "s|tests/\(.*\)\.c|$B/\1|") > $L/c_suite.log 2>&1
echo "C suite rc=$?"; grep -E "^test_[a-z0-9_]+: [0-9]+ passed|^[0-9]+ passed|FAIL|exited" $L/c_suite.log | head -30
pack
left=$(( 585 - ($(date +%s) - t0) ))
if [ $left -gt 30 ]; then
  st python, $left s
  KVATTN_LIBRARY=$PWD/$B/libkvattn.so timeout $left bash tests/run_python.sh > $L/py.log 2>&1
  echo "python rc=$? $(tail -1 $L/py.log)"; grep -m5 FAILED $L/py.log
fi
pack
st done
