#!/usr/bin/env bash
# run_all.sh — runs each test binary given as an argument; each ends with "<name>: N passed, M failed, K skipped".
# Sums the counts, prints "N passed, M failed" last, exits nonzero on any failure, crash or missing summary.
passed=0; failed=0; skipped=0; status=0
for t in "$@"; do
    log=$(mktemp)
    "$t" 2>&1 | tee "$log"
    rc=${PIPESTATUS[0]}
    line=$(grep -E '^[^ ]+: [0-9]+ passed, [0-9]+ failed(, [0-9]+ skipped)?$' "$log" | tail -n 1)
    rm -f "$log"
    if [ -n "$line" ]; then
        p=$(sed -E 's/.*: ([0-9]+) passed.*/\1/' <<<"$line")
        f=$(sed -E 's/.* ([0-9]+) failed.*/\1/' <<<"$line")
        s=$(sed -nE 's/.* ([0-9]+) skipped$/\1/p' <<<"$line")
        passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + ${s:-0}))
    fi
    if [ "$rc" -ne 0 ]; then
        status=1
        if [ -z "$line" ] || [ "$f" = 0 ]; then
            echo "$t: exited with status $rc$([ "$rc" -gt 128 ] && echo " (signal $((rc - 128)))")"
            failed=$((failed + 1))
        fi
    elif [ -z "$line" ]; then
        echo "$t: no summary line"
        status=1; failed=$((failed + 1))
    fi
done
[ "$failed" -ne 0 ] && status=1
echo "($skipped skipped)"
echo "$passed passed, $failed failed"
exit $status
