#!/bin/bash
# s50 call 4 (the command as sent): racecheck of test_grid (quick) again, with time to finish (call 3's 50 s limit
# stopped it).
mkdir -p $OUT/logs; t0=$(date +%s); KVATTN_NO_LEAN=1 KVATTN_TEST_QUICK=1 timeout 370 compute-sanitizer --tool racecheck --racecheck-report hazard --error-exitcode 99 dev/bin/s49/tree/test_grid > $OUT/logs/rc_test_grid.log 2>&1; echo "rc=$? $(( $(date +%s) - t0 ))s"; grep -E "^test_grid: [0-9]+ passed|RACECHECK SUMMARY|seed" $OUT/logs/rc_test_grid.log | tail -3
