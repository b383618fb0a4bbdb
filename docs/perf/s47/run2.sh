#!/bin/bash
# s47 call 2: does the cache's memory layout set 8x8192's streaming rate? The shipped library (b103) in graph replay
# (dev/split_probe.py) with the cache in NHD (kvattn's usual [B, L, Hk, D]) and HND ([B, Hk, L, D] in memory, passed as
# the strided view), contiguous and page 16; 8 processes alternating the spec order.
D=dev/bin/s47
L=$OUT/logs; mkdir -p $L/p
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
export PYTHONPATH=python KVATTN_LIBRARY=$PWD/$D/b103/libkvattn.so
A="8x8192:128:0:0 8x8192:128:0h:0 8x8192:128:16:0 8x8192:128:16h:0 64x4096:128:0:0 64x4096:128:0h:0 12x4096:128:0:0 12x4096:128:0h:0 1x32768:128:0:0 1x32768:128:0h:0 64x4096:128:16:0 64x4096:128:16h:0 8x8192:64:0:0 8x8192:64:0h:0"
B="8x8192:128:0h:0 8x8192:128:0:0 8x8192:128:16h:0 8x8192:128:16:0 64x4096:128:0h:0 64x4096:128:0:0 12x4096:128:0h:0 12x4096:128:0:0 1x32768:128:0h:0 1x32768:128:0:0 64x4096:128:16h:0 64x4096:128:16:0 8x8192:64:0h:0 8x8192:64:0:0"
for r in 1 2 3 4 5 6 7 8; do
  if [ $((r % 2)) = 1 ]; then S=$A; else S=$B; fi
  st probe $r
  timeout 90 python3 dev/split_probe.py --rounds 3 $S > $L/p/probe_$r.txt 2>&1; echo "rc=$?"
done
cat $L/p/probe_1.txt
python3 - $L/p <<'PY'
import sys, glob, re, collections, statistics as S
d = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + '/probe_*.txt')):
    for line in open(f):
        m = re.match(r'(\S+ D \d+ \S+( \d+)?)( HND)? splits auto: ([\d.]+) us', line)
        if m: d[(m.group(1), bool(m.group(3)))].append(float(m.group(4)))
for k in sorted({k for k, _ in d}):
    a, h = d[(k, False)], d[(k, True)]
    if a and h:
        print('%-26s NHD %.1f (%.1f-%.1f)  HND %.1f (%.1f-%.1f)  %+.1f%%' % (k, S.mean(a), min(a), max(a), S.mean(h), min(h), max(h), 100 * (S.mean(h) / S.mean(a) - 1)))
PY
pack
st done
