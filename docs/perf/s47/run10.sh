#!/bin/bash
# NOT RUN in the forty-seventh session (its device time had run out); it ran unchanged as docs/perf/s48/run1.sh.
# s47 call 10: bench_cuda's decode rows (and an inflight step's pure-decode call) use the varlen form (cu_seqlens_q),
# which launch_fast runs decode-first with the prefill kernel after the decode kernel; flash_attn_with_kvcache's
# fixed form launches the decode kernel alone. The shipped library (b103) in graph replay, both forms, 6 processes.
D=dev/bin/s47
L=$OUT/logs; mkdir -p $L/p
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
export PYTHONPATH=python KVATTN_LIBRARY=$PWD/$D/b103/libkvattn.so
A="8x8192:128:0:0 8x8192:128:0v:0 8x8192:128:16:0 8x8192:128:16v:0 12x4096:128:0:0 12x4096:128:0v:0 64x4096:128:0:0 64x4096:128:0v:0 1x32768:128:0:0 1x32768:128:0v:0"
B="8x8192:128:0v:0 8x8192:128:0:0 8x8192:128:16v:0 8x8192:128:16:0 12x4096:128:0v:0 12x4096:128:0:0 64x4096:128:0v:0 64x4096:128:0:0 1x32768:128:0v:0 1x32768:128:0:0"
for r in 1 2 3 4 5 6; do
  if [ $((r % 2)) = 1 ]; then S=$A; else S=$B; fi
  st probe $r
  timeout 60 python3 dev/split_probe.py --rounds 3 $S > $L/p/probe_$r.txt 2>&1; echo "rc=$?"
done
head -3 $L/p/probe_1.txt
python3 - $L/p <<'PY'
import sys, glob, re, collections, statistics as S
d = collections.defaultdict(list)
for f in sorted(glob.glob(sys.argv[1] + '/probe_*.txt')):
    for line in open(f):
        m = re.match(r'(\S+ D \d+ \S+( \d+)?)( varlen)? splits auto: ([\d.]+) us', line)
        if m: d[(m.group(1), bool(m.group(3)))].append(float(m.group(4)))
for k in sorted({k for k, _ in d}):
    a, v = d[(k, False)], d[(k, True)]
    if a and v:
        print('%-24s fixed %.1f (%.1f-%.1f)  varlen %.1f (%.1f-%.1f)  %+.1f%%' % (k, S.mean(a), min(a), max(a), S.mean(v), min(v), max(v), 100 * (S.mean(v) / S.mean(a) - 1)))
PY
pack
st done
