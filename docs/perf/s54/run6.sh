#!/bin/bash
# s54 call 6: test_huge_scores in its committed form (CUDA prefill rows held to one 16-bit ulp) on the session start's
# library (O, kernels of ba67322) and on this session's (T), two fresh-seed runs each.
T=dev/bin/s54/tree; O=dev/bin/s54/old
L=$OUT/logs; mkdir -p $L
for r in 1 2; do
  for x in O T; do
    d=${!x}; $d/test_huge_scores > $L/huge_${x}_$r.log 2>&1; echo "$x run $r rc=$? $(tail -1 $L/huge_${x}_$r.log)"
  done
done
for x in O T; do
  echo "$x failing cases (run 1) by shape:"; grep "^FAIL" $L/huge_${x}_1.log | sed -E 's/\]:.*//' | sort -u | sed -E 's/, scores.*//' | sort | uniq -c
done
(cd $OUT && tar czf logs.tgz logs)
