#!/usr/bin/env bash
# gpu_run.sh — everything the GPU machine does in one call: build, `make test` (every C test, GPU ones
# included, then the Python tests), the GPU tests under compute-sanitizer memcheck (the small-page stress at
# its full 1000 iterations when time allows), and the benchmark. Logs go to $OUT (at most 8 files come back).
#   bash bench/gpu_run.sh [all|test|memcheck|bench]...   (default: all)
# Environment: BUILD (default build-gpu), STRESS_MEMCHECK_ITERS (default 1000), MEMCHECK_TIMEOUT (s, per test,
# default 240), BENCH_ARGS (e.g. --quick), SKIP_PYTHON=1 to run only the C tests.
set -u
OUT=${OUT:-/tmp/kvattn_gpu_out}
mkdir -p "$OUT"
BUILD=${BUILD:-build-gpu}
STAGES=${*:-all}
want() { [[ " $STAGES " == *" all "* || " $STAGES " == *" $1 "* ]]; }
t0=$(date +%s)
stamp() { echo "[gpu_run +$(( $(date +%s) - t0 ))s] $*"; }
summary=()

{ nvidia-smi; nvcc --version | tail -1; uname -a; } > "$OUT/machine.txt" 2>&1

stamp "build ($BUILD)"
if ! make BUILD="$BUILD" -j"$(nproc)" lib bench "$BUILD/demo" $(ls tests/test_*.c | sed "s|tests/|$BUILD/|; s|\.c$||") \
        > "$OUT/build.log" 2>&1; then
    tail -30 "$OUT/build.log"
    echo "BUILD FAILED"
    exit 1
fi
summary+=("build: ok")

if want test; then
    stamp "make test"
    target=test
    [ "${SKIP_PYTHON:-0}" = 1 ] && target=test-c
    set -o pipefail
    make BUILD="$BUILD" "$target" 2>&1 | tee "$OUT/test.log" | grep -E "FAIL|passed|skipped|exited|no summary" | tail -40
    rc=$?
    set +o pipefail
    summary+=("make $target: rc=$rc, $(grep -E '^[0-9]+ passed, [0-9]+ failed' "$OUT/test.log" | tail -2 | paste -sd' ')")
fi

if want memcheck; then
    stamp "compute-sanitizer memcheck"
    : > "$OUT/memcheck.log"
    # KVATTN_TEST_EXACT_ALLOC=1: tensors allocated to their exact size (no guard bytes), so that memcheck also sees
    # a read just past a tensor (with guards, such a read stays inside the allocation and goes unseen)
    for t in "$BUILD"/test_cuda_* "$BUILD"/test_fuzz_bad_data "$BUILD"/test_bad_input "$BUILD"/test_inflight; do
        [ -x "$t" ] || continue
        name=$(basename "$t")
        env_args=(KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1) # (provoked API errors count as memcheck errors)
        [ "$name" = test_cuda_stress ] && env_args=(KVATTN_STRESS_ITERS="${STRESS_MEMCHECK_ITERS:-1000}" KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1)
        stamp "memcheck $name ${env_args[*]}" | tee -a "$OUT/memcheck.log"
        env "${env_args[@]}" timeout "${MEMCHECK_TIMEOUT:-240}" compute-sanitizer --tool memcheck --error-exitcode 99 \
            --leak-check no "$t" >> "$OUT/memcheck.log" 2>&1
        rc=$?
        line=$(grep -E "^$name: [0-9]+ passed" "$OUT/memcheck.log" | tail -1)
        errs=$(grep -E "ERROR SUMMARY" "$OUT/memcheck.log" | tail -1)
        summary+=("memcheck $name: rc=$rc ($([ $rc = 124 ] && echo TIMEOUT || echo done)) $line; $errs")
    done
    # the grid test's CUDA half too (quick)
    if [ -x "$BUILD/test_grid" ]; then
        KVATTN_TEST_QUICK=1 KVATTN_TEST_EXACT_ALLOC=1 timeout "${MEMCHECK_TIMEOUT:-240}" compute-sanitizer --tool memcheck \
            --error-exitcode 99 --leak-check no "$BUILD/test_grid" >> "$OUT/memcheck.log" 2>&1
        rc=$?
        summary+=("memcheck test_grid (quick): rc=$rc $(grep -E '^test_grid: [0-9]+ passed' "$OUT/memcheck.log" | tail -1); $(grep -E 'ERROR SUMMARY' "$OUT/memcheck.log" | tail -1)")
    fi
fi

if want bench; then
    stamp "bench_cuda"
    "$BUILD/bench_cuda" ${BENCH_ARGS:-} --md "$OUT/cuda_bench.md" --json "$OUT/cuda_bench.json" 2>&1 | tee "$OUT/bench.log"
    summary+=("bench: rc=${PIPESTATUS[0]}")
fi

stamp "done"
printf '%s\n' "${summary[@]}" | tee "$OUT/summary.txt"
