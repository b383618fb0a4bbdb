#!/bin/bash
# s54 call 1: the split merge carrying each piece's (m, log2 l) instead of one fp32 lse (src/cuda/attn_kernels.cuh
# kv_piece_ml / kv_combine_task; attn_prefill_sm90.cuh). (a) the new test_huge_scores on this library (T) and on the
# session start's library (O, kernels of ba67322: must fail); (b) dev/numerics_probe.py on the new library; (c) the
# full benchmark; (d) the whole C suite. Binaries built here (C at -march=x86-64-v2, linked to their libkvattn.so).
T=dev/bin/s54/tree; O=dev/bin/s54/old
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $L/gpu.txt
st resources
for x in T O; do d=${!x}; cuobjdump -res-usage $d/libkvattn.so 2>&1 | awk '/Function/{f=$2} /REG:/{print f, $0}' | sort > $L/res_$x.txt; done
diff $L/res_O.txt $L/res_T.txt > $L/res_diff.txt; echo "resource lines $(wc -l < $L/res_T.txt), diff lines $(wc -l < $L/res_diff.txt)"
st huge scores
$T/test_huge_scores > $L/huge_new.log 2>&1; echo "new rc=$?"; tail -1 $L/huge_new.log
$O/test_huge_scores > $L/huge_old.log 2>&1; echo "old rc=$?"; tail -1 $L/huge_old.log
grep -c "^  FAIL\|FAIL" $L/huge_old.log
st probe
PYTHONPATH=$PWD/python KVATTN_LIBRARY=$PWD/$T/libkvattn.so timeout 60 python3 dev/numerics_probe.py > $L/numerics_probe.log 2>&1; echo "probe rc=$?"
head -12 $L/numerics_probe.log
pack
st bench
timeout 200 $T/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "eiling|8x8192|64x4096|inflight|16384|FAIL" $L/cuda_bench.md | head -40
pack
st C suite
timeout 340 bash tests/run_all.sh $T/test_* > $L/c_suite.log 2>&1; echo "C suite rc=$?"
grep -E "^test_[a-z_]+: [0-9]+ passed|^[0-9]+ passed|FAIL" $L/c_suite.log | head -40
pack
st done
