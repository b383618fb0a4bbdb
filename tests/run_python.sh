#!/usr/bin/env bash
# run_python.sh — runs the Python package's tests (tests/python) with pytest when python3 has numpy and pytest,
# and ends with one line "python: N passed, M failed, K skipped" that .ci/run can sum. Torch and CUDA tests
# skip themselves (with the reason) where torch, a GPU or a CUDA-built libkvattn is missing.
#   KVATTN_LIBRARY  the libkvattn.so to test (default: build/libkvattn.so of this checkout, built with `make lib`
#                   if missing); `make test-python` sets it to the library it just built.
#   PYTHON          the interpreter (default python3). Extra arguments go to pytest (e.g. -k cuda, -x).
#   KVATTN_TEST_SEED  replays a run: inputs are fresh on every run, and the seed is printed at the end.
set -u
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if ! "$PY" -c "import numpy, pytest" >/dev/null 2>&1; then
    echo "python tests: skipped (numpy/pytest missing)"
    exit 0
fi
if [ -z "${KVATTN_LIBRARY:-}" ]; then
    if [ ! -f build/libkvattn.so ]; then
        echo "python tests: build/libkvattn.so missing, running 'make lib'"
        if ! make lib >/dev/null; then
            echo "python tests: 'make lib' failed"
            echo "python: 0 passed, 1 failed, 0 skipped"
            exit 1
        fi
    fi
    export KVATTN_LIBRARY="$PWD/build/libkvattn.so"
fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
"$PY" -m pytest -q -rs -p no:cacheprovider tests/python "$@" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
summary=$(grep -E '^(=+ )?[0-9]+ (passed|failed|skipped|error|errors|deselected|xfailed|xpassed)' "$log" | tail -1)
count() { echo "$summary" | grep -oE "[0-9]+ $1" | head -1 | grep -oE '^[0-9]+' || echo 0; }
passed=$(count passed)
failed=$(( $(count failed) + $(count errors) + $(count error) ))
skipped=$(count skipped)
if [ "$rc" -ne 0 ] && { [ "$rc" -ne 5 ] || [ $# -eq 0 ]; } && [ "$failed" -eq 0 ]; then
    failed=1 # pytest itself failed (collection or usage error) without a summary of failures
fi
echo "python: $passed passed, $failed failed, $skipped skipped"
if [ "$rc" -eq 5 ]; then
    # pytest collected nothing: fine when the caller's arguments select tests (-k, a file), a failure otherwise
    # (the suite itself went missing)
    [ $# -gt 0 ] && exit 0
    echo "python tests: pytest collected no test"
    exit 1
fi
exit "$rc"
