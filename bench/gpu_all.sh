#!/usr/bin/env bash
# gpu_all.sh — the one device call that checks a change on the H200: build, `make test` (C + Python, GPU
# included), the benchmark, the GPU demo, then the whole GPU test suite under compute-sanitizer memcheck.
# Logs are packed into $OUT/logs.tgz after every stage (only 8 files come back from the device tool).
#   bash bench/gpu_all.sh            (STAGE_TIMEOUT, MEMCHECK_TIMEOUT in seconds may be set)
set -u
export PYTHONUNBUFFERED=1
OUT=${OUT:-/tmp/kvattn_out}
LOGS=/tmp/kvattn_logs
mkdir -p "$LOGS" "$OUT"
export BUILD=${BUILD:-build-gpu}
pack() { tar czf "$OUT/logs.tgz" -C "$LOGS" . 2>/dev/null; }
stage() { local name=$1 t=$2; shift 2; echo "=== $name"; OUT=$LOGS timeout "$t" "$@" 2>&1 | tail -25; echo "=== $name rc=${PIPESTATUS[0]}"; pack; }
stage gpu_run_test_bench "${STAGE_TIMEOUT:-300}" bash bench/gpu_run.sh test bench
cp "$LOGS/summary.txt" "$LOGS/summary_test_bench.txt" 2>/dev/null
stage demo 60 bash -c "./$BUILD/demo --requests 256 > $LOGS/demo.log 2>&1; rc=\$?; tail -8 $LOGS/demo.log; exit \$rc"
stage memcheck "${MEMCHECK_TOTAL:-220}" env MEMCHECK_TIMEOUT="${MEMCHECK_TIMEOUT:-120}" bash bench/gpu_run.sh memcheck
