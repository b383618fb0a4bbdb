#!/bin/bash
# s54 call 7: more alternated rounds of 8x8192 only (call 5 left the new library's isolated contiguous mean 1.5 us
# above the old one's, every round above): bench_cuda decode rows (KVATTN_BENCH_DECODE=8x8192) of the session start's
# library (O) and this session's (T), alternated, six rounds each, the order flipped every round.
T=dev/bin/s54/tree; O=dev/bin/s54/old
L=$OUT/logs; mkdir -p $L
for r in 1 2 3 4 5 6; do
  if [ $((r % 2)) = 1 ]; then order="O T"; else order="T O"; fi
  for x in $order; do
    d=${!x}
    KVATTN_BENCH_DECODE=8x8192 timeout 60 $d/bench_cuda --md $L/c_${r}_$x.md > $L/c_${r}_$x.log 2>&1
    echo "round $r $x: $(grep -E "^\| 8x8192 \| (contiguous|paged 16|plain)" $L/c_${r}_$x.md | cut -d'|' -f3,4,7 | paste -sd' ')"
  done
done
(cd $OUT && tar czf logs.tgz logs)
