#!/usr/bin/env python3
"""prefill_probe.py — one causal prefill shape through kvattn's Python API, for ncu and quick timings (dev tool,
thirty-seventh session; paged form and medians fortieth session).

  python3 dev/prefill_probe.py B L D [calls] [page]    bf16, H 32 / Hk 8, varlen with B sequences of L tokens, causal
page > 0: K / V in a paged pool of that page size (NHD, pages of each sequence in a shuffled order) through
flash_attn_varlen_func's block_table; else packed K / V.
On the GPU machine, e.g. (KVATTN_LIBRARY picks the library to profile):
  ncu --clock-control none -k regex:kv_prefill --launch-skip 1 -c 1 --set full -o $OUT/r python3 dev/prefill_probe.py 1 16384 256
Calls flash_attn_varlen_func `calls` times (default 3), each timed by CUDA events, and prints the last call's time
and the median of all but the first."""
import statistics
import sys

import torch

import kvattn


def main():
    B, L, D = (int(x) for x in sys.argv[1:4])
    calls = int(sys.argv[4]) if len(sys.argv) > 4 else 3
    page = int(sys.argv[5]) if len(sys.argv) > 5 else 0
    H, Hk = 32, 8
    g = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn(B * L, H, D, device="cuda", dtype=torch.bfloat16, generator=g)
    k = torch.randn(B * L, Hk, D, device="cuda", dtype=torch.bfloat16, generator=g)
    v = torch.randn(B * L, Hk, D, device="cuda", dtype=torch.bfloat16, generator=g)
    cu = torch.arange(0, (B + 1) * L, L, dtype=torch.int32, device="cuda")
    bt = None
    if page > 0:
        per = (L + page - 1) // page
        perm = torch.randperm(B * per, generator=torch.Generator().manual_seed(2)).to(torch.int32)
        bt = perm.view(B, per).cuda()
        kp = torch.zeros(B * per, page, Hk, D, device="cuda", dtype=torch.bfloat16)
        vp = torch.zeros_like(kp)
        for b in range(B):
            for s in range(per):
                n = min(page, L - s * page)
                kp[bt[b, s]][:n] = k[b * L + s * page: b * L + s * page + n]
                vp[bt[b, s]][:n] = v[b * L + s * page: b * L + s * page + n]
        k, v = kp, vp
    times = []
    for _ in range(calls):
        e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        e0.record()
        kvattn.flash_attn_varlen_func(q, k, v, cu, cu, L, L, causal=True, block_table=bt)
        e1.record()
        torch.cuda.synchronize()
        times.append(e0.elapsed_time(e1))
    ms = times[-1]
    med = statistics.median(times[1:]) if calls > 1 else ms
    flops = 4.0 * B * L * L * H * D / 2
    print(f"B {B} L {L} D {D} page {page}: {ms * 1e3:.1f} us, {flops / ms / 1e9:.1f} TFLOP/s; median of {len(times[1:])}: "
          f"{med * 1e3:.1f} us, {flops / med / 1e9:.1f} TFLOP/s ({kvattn.library_path})")


if __name__ == "__main__":
    main()
