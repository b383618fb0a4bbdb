#!/bin/bash
# s44 call 2 (runs 2 and 3 merged; the device was scarce): the final library (fin = v98, SASS-identical to build-v98)
# — C GPU tests, decode_step, memcheck (split, invariance, bad_data, quick), graph-replay A/B b97 (a599e0a's kernels)
# / fin / v99 (fin + KV_DECODE_HALF=1), processes rotated, the full bench_cuda, the demo, the Python tests
N=dev/bin/s44/fin
L=$OUT/logs; mkdir -p $L $L/p
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.max.sm,clocks.max.mem --format=csv > $L/machine.txt 2>&1
st tests
timeout 200 bash tests/run_all.sh $N/test_* > $L/test_c.log 2>&1; echo "test-c rc=$?"; grep -E "FAIL|passed|exited|no summary" $L/test_c.log | tail -14
timeout 30 $N/decode_step > $L/decode_step.log 2>&1; echo "decode_step rc=$?"; tail -n 1 $L/decode_step.log
pack
for t in test_cuda_split test_cuda_bad_data test_cuda_invariance; do
  st memcheck $t
  KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout 100 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $N/$t > $L/mc_$t.log 2>&1
  echo "memcheck $t rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_$t.log | tail -2 | paste -sd' ')"
  pack
done
export PYTHONPATH=python
SPECS="8x8192:128:0:0 8x8192:128:16:0 64x4096:128:0:0 64x4096:128:16:0 12x4096:128:0:0 18x4096:128:0:0 17x8192:128:0:0 1x32768:128:0:0 256x1024:128:16:0"
r=0
for b in b97 fin v99 v99 fin b97; do
  r=$((r+1)); st probe $b
  KVATTN_LIBRARY=$PWD/dev/bin/s44/$b/libkvattn.so timeout 100 python3 dev/split_probe.py --rounds 3 $SPECS > $L/p/probe_${b}_$r.txt 2>&1
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
    print(k.ljust(28), '  '.join('%s %s'%(b,'/'.join('%.1f'%x for x in v[b])) for b in ("b97","fin","v99")))
PY
st bench
timeout 150 $N/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "eiling|8x8192|64x4096|inflight|16384" $L/bench.log | head -24
pack
st demo
timeout 40 $N/demo --requests 256 > $L/demo.log 2>&1; echo "demo rc=$?"; tail -n 2 $L/demo.log
pack
st python
KVATTN_LIBRARY=$PWD/$N/libkvattn.so timeout 100 bash tests/run_python.sh > $L/test_py.log 2>&1; echo "python rc=$?"; tail -n 2 $L/test_py.log
pack
st done
