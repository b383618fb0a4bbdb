#!/bin/bash
# s48 call 5: the spread of the 1x32768 and 8x8192 rows (page 16 against contiguous) over 5 bench_cuda runs of the
# shipped library (call 4's full run had page 16 5.3% slower at 1x32768 isolated)
D=dev/bin/s48
L=$OUT/logs; mkdir -p $L
for r in 1 2 3 4 5; do
  KVATTN_BENCH_DECODE=1x32768,8x8192 timeout 60 $D/b103/bench_cuda --md $L/q_$r.md > $L/q_$r.log 2>&1; echo "run $r rc=$?"
  grep -E "^\| (1x32768|8x8192) \| (contiguous|paged 16|plain)" $L/q_$r.md
done
(cd $OUT && tar czf logs.tgz logs)
