#!/bin/bash
# s50 call 2: the README's two commands on a fresh GPU machine with this session's final tree: build everything
# (bench/gpu_run.sh test: make -j, then `make test`, C GPU tests + the Python tests with fresh seeds), then
# `make demo`; logs under $OUT.
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
st gpu_run
timeout 480 bash bench/gpu_run.sh test 2>&1 | tail -25
st demo
timeout 60 make BUILD=build-gpu demo > $OUT/demo.log 2>&1; echo "demo rc=$?"; grep -E "summary|checked" $OUT/demo.log | tail -2
grep -E "kvattn tests|^python:" $OUT/test.log
st done
