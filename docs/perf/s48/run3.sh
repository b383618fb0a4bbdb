#!/bin/bash
# s48 call 3: deferred merges (KV_DEFER_MERGE=1, build dm): a decode-only call's split merges in their own kernel
# (PDL, after the decode grid completed) instead of by each task's last piece while the wave's last streams run.
# Graph-replay A/B: b103 (shipped) / dm / dm with KVATTN_NO_DEFER=1 (dmoff: the dm build's kernels, merges in-kernel),
# 4 processes each rotated; then dm's C GPU suite and memcheck of the split and graph tests.
D=dev/bin/s48
L=$OUT/logs; mkdir -p $L $L/p
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
export PYTHONPATH=python
SPECS="8x8192:128:0:0 8x8192:128:16:0 12x4096:128:0:0 1x32768:128:16:0 64x4096:128:16:0 17x8192:128:0:0"
r=0
for b in b103 dm dmoff dmoff dm b103 b103 dm dmoff dmoff dm b103; do
  r=$((r+1)); st probe $b
  lib=$b; [ $b = dmoff ] && lib=dm
  if [ $b = dmoff ]; then export KVATTN_NO_DEFER=1; else unset KVATTN_NO_DEFER; fi
  KVATTN_LIBRARY=$PWD/$D/$lib/libkvattn.so timeout 60 python3 dev/split_probe.py --rounds 3 $SPECS > $L/p/probe_${b}_$r.txt 2>&1
  echo "probe $b $r rc=$?"
done
unset KVATTN_NO_DEFER
python3 - $L/p <<'PY'
import sys,glob,re,collections,statistics as S
d=collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(sys.argv[1]+'/*.txt')):
    b=f.split('probe_')[1].rsplit('_',1)[0]
    for line in open(f):
        m=re.match(r'(\S+ D \d+ \S+( \d+)?) splits auto: ([\d.]+) us',line)
        if m: d[m.group(1)][b].append(float(m.group(3)))
for k,v in d.items():
    a=S.mean(v['b103']); q=S.mean(v['dm']); o=S.mean(v['dmoff'])
    print(k.ljust(24),'b103 %.1f (%.1f-%.1f)  dm %.1f (%.1f-%.1f) %+.1f%%  dmoff %.1f %+.1f%%'%(a,min(v['b103']),max(v['b103']),q,min(v['dm']),max(v['dm']),100*(q/a-1),o,100*(o/a-1)))
PY
pack
N=$D/dm
st tests
timeout 220 bash tests/run_all.sh $N/test_* > $L/test_c.log 2>&1; echo "test-c rc=$?"; grep -E "FAIL|passed|exited|no summary" $L/test_c.log | tail -14
pack
mc() {
  st memcheck $1
  KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout $2 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $N/$1 > $L/mc_$1.log 2>&1
  echo "memcheck $1 rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_$1.log | tail -2 | paste -sd' ')"
  pack
}
mc test_cuda_split 70; mc test_cuda_graph 25; mc test_cuda_bad_data 60
st done
