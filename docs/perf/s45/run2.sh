#!/bin/bash
# s45 call 2: graph-replay A/B b98 (HEAD 60a1594, v98) / v100 / v101 / fin with processes rotated; the full bench_cuda
# on fin; the demo; the Python tests
N=dev/bin/s45/fin
L=$OUT/logs; mkdir -p $L $L/p
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
export PYTHONPATH=python
SPECS="8x8192:128:0:0 8x8192:128:16:0 64x4096:128:0:0 64x4096:128:16:0 12x4096:128:0:0 18x4096:128:0:0 17x8192:128:0:0 1x32768:128:0:0 256x1024:128:16:0"
r=0
for b in b98 v100 v101 fin fin v101 v100 b98; do
  r=$((r+1)); st probe $b
  KVATTN_LIBRARY=$PWD/dev/bin/s45/$b/libkvattn.so timeout 60 python3 dev/split_probe.py --rounds 3 $SPECS > $L/p/probe_${b}_$r.txt 2>&1
  echo "probe $b $r rc=$?"
  pack
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
    print(k.ljust(28), '  '.join('%s %s'%(b,'/'.join('%.1f'%x for x in v[b])) for b in ("b98","v100","v101","fin")))
PY
st bench
timeout 170 $N/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "eiling|8x8192|64x4096|inflight|16384" $L/bench.log | head -24
pack
st demo
timeout 40 $N/demo --requests 256 > $L/demo.log 2>&1; echo "demo rc=$?"; tail -n 2 $L/demo.log
pack
st python
KVATTN_LIBRARY=$PWD/$N/libkvattn.so timeout 100 bash tests/run_python.sh > $L/test_py.log 2>&1; echo "python rc=$?"; tail -n 2 $L/test_py.log
pack
st done
