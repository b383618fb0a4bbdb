#!/bin/bash
# s46 call 4: v105 (KV_DECODE_KCG=1: K by .cg in calls over a paged cache) — graph-replay A/B b103 / kcg with 12
# processes rotated; the C GPU suite, memcheck, the Python tests, the demo and the full bench_cuda on kcg
D=dev/bin/s46
L=$OUT/logs; mkdir -p $L $L/p
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
export PYTHONPATH=python
SPECS="8x8192:128:0:0 8x8192:128:16:0 64x4096:128:0:0 64x4096:128:16:0 12x4096:128:0:0 17x8192:128:0:0 256x1024:128:16:0 64x16384:128:16:0 8x8192:128:1:0 8x8192:64:16:0 64x4096:64:16:0"
r=0
for b in b103 kcg kcg b103 b103 kcg kcg b103 b103 kcg kcg b103; do
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
    a,q=S.mean(v['b103']),S.mean(v['kcg'])
    print(k.ljust(24),'b103 %.1f (%.1f-%.1f)  kcg %.1f (%.1f-%.1f)  %+.1f%%'%(a,min(v['b103']),max(v['b103']),q,min(v['kcg']),max(v['kcg']),100*(q/a-1)))
PY
pack
N=$D/kcg
st tests
timeout 210 bash tests/run_all.sh $N/test_* > $L/test_c.log 2>&1; echo "test-c rc=$?"; grep -E "FAIL|passed|exited|no summary" $L/test_c.log | tail -14
timeout 20 $N/decode_step > $L/decode_step.log 2>&1; echo "decode_step rc=$?"
pack
mc() {
  st memcheck $1
  KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout $2 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $N/$1 > $L/mc_$1.log 2>&1
  echo "memcheck $1 rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_$1.log | tail -2 | paste -sd' ')"
  pack
}
mc test_cuda_split 70; mc test_cuda_bad_data 60; mc test_cuda_invariance 45; mc test_cuda_graph 20; mc test_inflight 20; mc test_cuda_stress 20; mc test_grid 40
st bench
timeout 100 $N/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "eiling|8x8192|64x4096|inflight|isolated|16384" $L/bench.log | head -30
pack
st demo
timeout 40 $N/demo --requests 256 > $L/demo.log 2>&1; echo "demo rc=$?"; tail -n 1 $L/demo.log
st python
KVATTN_LIBRARY=$PWD/$N/libkvattn.so timeout 110 bash tests/run_python.sh > $L/test_py.log 2>&1; echo "python rc=$?"; tail -n 1 $L/test_py.log
pack
st done
