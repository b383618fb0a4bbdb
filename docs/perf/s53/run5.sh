#!/bin/bash
# s53 call 5: the session's last library (CPU backend: per-tile sums into the accumulator, NaN-safe kv_exp;
# validation: softmax_scale > 2.3e38 refused; kernels unchanged) and tests: test_grid (three new forced
# batch-invariant long-cache prefill cases), test_bad_input, test_cpu_limits (drift and NaN-key cases), the Python
# suite; then dev/numerics_probe.py, the numerics audit's two CUDA predictions measured (tied scores through split
# merges; unmasked prefill tiles at huge scores).
T=dev/bin/s53/tree
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
st tests
timeout 200 bash tests/run_all.sh $T/test_grid $T/test_bad_input $T/test_cpu_limits > $L/c_tests.log 2>&1; echo "C rc=$?"
grep -E "^test_[a-z_]+: [0-9]+ passed|^[0-9]+ passed|^FAIL" $L/c_tests.log | head -10
pack
export KVATTN_LIBRARY=$PWD/$T/libkvattn.so
st python
timeout 150 bash tests/run_python.sh > $L/py.log 2>&1; echo "python rc=$?"; grep -E "kvattn tests|^python:|FAILED" $L/py.log | head
pack
st probe
PYTHONPATH=$PWD/python timeout 100 python3 dev/numerics_probe.py > $L/numerics_probe.log 2>&1; echo "probe rc=$?"; cat $L/numerics_probe.log | head -40
pack
st done
# As run, the probe line above lacked PYTHONPATH and failed ("No module named 'kvattn'"; fixed above since); it was
# run again at once, on the same warm machine, as: KVATTN_LIBRARY=$PWD/dev/bin/s53/tree/libkvattn.so PYTHONPATH=$PWD/python python3 dev/numerics_probe.py
# (run5/numerics_probe.log is that second run's output).
