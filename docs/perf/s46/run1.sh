#!/bin/bash
# s46 call 1: v104 (KV_DECODE_TR=1: decode items of <= 8 packed rows computed transposed, S^T = K Q^T, O^T = V^T P^T)
# graph-replay A/B b103 (HEAD) / tr / tr / b103; the C GPU suite on tr; ncu of the decode kernel at 12x4096 and
# 8x8192 (both builds); the Python tests and the demo on b103 (the shipped build)
D=dev/bin/s46
L=$OUT/logs; mkdir -p $L $L/p
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi -L
export PYTHONPATH=python
SPECS="8x8192:128:0:0 8x8192:128:16:0 64x4096:128:0:0 64x4096:128:16:0 12x4096:128:0:0 18x4096:128:0:0 17x8192:128:0:0 1x32768:128:0:0 256x1024:128:16:0 8x8192:64:0:0 64x4096:64:16:0"
r=0
for b in b103 tr tr b103; do
  r=$((r+1)); st probe $b
  KVATTN_LIBRARY=$PWD/$D/$b/libkvattn.so timeout 80 python3 dev/split_probe.py --rounds 3 $SPECS > $L/p/probe_${b}_$r.txt 2>&1
  echo "probe $b $r rc=$?"
done
python3 - $L/p <<'PY'
import sys,glob,re,collections,statistics as S
d=collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(sys.argv[1]+'/*.txt')):
    b=f.split('probe_')[1].rsplit('_',1)[0]
    for line in open(f):
        m=re.match(r'(\S+ D \d+ \S+( \d+)?) splits auto: ([\d.]+) us',line)
        if m: d[m.group(1)][b].append(float(m.group(3)))
for k,v in d.items():
    if not v['b103'] or not v['tr']: print(k, dict(v)); continue
    a,q=S.mean(v['b103']),S.mean(v['tr'])
    print(k.ljust(24),'b103 %s  tr %s  %+.1f%%'%('/'.join('%.1f'%x for x in v['b103']),'/'.join('%.1f'%x for x in v['tr']),100*(q/a-1)))
PY
pack
N=$D/tr
st tests tr
timeout 210 bash tests/run_all.sh $N/test_* > $L/test_c.log 2>&1; echo "test-c rc=$?"; grep -E "FAIL|passed|exited|no summary" $L/test_c.log | tail -14
timeout 20 $N/decode_step > $L/decode_step.log 2>&1; echo "decode_step rc=$?"; tail -2 $L/decode_step.log
pack
for shape in 12x4096 8x8192; do for b in b103 tr; do
  st ncu $b $shape
  KVATTN_BENCH_DECODE=$shape timeout 60 ncu --clock-control none -k regex:kv_attn_kernel -s 3 -c 1 \
    --section SpeedOfLight --section WarpStateStats --section LaunchStats \
    --metrics smsp__inst_executed.sum,smsp__cycles_active.avg,sm__cycles_elapsed.max,gpu__time_duration.sum \
    $D/$b/bench_cuda --quick > $L/ncu_${b}_$shape.txt 2>&1
  grep -E "inst_executed|gpu__time_duration|Warp Cycles Per Issued|Registers Per" $L/ncu_${b}_$shape.txt | head -4
done; done
pack
st demo b103
timeout 40 $D/b103/demo --requests 256 > $L/demo.log 2>&1; echo "demo rc=$?"; tail -n 2 $L/demo.log
pack
st python b103
KVATTN_LIBRARY=$PWD/$D/b103/libkvattn.so timeout 110 bash tests/run_python.sh > $L/test_py.log 2>&1; echo "python rc=$?"; tail -n 2 $L/test_py.log
pack
st done
