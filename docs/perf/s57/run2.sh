#!/bin/bash
# s57 plan, call 2 (PREPARED IN THE FIFTY-SEVENTH SESSION, NOT RUN: no device machine was lent in that session).
# v107 as it would ship, against the shipped code: dev/bin/s57/v107 is the tree with
# dev/experiments/v107_split_resident_blocks.patch applied (the split aims at every decode block that runs, the
# workspace bound scaled by the blocks that fit by smem), built with -DKVATTN_DEV_VARIANTS so that KVATTN_DEV_STAGES
# still picks DP 64 / 96 depths; dev/bin/s57/dvbench holds bench_cuda and libkvattn.so of dev/bin/s57/dv (the shipped
# code in the same dev build; the whole dv folder with v107 would pass the 64 MiB carry limit). Carry
# ["dev/bin/s57/dvbench", "dev/bin/s57/v107"] (~36 MiB with the tree). Rebuild:
#   git apply dev/experiments/v107_split_resident_blocks.patch &&
#   make BUILD=dev/bin/s57/v107b CPU_ARCH=-march=x86-64-v2 NVCC_DEFS=-DKVATTN_DEV_VARIANTS -j2 lib &&
#   bash dev/relink.sh dev/bin/s57/v107b dev/bin/s57/v107 && git checkout src dev/attn_test.cu
#   (then remove from dev/bin/s57/v107 every binary that run2.sh / run3.sh do not run, for the 64 MiB carry limit;
#   dvbench: mkdir dev/bin/s57/dvbench && cp dev/bin/s57/dv/{bench_cuda,libkvattn.so} dev/bin/s57/dvbench/)
# (a) bench_cuda --quick, decode 8x8192 and 64x4096, two rounds, builds alternating: head dim 32 (v107's one change
#     at the shipped depths: four blocks per SM), 64 at 3 stages (v107) against the shipped 4 (dv), 96 at 2 stages
#     (v107) against 4 (dv), 128 (no change expected: two blocks per SM, the split aimed at both either way);
# (b) v107's tests (quick grids): test_grid (every head dim), test_inflight, test_cuda_split, test_cuda_invariance
#     and test_cuda_graph at the shipped depths; test_grid and test_inflight at KVATTN_DEV_STAGES=3 (DP 64's
#     candidate) and =2 (DP 96's); each block only while ~2 minutes of the call are left. memcheck: run3.sh.
V=dev/bin/s57/v107; T=dev/bin/s57/dvbench
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
# name : binaries : head dim : environment
CFG=("d32_dv:$T:32:" "d32_v107:$V:32:" "d64_dv:$T:64:" "d64_v107_ns3:$V:64:KVATTN_DEV_STAGES=3"
     "d96_dv:$T:96:" "d96_v107_ns2:$V:96:KVATTN_DEV_STAGES=2" "d128_dv:$T:128:" "d128_v107:$V:128:")
for r in 1 2; do
  for i in "${!CFG[@]}"; do
    c=${CFG[$(( r == 1 ? i : ${#CFG[@]} - 1 - i ))]}
    IFS=: read -r name bin d envs <<< "$c"
    [ $(( $(date +%s) - t0 )) -gt 300 ] && break 2
    st round $r $name "($envs)"
    env $envs KVATTN_DEV_OCC_LOG=1 KVATTN_BENCH_D=$d KVATTN_BENCH_DECODE=8x8192,64x4096 timeout 60 $bin/bench_cuda --quick \
      --md $L/${name}_r$r.md --json $L/${name}_r$r.json > $L/${name}_r$r.log 2>&1; echo "rc=$?"
    grep -E "(8x8192|64x4096) \| (contiguous|paged 16)|FAIL" $L/${name}_r$r.md | cut -d'|' -f2-8
    [ $r = 1 ] && grep -E "kvattn decode grid" $L/${name}_r$r.log | sort -u
    pack
  done
done
for s in "" 3 2; do
  [ $(( $(date +%s) - t0 )) -gt 440 ] && { echo "no time left for the tests at stages ${s:-shipped}"; continue; }
  st tests v107 stages "${s:-shipped}"
  B="$V/test_grid $V/test_inflight"; [ -z "$s" ] && B="$B $V/test_cuda_split $V/test_cuda_invariance $V/test_cuda_graph"
  env ${s:+KVATTN_DEV_STAGES=$s} KVATTN_TEST_QUICK=1 timeout 120 bash tests/run_all.sh $B > $L/tests_v107_${s:-shipped}.log 2>&1
  echo "tests rc=$?"; grep -E "^test_[a-z0-9_]+: [0-9]+ passed|FAIL|exited|^[0-9]+ passed" $L/tests_v107_${s:-shipped}.log | head -8
  pack
done
st done
