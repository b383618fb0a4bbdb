#!/bin/bash
# s57 plan, call 4 (PREPARED IN THE FIFTY-SEVENTH SESSION, NOT RUN: no device machine was lent in that session).
# Head dim 64 with three decode blocks per SM at the shipped depth: dev/bin/s57/swz is v107 (see run2.sh) plus
# -DKV_DECODE_SWZ_64=1 (DP 64's K / V stages swizzled like DP 128's, 128-byte rows instead of 144: 64 KiB of stages
# + 5 KiB static + 1 KiB reserved = 70 KiB, three blocks per SM at 160 registers, each three tiles ahead; the
# fifteenth session measured this layout with the split aimed at two blocks: faster only where every block had
# items, 128x2048 / 256x1024), built with the dev variants. Against dev/bin/s57/dvbench (shipped: two blocks of
# four stages) and dev/bin/s57/v107bench (v107 at three stages: three blocks, two tiles ahead). Carry
# ["dev/bin/s57/dvbench", "dev/bin/s57/v107bench", "dev/bin/s57/swz"] (~57 MiB with the tree). Rebuild swz:
#   git apply dev/experiments/v107_split_resident_blocks.patch &&
#   make BUILD=dev/bin/s57/swzb CPU_ARCH=-march=x86-64-v2 "NVCC_DEFS=-DKVATTN_DEV_VARIANTS -DKV_DECODE_SWZ_64=1" -j2 lib &&
#   bash dev/relink.sh dev/bin/s57/swzb dev/bin/s57/swz && git checkout src dev/attn_test.cu
#   (keep bench_cuda, libkvattn.so, test_grid, test_inflight, test_cuda_split; v107bench and dvbench: bench_cuda and
#   libkvattn.so of dev/bin/s57/v107 and dev/bin/s57/dv)
# (a) bench_cuda --quick at head dim 64, decode 8x8192, 64x4096, 128x2048, 256x1024, two rounds, builds alternating;
# (b) swz's tests (quick grids; test_grid draws every head dim, 40 - 64 run the swizzled kernels): test_grid,
#     test_inflight, test_cuda_split; then memcheck of test_grid on swz, limited to the time left.
S=dev/bin/s57/swz
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
CFG=("d64_dv:dev/bin/s57/dvbench:" "d64_v107_ns3:dev/bin/s57/v107bench:KVATTN_DEV_STAGES=3" "d64_swz:$S:")
for r in 1 2; do
  for i in "${!CFG[@]}"; do
    c=${CFG[$(( r == 1 ? i : ${#CFG[@]} - 1 - i ))]}
    IFS=: read -r name bin envs <<< "$c"
    [ $(( $(date +%s) - t0 )) -gt 240 ] && break 2
    st round $r $name "($envs)"
    env $envs KVATTN_DEV_OCC_LOG=1 KVATTN_BENCH_D=64 KVATTN_BENCH_DECODE=8x8192,64x4096,128x2048,256x1024 timeout 80 \
      $bin/bench_cuda --quick --md $L/${name}_r$r.md --json $L/${name}_r$r.json > $L/${name}_r$r.log 2>&1; echo "rc=$?"
    grep -E "x[0-9]+ \| (contiguous|paged 16)|FAIL" $L/${name}_r$r.md | cut -d'|' -f2-8
    [ $r = 1 ] && grep -E "kvattn (occupancy: dtype bf16 DP 64 .* decode 1 early 1 self 0 append 0|decode grid)" \
      $L/${name}_r$r.log | sort -u
    pack
  done
done
st tests swz
KVATTN_TEST_QUICK=1 timeout 150 bash tests/run_all.sh $S/test_grid $S/test_inflight $S/test_cuda_split > $L/tests_swz.log 2>&1
echo "tests rc=$?"; grep -E "^test_[a-z0-9_]+: [0-9]+ passed|FAIL|exited|^[0-9]+ passed" $L/tests_swz.log | head -8
pack
left=$(( 580 - ($(date +%s) - t0) ))
if [ $left -gt 30 ]; then
  st memcheck test_grid, $left s
  KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout $left compute-sanitizer --tool memcheck \
    --error-exitcode 99 --leak-check no $S/test_grid > $L/mc_test_grid.log 2>&1
  echo "memcheck rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_test_grid.log | tail -2 | paste -sd' ')"
  pack
fi
st done
