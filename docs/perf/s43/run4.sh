#!/bin/bash
# s43 call 4: v96 (KV_SELF_SK=1: the self-starting decode blocks plan the stream-K cut and start their own items; the
# cut's code in a __noinline__ function) — GPU tests + memcheck on v96, then graph-replay A/B fin (v95b) / v96 / v96
# with KV_SK_PCT 100 (p100), processes rotated
D=dev/bin/s43/ab
mkdir -p $OUT/t $OUT/p
for t in test_cuda_split test_cuda_invariance test_cuda_graph test_inflight; do timeout 120 $D/v96/$t > $OUT/t/$t.log 2>&1; echo "$t rc=$? $(tail -1 $OUT/t/$t.log)"; done
grep -E "FAIL" $OUT/t/test_cuda_split.log | head -10
KVATTN_TEST_QUICK=1 timeout 150 $D/v96/test_grid > $OUT/t/test_grid.log 2>&1; echo "test_grid(quick) rc=$? $(tail -1 $OUT/t/test_grid.log)"
KVATTN_TEST_QUICK=1 timeout 120 $D/v96/test_cuda_bad_data > $OUT/t/bad.log 2>&1; echo "bad_data(quick) rc=$? $(tail -1 $OUT/t/bad.log)"
for t in test_cuda_split test_cuda_invariance; do
  KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout 150 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $D/v96/$t > $OUT/t/mc_$t.log 2>&1
  echo "memcheck $t rc=$? $(grep -E "passed|ERROR SUMMARY" $OUT/t/mc_$t.log | tail -2 | paste -sd' ')"
done
export PYTHONPATH=python
SPECS="8x8192:128:0:0 8x8192:128:16:0 16x8192:128:0:0 6x8192:128:0:0 12x4096:128:0:0 20x4096:128:0:0 18x4096:128:0:0 17x8192:128:0:0 22x4096:128:0:0 24x4096:128:0:0 10x8192:128:0:0 20x4096:128:16:0 1x32768:128:0:0"
r=0
for b in fin v96 p100 v96 fin p100; do
  r=$((r+1))
  KVATTN_LIBRARY=$PWD/$D/$b/libkvattn.so timeout 100 python3 dev/split_probe.py --rounds 5 $SPECS > $OUT/p/probe_${b}_$r.txt 2>&1
  echo "probe $b $r rc=$?"
done
python3 - $OUT/p <<'PY'
import sys,glob,re,collections
d=collections.defaultdict(lambda: collections.defaultdict(list))
for f in sorted(glob.glob(sys.argv[1]+'/*.txt')):
    b=f.split('probe_')[1].rsplit('_',1)[0]
    for line in open(f):
        m=re.match(r'(\S+ D \d+ \S+( \d+)?) splits auto: ([\d.]+) us',line)
        if m: d[m.group(1)][b].append(float(m.group(3)))
for k,v in d.items():
    print(k.ljust(28), '  '.join('%s %s'%(b,'/'.join('%.1f'%x for x in v[b])) for b in ('fin','v96','p100')))
PY
cd $OUT && tar czf logs.tgz t p && rm -rf t p
