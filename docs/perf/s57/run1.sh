#!/bin/bash
# s57 plan, call 1 (PREPARED IN THE FIFTY-SEVENTH SESSION, NOT RUN: no device machine was lent in that session).
# Binaries: dev/bin/s57/dv, the tree built with -DKVATTN_DEV_VARIANTS (kernels identical to the shipped library's;
# the dev knobs below are read from the environment and default to the shipped plan). To rebuild it:
#   make BUILD=dev/bin/s57/dvb CPU_ARCH=-march=x86-64-v2 NVCC_DEFS=-DKVATTN_DEV_VARIANTS -j2 lib &&
#   bash dev/relink.sh dev/bin/s57/dvb dev/bin/s57/dv          (then carry dev/bin/s57/dv)
# (a) the full benchmark at the shipped settings (no knob set);
# (b) v107, the auto split aimed at every resident decode block. launch_fast sets split_blocks = 2 x SMs whenever
#     more than two decode blocks fit on an SM ("the workspace bound assumes <= 2 per SM"), so a lean plan (B <= 64,
#     both target shapes) cuts pieces for two blocks per SM and the others get no item. The blocks per SM by
#     ptxas -v (registers) and the smem sizes (fifty-seventh session, attn_notes.md): DP 32 (head dims 8 - 32) 4 per
#     SM shipped; DP 64 2 at the shipped 4 stages, 3 at 3 stages; DP 96 2 at the shipped 4, 3 at 2 stages. Settings:
#     KVATTN_DEV_SPLITB = blocks x SMs with KVATTN_DEV_SPLITX=2 (the workspace bound) where more than two fit,
#     crossed with the stage depths (KVATTN_DEV_STAGES). bench_cuda --quick, decode 8x8192 and 64x4096, two rounds
#     with the order reversed, a 420 s guard;
#     KVATTN_DEV_OCC_LOG=1 has the dev build print each kernel's occupancy and the decode grid (checks the counts above);
# (c) the best setting per head dim (lowest mean isolated-time ratio against the shipped one), if not the shipped
#     one, through test_grid (every head dim from 8 to 256 among its cases) and test_inflight, quick grids, with its knobs set.
T=dev/bin/s57/dv
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $L/gpu.txt
SMS=$(python3 -c "import torch; print(torch.cuda.get_device_properties(0).multi_processor_count)" 2>/dev/null || echo 132)
echo "SMs: $SMS" | tee $L/sms.txt
st bench d128, shipped settings
timeout 220 $T/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "eiling|8x8192|64x4096|1x16384|FAIL" $L/cuda_bench.md | head -20
grep -A4 "Inflight" $L/cuda_bench.md | tail -1
pack
# name : head dim : environment (name's prefix: head dim; dNN_ns4 is the shipped setting of each)
S3="KVATTN_DEV_SPLITB=$((3 * SMS)) KVATTN_DEV_SPLITX=2"; S4="KVATTN_DEV_SPLITB=$((4 * SMS)) KVATTN_DEV_SPLITX=2"
CFG=("d64_ns4:64:" "d64_ns3:64:KVATTN_DEV_STAGES=3" "d64_ns3_s3:64:KVATTN_DEV_STAGES=3 $S3" "d64_ns5:64:KVATTN_DEV_STAGES=5"
     "d96_ns4:96:" "d96_ns2:96:KVATTN_DEV_STAGES=2" "d96_ns2_s3:96:KVATTN_DEV_STAGES=2 $S3" "d96_ns3:96:KVATTN_DEV_STAGES=3"
     "d32_ns4:32:" "d32_ns4_s4:32:$S4")
for r in 1 2; do
  for i in "${!CFG[@]}"; do
    c=${CFG[$(( r == 1 ? i : ${#CFG[@]} - 1 - i ))]}
    name=${c%%:*}; rest=${c#*:}; d=${rest%%:*}; envs=${rest#*:}
    [ $(( $(date +%s) - t0 )) -gt 420 ] && break 2
    st round $r $name "($envs)"
    env $envs KVATTN_DEV_OCC_LOG=1 KVATTN_BENCH_D=$d KVATTN_BENCH_DECODE=8x8192,64x4096 timeout 60 $T/bench_cuda --quick \
      --md $L/${name}_r$r.md --json $L/${name}_r$r.json > $L/${name}_r$r.log 2>&1; echo "rc=$?"
    grep -E "(8x8192|64x4096) \| (contiguous|paged 16)|FAIL" $L/${name}_r$r.md | cut -d'|' -f2-8
    [ $r = 1 ] && grep -E "kvattn (occupancy: dtype bf16 DP $d .* decode 1 early 1 self 0 append 0|decode grid)" \
      $L/${name}_r$r.log | sort -u   # (KVATTN_DEV_OCC_LOG: blocks per SM and the split's aim, as the library saw them)
    pack
  done
done
python3 - $L > $L/best.txt <<'PY'
import json, glob, sys, collections
# per setting and decode row (B, L, page size; 0 = contiguous): isolated and back-to-back times of both rounds;
# a setting with a failed check is never picked
L = sys.argv[1]; t = collections.defaultdict(lambda: collections.defaultdict(list)); bad = set()
for f in glob.glob(L + "/d*_r*.json"):
    name = f.split("/")[-1].rsplit("_r", 1)[0]
    try:
        recs = json.load(open(f))
    except ValueError:  # a bench cut off by its timeout leaves no closing bracket
        print(f"# {f}: unreadable, left out"); continue
    for r in recs:
        if r["kind"] == "decode":
            t[name][(r["B"], r["L"], r["page_size"], "iso")].append(r["us"])
            t[name][(r["B"], r["L"], r["page_size"], "b2b")].append(r["b2b_us"])
            if not r["check_ok"]: bad.add(name)
for d in ("d64", "d96", "d32"):
    base = {k: sum(v) / len(v) for k, v in t[d + "_ns4"].items()}
    best, bm = d + "_ns4", 1.0
    if not base:
        print(f"# {d}: no run of the shipped setting, nothing picked"); continue
    for name in sorted(n for n in t if n.startswith(d + "_")):
        for kind in ("iso", "b2b"):
            rows = {k: v for k, v in t[name].items() if k in base and k[3] == kind}
            if not rows: continue
            m = sum(sum(v) / len(v) / base[k] for k, v in rows.items()) / max(len(rows), 1)
            print(f"# {name}: {kind} mean time ratio to {d}_ns4 = {m:.4f} over {len(rows)} rows" +
                  (" CHECK FAILED" if name in bad else ""))
            if kind == "iso" and m < bm and name not in bad: best, bm = name, m
    print(best)
PY
cat $L/best.txt
for best in $(grep -v "^#" $L/best.txt); do
  case $best in *_ns4) continue;; esac
  [ $(( $(date +%s) - t0 )) -gt 470 ] && { echo "no time left for the tests at $best"; continue; }
  for c in "${CFG[@]}"; do [ "${c%%:*}" = "$best" ] && envs=${c#*:*:}; done
  st tests at $best "($envs)"
  env $envs KVATTN_TEST_QUICK=1 timeout 100 bash tests/run_all.sh $T/test_grid $T/test_inflight \
    > $L/tests_$best.log 2>&1; echo "tests rc=$?"; grep -E "^test_[a-z0-9_]+: [0-9]+ passed|FAIL|exited|^[0-9]+ passed" $L/tests_$best.log | head
  pack
done
st done
