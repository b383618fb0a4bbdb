#!/bin/bash
# s54 call 8: test_huge_scores with two 48-piece split modes added (98304-key first sequence: the merge's lanes past
# its first 32 splits), on this session's library (T) and the session start's (O); memcheck of T's run (quick).
T=dev/bin/s54/tree; O=dev/bin/s54/old
L=$OUT/logs; mkdir -p $L
for x in T O; do d=${!x}; $d/test_huge_scores > $L/huge_$x.log 2>&1; echo "$x rc=$? $(tail -1 $L/huge_$x.log)"; done
echo "O failing cases by split mode:"; grep "^FAIL" $L/huge_O.log | sed -E 's/\]:.*//' | sort -u | grep -o "batch_invariant [01], num_splits [0-9]*, [0-9]* keys" | sort | uniq -c
KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout 200 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $T/test_huge_scores > $L/mc_test_huge_scores.log 2>&1
echo "memcheck rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_test_huge_scores.log | tail -2 | paste -sd' ')"
(cd $OUT && tar czf logs.tgz logs)
