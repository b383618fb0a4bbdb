#!/bin/bash
# s54 call 5: is call 1's 8x8192 page-16 figure (84.7 us isolated against 80.9 contiguous, +4.7%; +1.8% in s53) this
# change or the machine? bench_cuda (decode rows only, KVATTN_BENCH_DECODE) of the session start's library (O) and
# this session's (T), alternated, three rounds each.
T=dev/bin/s54/tree; O=dev/bin/s54/old
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
for r in 1 2 3; do
  for x in O T; do
    d=${!x}; st round $r $x
    KVATTN_BENCH_DECODE=8x8192,64x4096 timeout 100 $d/bench_cuda --md $L/b_${r}_$x.md > $L/b_${r}_$x.log 2>&1
    grep -E "^\| (8x8192|64x4096) \| (contiguous|paged 16|plain)" $L/b_${r}_$x.md | cut -d'|' -f2-8
  done
  pack
done
st done
