#!/bin/bash
# s46 call 3: the decode copies' cache operators, as cuDNN's decode kernel issues them (LDGSTS.E.BYPASS.128 for K
# and V, no L2 prefetch size): b103 (HEAD: K by .ca, V by .cg, both with a 128-byte L2 prefetch), ca0 (-DKV_DECODE_CA=0:
# both .cg, prefetch 128), cupf (-DKV_DECODE_CA=0 -DKV_DECODE_PF=0: both .cg, no prefetch size). ncu of the decode
# kernel at 12x4096 and 8x8192, then graph-replay A/B with 12 processes rotated
D=dev/bin/s46
L=$OUT/logs; mkdir -p $L $L/p
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
for shape in 12x4096 8x8192; do for b in b103 ca0 cupf; do
  st ncu $b $shape
  KVATTN_BENCH_DECODE=$shape timeout 60 ncu --clock-control none -k regex:kv_attn_kernel -s 3 -c 1 \
    --section SpeedOfLight --section WarpStateStats --section LaunchStats \
    --metrics smsp__inst_executed.sum,gpu__time_duration.sum,lts__t_sectors_srcunit_tex_op_read.sum,dram__bytes_read.sum \
    $D/$b/bench_cuda --quick > $L/ncu_${b}_$shape.txt 2>&1
  grep -E "gpu__time_duration|dram__bytes_read|lts__t_sectors|Warp Cycles Per Issued" $L/ncu_${b}_$shape.txt | head -4
done; done
pack
export PYTHONPATH=python
SPECS="8x8192:128:0:0 8x8192:128:16:0 64x4096:128:0:0 64x4096:128:16:0 12x4096:128:0:0 18x4096:128:0:0 17x8192:128:0:0 1x32768:128:0:0 256x1024:128:16:0 64x16384:128:16:0"
r=0
for b in b103 ca0 cupf cupf ca0 b103 b103 ca0 cupf cupf ca0 b103; do
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
    a=S.mean(v['b103'])
    print(k.ljust(24),'b103 %.1f (%.1f-%.1f)'%(a,min(v['b103']),max(v['b103'])),
          '  '.join('%s %.1f (%.1f-%.1f) %+.1f%%'%(b,S.mean(v[b]),min(v[b]),max(v[b]),100*(S.mean(v[b])/a-1)) for b in ('ca0','cupf') if v[b]))
PY
pack
st done
