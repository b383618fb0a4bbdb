#!/bin/bash
# s44 call 2: v98 (KV_DECODE_CPAIR: a K / V copy pair under one predicate, no address masks, stage offsets per item)
# — the C GPU tests on fin (= v98, SASS-identical), then graph-replay A/B b97 (HEAD
# a599e0a, KV_DECODE_CPAIR=0: SASS-identical to the shipped build) / v98 / v99 (v98 + KV_DECODE_HALF=1), processes
# rotated (memcheck in call 3)
N=dev/bin/s44/fin
L=$OUT/logs; mkdir -p $L $L/p
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
st tests
timeout 240 bash tests/run_all.sh $N/test_* > $L/test_c.log 2>&1; echo "test-c rc=$?"; grep -E "FAIL|passed|exited|no summary" $L/test_c.log | tail -16
timeout 30 $N/decode_step > $L/decode_step.log 2>&1; echo "decode_step rc=$?"; tail -n 2 $L/decode_step.log
pack
pack
export PYTHONPATH=python
SPECS="8x8192:128:0:0 8x8192:128:16:0 64x4096:128:0:0 64x4096:128:16:0 12x4096:128:0:0 18x4096:128:0:0 17x8192:128:0:0 1x32768:128:0:0 256x1024:128:16:0"
r=0
for b in b97 fin v99 v99 fin b97; do
  r=$((r+1)); st probe $b
  KVATTN_LIBRARY=$PWD/dev/bin/s44/$b/libkvattn.so timeout 150 python3 dev/split_probe.py --rounds 3 $SPECS > $L/p/probe_${b}_$r.txt 2>&1
  echo "probe $b $r rc=$?"
done
python3 - $L/p <<'PY'
import sys,glob,re,collections
d=collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(sys.argv[1]+'/*.txt')):
    b=f.split('probe_')[1].rsplit('_',1)[0]
    for line in open(f):
        m=re.match(r'(\S+ D \d+ \S+( \d+)?) splits auto: ([\d.]+) us',line)
        if m: d[m.group(1)][b].append(float(m.group(3)))
for k,v in d.items():
    print(k.ljust(28), '  '.join('%s %s'%(b,'/'.join('%.1f'%x for x in v[b])) for b in ("b97","fin","v99")))
PY
pack
pack
st done
