#!/bin/bash
# s60 call 1. Three builds, all C at -march=x86-64-v2, tests linked to their libkvattn.so (dev/relink.sh):
#   dev/bin/s60/cand = the tree at the session's start + this session's arch check (kv_arch_runs_on, backend.cu)
#     + v107 (dev/experiments/v107_split_resident_blocks.patch): the candidate to ship;
#   dev/bin/s60/cur  = the tree at the session's start (ea80c8e's code; bench_cuda and libkvattn.so copied from dev/bin/s59/cur);
#   dev/bin/s60/a80  = the tree + arch check built with make CUDA_ARCH=80 (SASS for sm_80 only: cannot run on 9.0).
# Carry ["dev/bin/s60/cand", "dev/bin/s60/cur", "dev/bin/s60/a80"].
C=dev/bin/s60/cand; U=dev/bin/s60/cur; A=dev/bin/s60/a80
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
sum() { grep -E "^test_[a-z0-9_]+: [0-9]+ passed|FAIL|exited|^[0-9]+ passed" $1 | head -14; }
nvidia-smi --query-gpu=name,compute_cap,clocks.sm,clocks.mem,temperature.gpu --format=csv > $L/gpu.txt; cat $L/gpu.txt
# (1) the arch check (binaries stripped to fit the carry limit): the sm_80 build on a 9.0 device must say it is unavailable, and why
st a80
timeout 60 bash tests/run_all.sh $A/test_bad_input $A/test_cuda_graph > $L/a80_tests.log 2>&1; echo "rc=$?"
grep -E "not available|passed" $L/a80_tests.log | head -4
# (2) the candidate's tests
st cand tests
timeout 200 bash tests/run_all.sh $C/test_default_strides $C/test_bad_input $C/test_cuda_invariance $C/test_cuda_split \
  > $L/cand_full.log 2>&1; echo "rc=$?"; sum $L/cand_full.log
KVATTN_TEST_QUICK=1 timeout 90 bash tests/run_all.sh $C/test_grid $C/test_inflight $C/test_cuda_graph \
  > $L/cand_quick.log 2>&1; echo "rc=$?"; sum $L/cand_quick.log
pack
st memcheck cand test_cuda_invariance
KVATTN_TEST_QUICK=1 KVATTN_TEST_NO_API_ERRORS=1 KVATTN_TEST_EXACT_ALLOC=1 timeout 100 compute-sanitizer --tool memcheck \
  --error-exitcode 99 --leak-check no $C/test_cuda_invariance > $L/mc_cand_invariance.log 2>&1
echo "memcheck rc=$? $(grep -E "passed|ERROR SUMMARY" $L/mc_cand_invariance.log | tail -2 | paste -sd' ')"
pack
# (3) v107's bench at head dim 32, against the start's library, two rounds in reversed order
for r in 1 2; do
  for b in cur cand; do
    [ $r = 2 ] && b=$([ $b = cur ] && echo cand || echo cur)
    d=$([ $b = cur ] && echo $U || echo $C)
    st bench d32 $b round $r
    KVATTN_BENCH_D=32 KVATTN_BENCH_DECODE=8x8192,64x4096,128x2048,256x1024 timeout 40 $d/bench_cuda --quick \
      --md $L/d32_${b}_r$r.md --json $L/d32_${b}_r$r.json > $L/d32_${b}_r$r.log 2>&1; echo "rc=$?"
    grep -E "x[0-9]+ \| (contiguous|paged 16)|FAIL" $L/d32_${b}_r$r.md | cut -d'|' -f2-8
  done
done
pack
# (4) the candidate's full run
st bench full
timeout 150 $C/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "eiling|8x8192|64x4096|FAIL" $L/cuda_bench.md | head -24
grep -A4 "Inflight" $L/cuda_bench.md | tail -2; grep -E "16384" $L/cuda_bench.md | tail -3
pack
st decode_step; timeout 60 $C/decode_step > $L/decode_step.log 2>&1; echo "decode_step rc=$? $(tail -1 $L/decode_step.log)"
st demo; timeout 90 $C/demo --requests 256 > $L/demo.log 2>&1; echo "demo rc=$? $(grep -i checked $L/demo.log | tail -1)"
pack
st done
