#!/usr/bin/env python3
"""prefill_probe.py — one causal prefill shape through kvattn's Python API, for ncu (dev tool, thirty-seventh session).

  python3 dev/prefill_probe.py B L D [calls]     bf16, H 32 / Hk 8, varlen with B sequences of L tokens, causal
On the GPU machine, e.g. (KVATTN_LIBRARY picks the library to profile):
  ncu --clock-control none -k regex:kv_prefill --launch-skip 1 -c 1 --set full -o $OUT/r python3 dev/prefill_probe.py 1 16384 256
Calls flash_attn_varlen_func `calls` times (default 3) and prints the last call's time by CUDA events."""
import sys

import torch

import kvattn


def main():
    B, L, D = (int(x) for x in sys.argv[1:4])
    calls = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    H, Hk = 32, 8
    g = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn(B * L, H, D, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(B * L, Hk, D, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(B * L, Hk, D, device="cuda", dtype=torch.bfloat16, generator=g)
    cu = torch.arange(0, (B + 1) * L, L, dtype=torch.int32, device="cuda")
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(calls):
        e0.record()
        kvattn.flash_attn_varlen_func(q, k, v, cu, cu, L, L, causal=True)
        e1.record()
    torch.cuda.synchronize()
    ms = e0.elapsed_time(e1)
    flops = 4.0 * B * L * L * H * D / 2
    print(f"B {B} L {L} D {D}: {ms * 1e3:.1f} us, {flops / ms / 1e9:.1f} TFLOP/s ({kvattn.library_path})")


if __name__ == "__main__":
    main()
