#!/usr/bin/env bash
# One device call that times prebuilt variants of the library against each other (fourteenth session, v45):
# ROUNDS rounds of `bench_cuda --quick` over every $D/bench_<tag> binary (tags from TAGS, the base
# first; the order rotates per round), after a quick test_grid of each $D/test_grid_<tag> that exists. Logs: $OUT/res.tgz (<tag><round>.txt and
# log.txt; the device tool returns at most 8 files).
#   D=dev/bin/s14 TAGS="base a b c" ROUNDS=2 bash dev/device_variants.sh
D=${D:-dev/bin/s14}; L=$OUT/log.txt
s() { echo "== [$(date +%s)] $*" | tee -a $L; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu,power.draw --format=csv,noheader >> $L
for t in $TAGS; do
  [ -x $D/test_grid_$t ] || continue
  s "test_grid $t (quick)"; KVATTN_TEST_QUICK=1 $D/test_grid_$t 2>&1 | tail -1 >> $L
done
# the order rotates by one tag per round, so that no variant always runs first (twenty-second session: in three
# rounds in a fixed order, kernels of identical SASS came out 1.3% apart isolated on average over 15 rows; in six
# rotated rounds 0.15%). dev/ab_compare.py compares the logs.
set -- $TAGS
for r in $(seq 1 ${ROUNDS:-2}); do
  k=$(( (r - 1) % $# )); order="${@:k+1} ${@:1:k}"
  for t in $order; do s "round $r $t"; $D/bench_$t --quick > $OUT/$t$r.txt 2>&1; done
done
s done
cd $OUT && tar czf res.tgz *.txt && rm -f *.txt
