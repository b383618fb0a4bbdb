#!/bin/bash
# s47 call 8: the shipped library (b103) in graph replay (dev/split_probe.py) and bench_cuda --quick, default against
# KVATTN_NO_LEAN=1 (decode items from the scheduler's lists: no self-planned first items) and KVATTN_NO_EARLY=1: do the
# self-planned items' slower tiles (isolated-call timelines, calls 3 - 7) cost anything back to back?
D=dev/bin/s47
L=$OUT/logs; mkdir -p $L/p
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
export PYTHONPATH=python KVATTN_LIBRARY=$PWD/$D/b103/libkvattn.so
S="8x8192:128:0:0 8x8192:128:16:0 12x4096:128:0:0 64x4096:128:0:0 1x32768:128:0:0 17x8192:128:0:0"
r=0
for m in def nolean noearly noearly nolean def def nolean noearly; do
  r=$((r+1)); st probe $m $r
  ( [ $m = nolean ] && export KVATTN_NO_LEAN=1; [ $m = noearly ] && export KVATTN_NO_EARLY=1
    timeout 60 python3 dev/split_probe.py --rounds 3 $S > $L/p/probe_${m}_$r.txt 2>&1 ); echo "rc=$?"
done
python3 dev/probe_ab.py $L/p def nolean noearly 2>&1 | tail -20
pack
for m in def nolean noearly; do
  st bench $m
  ( [ $m = nolean ] && export KVATTN_NO_LEAN=1; [ $m = noearly ] && export KVATTN_NO_EARLY=1
    KVATTN_BENCH_DECODE="8x8192,64x4096,12x4096,1x32768" timeout 60 $D/b103/bench_cuda --quick > $L/bench_$m.txt 2>&1 ); echo "rc=$?"
  grep -E "eiling|8x8192|12x4096|1x32768" $L/bench_$m.txt | grep -v "paged [16]\b" | head -12
done
pack
st done
