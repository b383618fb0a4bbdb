#!/bin/bash
# s52 call 5: the committed library (CUDA code of 215d545: call 3's build, dev/bin/s52/old; the later commits change
# only comments in C sources, docs, Python and tests) with the tree's tests relinked to it (dev/bin/s52/tree): the
# whole C GPU suite, test_cpu_limits (its x86-64-v2 build ran past 170 s in call 2, before the fmaf fix) and the
# Python suite (PagedKVCache.step with a one-shot out iterable is new).
T=dev/bin/s52/tree
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
md5sum $T/libkvattn.so dev/bin/s52/old/libkvattn.so
st C suite
timeout 400 bash tests/run_all.sh $T/test_* > $L/c_suite.log 2>&1; echo "C suite rc=$?"
grep -E "^test_[a-z_]+: [0-9]+ passed|^[0-9]+ passed|skipped\)|^FAIL" $L/c_suite.log | head -40
pack
export KVATTN_LIBRARY=$PWD/$T/libkvattn.so
st python
timeout 90 bash tests/run_python.sh > $L/py.log 2>&1; echo "python rc=$?"; grep -E "kvattn tests|^python:" $L/py.log
pack
st done
