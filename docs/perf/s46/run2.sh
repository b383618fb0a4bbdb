#!/bin/bash
# s46 call 2: v104 (KV_DECODE_TR=1) — a lone decode block under ncu (dev/attn_test profile_8x8192 at 12x4096
# contiguous, fused checks, KVATTN_DEV_STAGES 5 = one block per SM, and the default NS 3), b103 against tr; graph-replay
# A/B with 12 processes rotated; memcheck of the GPU suite on tr; the full bench_cuda on tr
D=dev/bin/s46
L=$OUT/logs; mkdir -p $L $L/p
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
(
export KVATTN_TL_FUSED=1 KVATTN_TL_NONEW=1 KVATTN_PROF_PAGE=0 KVATTN_PROF_B=12 KVATTN_PROF_L=4096
for ns in 5 0; do for b in b103 tr; do
  st ncu $ns $b
  KVATTN_DEV_STAGES=$ns timeout 60 ncu --clock-control none -k regex:kv_attn_kernel -s 1 -c 1 --section SpeedOfLight \
    --section WarpStateStats --section LaunchStats --metrics smsp__inst_executed.sum,gpu__time_duration.sum \
    $D/$b/attn_test profile_8x8192 > $L/ncu_lone_${b}_ns$ns.txt 2>&1
  grep -E "inst_executed|gpu__time_duration|Warp Cycles Per Issued|Registers Per|DRAM Throughput" $L/ncu_lone_${b}_ns$ns.txt | head -5
done; done
)
pack
export PYTHONPATH=python
SPECS="8x8192:128:0:0 8x8192:128:16:0 64x4096:128:0:0 64x4096:128:16:0 12x4096:128:0:0 18x4096:128:0:0 17x8192:128:0:0 1x32768:128:0:0 256x1024:128:16:0 8x8192:64:0:0 64x4096:64:16:0"
r=0
for b in b103 tr tr b103 b103 tr tr b103 b103 tr tr b103; do
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
    print(k.ljust(24),'b103 %.1f (%.1f-%.1f)  tr %.1f (%.1f-%.1f)  %+.1f%%'%(a,min(v['b103']),max(v['b103']),q,min(v['tr']),max(v['tr']),100*(q/a-1)))
PY
pack
N=$D/tr
mc() {
  st memcheck $1
  KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout $2 compute-sanitizer --tool memcheck --error-exitcode 99 --leak-check no $N/$1 > $L/mc_$1.log 2>&1
  echo "memcheck $1 rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_$1.log | tail -2 | paste -sd' ')"
  pack
}
mc test_cuda_split 70; mc test_cuda_bad_data 60; mc test_cuda_invariance 45; mc test_cuda_graph 20; mc test_inflight 20; mc test_cuda_stress 20; mc test_grid 40
st bench tr
timeout 100 $N/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "eiling|8x8192|64x4096|inflight|16384" $L/bench.log | head -24
pack
st done
