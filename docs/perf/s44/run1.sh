#!/bin/bash
# s44 call 1: v97 (KV_DECODE_PAIR: 32 keys per warp and step at NS >= 4, one block per SM) — validate, memcheck,
# decode bench (stages 0 = shipped NS 3 / 4 / 6, rotated, two rounds), timelines of the medium shapes
B=dev/bin/s44
mkdir -p $OUT/r
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $OUT/r/gpu.txt
for st in 4 6 0; do
  for fu in 0 1; do
    if [ $fu = 1 ]; then export KVATTN_TL_FUSED=1; else unset KVATTN_TL_FUSED; fi
    echo "== validate stages $st fused $fu" >> $OUT/r/validate.log
    KVATTN_DEV_STAGES=$st timeout 120 $B/attn_pair validate >> $OUT/r/validate.log 2>&1; echo "rc=$?" >> $OUT/r/validate.log
  done
done
unset KVATTN_TL_FUSED
grep -E "==|rc=|FAIL|fail|passed" $OUT/r/validate.log | tail -40
for fu in 0 1; do
  if [ $fu = 1 ]; then export KVATTN_TL_FUSED=1; else unset KVATTN_TL_FUSED; fi
  KVATTN_DEV_STAGES=4 timeout 240 compute-sanitizer --tool memcheck --print-limit 20 $B/attn_pair quick > $OUT/r/memcheck_$fu.log 2>&1
  echo "memcheck fused $fu rc=$?"; tail -n 3 $OUT/r/memcheck_$fu.log
done
unset KVATTN_TL_FUSED
for r in 1 2; do
  for st in 0 4 6; do
    KVATTN_DEC_ONLY=1 KVATTN_BENCH_NONEW=1 KVATTN_TL_FUSED=1 timeout 120 $B/attn_pair bench $st >> $OUT/r/bench_st${st}.log 2>&1
  done
done
for st in 0 4 6; do echo "== bench stages $st"; grep -E "^decode" $OUT/r/bench_st${st}.log; done
for r in 1 2; do
for st in 0 4 6; do
  for c in "12x4096" "18x4096" "8x8192 contig" "64x4096 contig"; do
    KVATTN_DEV_STAGES=$st KVATTN_TL_FUSED=1 KVATTN_TL_NONEW=1 KVATTN_TL_CASE="$c" KVATTN_TL_REPS=4 timeout 60 $B/attn_tl_pair timeline >> $OUT/r/tl_st${st}_$r.txt 2>&1
  done
done
done
for f in $OUT/r/tl_st*_1.txt; do echo "== $f"; grep -E "^decode" $f | awk 'NR%3==0' | grep -o "decode start [0-9.]* wait [0-9.]*\.\.[0-9.]* end [0-9.]*\.\.[0-9.]*" ; grep -E "^ *(items|SM us)" $f | cut -c1-160; done
cd $OUT && tar czf r.tgz r && rm -rf r
