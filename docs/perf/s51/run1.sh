#!/bin/bash
# s51 call 1: the shipped library's full bench_cuda run and demo (this session's figures; no kernel changed),
# and PERF.md's own read-ceiling method (PyTorch: sum of a 4 GiB bf16 tensor) in the same run, for reference.
N=dev/bin/s48/head
L=$OUT/logs; mkdir -p $L
pack() { (cd $OUT && tar czf logs.tgz logs); }
t0=$(date +%s); st() { echo "[+$(( $(date +%s) - t0 ))s] $*"; }
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv > $L/gpu.txt
st bench
timeout 150 $N/bench_cuda --md $L/cuda_bench.md --json $L/cuda_bench.json > $L/bench.log 2>&1; echo "bench rc=$?"
grep -E "eiling|8x8192|64x4096|inflight|16384|^\| [0-9.]+ \|" $L/cuda_bench.md | head -40
pack
st demo
timeout 40 $N/demo --requests 256 > $L/demo.log 2>&1; echo "demo rc=$?"; tail -n 2 $L/demo.log
pack
st torch_sum
timeout 60 python3 - > $L/torch_sum.txt 2>&1 <<'PY'
import torch
x = torch.randn(2 * 1024**3, dtype=torch.bfloat16, device="cuda")  # 4 GiB
for _ in range(3): x.sum()
torch.cuda.synchronize()
ts = []
for _ in range(20):
    a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    a.record(); x.sum(); b.record(); torch.cuda.synchronize(); ts.append(a.elapsed_time(b) * 1e-3)
ts.sort(); t = ts[len(ts) // 2]
print(f"torch {torch.__version__}: sum of a 4 GiB bf16 tensor, median of 20: {t*1e6:.1f} us = {x.numel()*2/t/1e12:.3f} TB/s")
PY
cat $L/torch_sum.txt
pack
st done
