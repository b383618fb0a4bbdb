#!/bin/bash
# s56 call 4: head dim 64's decode pipeline depth. dev/bin/s56/dv: the tree built with -DKVATTN_DEV_VARIANTS, where
# KVATTN_DEV_STAGES=2|3|5|6|8 gives bf16 DP 64's decode kernels that many K/V stages (shipped: 4; blocks per SM
# follow from the smem). bench_cuda --quick at KVATTN_BENCH_D=64, all six decode shapes, rounds rotated; then the
# depth with the lowest mean time ratio against 4 runs test_grid and test_inflight (bf16 DP 64 at that depth).
# SUPERSEDED by docs/perf/s57/run1.sh (fifty-seventh session: the shipped depth runs two blocks per SM, not three,
# and a third block gets no item unless the split aims at it). NOT RUN in the fifty-sixth session: after call 3 the device was refused ("no new device machine is lent"). To run
# it: make BUILD=dev/bin/s56/dvb CPU_ARCH=-march=x86-64-v2 NVCC_DEFS=-DKVATTN_DEV_VARIANTS -j2 lib &&
# bash dev/relink.sh dev/bin/s56/dvb dev/bin/s56/dv, then carry dev/bin/s56/dv. (Built so at the session's end from
# 88a0c97's tree, 35 MB, spill check 0 more / 0 less; dev/bin is not tracked, so rebuild it if it is gone.)
T=dev/bin/s56/dv
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
for r in 1 2; do
  for ns in 4 2 3 5 6 8; do
    [ $(( $(date +%s) - t0 )) -gt 300 ] && break 2
    st round $r stages $ns
    KVATTN_DEV_STAGES=$ns KVATTN_BENCH_D=64 timeout 60 $T/bench_cuda --quick --md $L/d64_ns${ns}_r$r.md \
      --json $L/d64_ns${ns}_r$r.json > $L/d64_ns${ns}_r$r.log 2>&1; echo "rc=$?"
    grep -E "(8x8192|64x4096) \| (contiguous|paged 16)|FAIL" $L/d64_ns${ns}_r$r.md | cut -d'|' -f2-8
    pack
  done
done
best=$(python3 - $L <<'PY'
import json, glob, sys, collections
L = sys.argv[1]; t = collections.defaultdict(dict)
for f in glob.glob(L + "/d64_ns*_r*.json"):
    ns = int(f.split("_ns")[1].split("_")[0])
    for r in json.load(open(f)):
        if r["kind"] == "decode":
            t[ns].setdefault((r["B"], r["L"], r["page_size"]), []).append(r["us"])
base = {k: sum(v) / len(v) for k, v in t[4].items()}
best, bm = 4, 1.0
for ns, rows in sorted(t.items()):
    m = sum(sum(v) / len(v) / base[k] for k, v in rows.items()) / len(rows)
    print(f"stages {ns}: mean isolated time ratio to 4 = {m:.4f} over {len(rows)} rows", file=sys.stderr)
    if m < bm: best, bm = ns, m
print(best)
PY
)
echo "best: $best"
if [ "$best" != 4 ]; then
  st tests at $best
  KVATTN_DEV_STAGES=$best timeout 150 bash tests/run_all.sh $T/test_grid $T/test_inflight > $L/tests_ns$best.log 2>&1
  echo "tests rc=$?"; grep -E "^test_[a-z0-9_]+: [0-9]+ passed|FAIL" $L/tests_ns$best.log | head
  pack
fi
st done
