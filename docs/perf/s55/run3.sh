#!/bin/bash
# s55 call 3: the library with every fp16 output store clamped to +-65504 when finite (kv_out_from_float, attn_v0.cuh;
# dev/bin/s55/t2, built here from the tree) beside call 1's library (dev/bin/s55/old: the same API, the kernels before
# the clamp). (a) resources of both (registers per kernel); (b) the new test_fp16_max on both (the old must fail its
# CUDA cases of values 65504); (c) the full benchmark; (d) the first eleven C test binaries.
T=dev/bin/s55/t2; O=dev/bin/s55/old
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $L/gpu.txt
st resources
for x in T O; do d=${!x}; cuobjdump -res-usage $d/libkvattn.so 2>&1 | awk '/Function/{f=$2} /REG:/{print f, $0}' | sort > $L/res_$x.txt; done
diff $L/res_O.txt $L/res_T.txt > $L/res_diff.txt; echo "resource lines $(wc -l < $L/res_T.txt), diff lines $(wc -l < $L/res_diff.txt)"
st fp16 max
$T/test_fp16_max > $L/fp16max_new.log 2>&1; echo "new rc=$?"; tail -1 $L/fp16max_new.log
$O/test_fp16_max > $L/fp16max_old.log 2>&1; echo "old rc=$?"; tail -1 $L/fp16max_old.log
grep "^FAIL" $L/fp16max_old.log | sed 's/\]:.*/]/' | sort -u | head -30
pack
st bench
timeout 200 $T/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "eiling|8x8192|64x4096|1x16384|FAIL" $L/cuda_bench.md | head -20
grep -A3 "Inflight" $L/cuda_bench.md | tail -1
pack
st C suite part 1
timeout 360 bash tests/run_all.sh $T/test_bad_input $T/test_big_offsets $T/test_cpu_limits $T/test_cuda_bad_data \
  $T/test_cuda_graph $T/test_cuda_invariance $T/test_cuda_limits $T/test_cuda_packed $T/test_cuda_reset \
  $T/test_cuda_split $T/test_cuda_stress > $L/c_part1.log 2>&1; echo "C part 1 rc=$?"
grep -E "^test_[a-z_]+: [0-9]+ passed|^[0-9]+ passed|FAIL|exited" $L/c_part1.log | head -40
pack
st done
