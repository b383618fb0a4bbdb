# numerics_probe.py — the CUDA backend at extreme (but finite) scores, for the fifty-third session's numerics audit
# (docs/DECISIONS.md, "Numerics at extreme scores"). Not a test: it prints what the library returns next to the exact
# answer, for two predictions that the audit made from the kernels' formulas without a GPU:
#   (a) split merges combine the pieces by their fp32 lse alone, so with every score tied at s the merged weights drift
#       by ~|s| 2^-24 relative per piece: out should be exactly v = 1, predicted off at |s| >= ~1e5;
#       (measured so in the fifty-third session; fixed in the fifty-fourth: the pieces now carry (m, log2 l), out = 1)
#   (b) the warp-specialized prefill kernel's unmasked tiles take the row max from a rounded product but the exponent
#       from an unrounded fma, so at |score log2 e| >= 2^29 (fp16) P is rounded to inf / 0 / subnormals.
# Usage (GPU, torch): KVATTN_LIBRARY=build/libkvattn.so python3 dev/numerics_probe.py
import numpy as np
import torch

import kvattn

dev = "cuda" if torch.cuda.is_available() else "cpu"
torch.manual_seed(0)


def tied_split_merge():
    print("(a) decode, 8192 keys, every score tied at s, v = 1 (exact out = 1, lse = s + ln 8192)")
    N, D = 8192, 64
    for dt in (torch.float16, torch.bfloat16):
        for s in (1e2, 1e4, 1e5, 1e6, 1e8):
            q = torch.zeros(1, 1, 1, D, dtype=dt, device=dev)
            k = torch.zeros(1, N, 1, D, dtype=dt, device=dev)
            q[..., 0] = 16.0
            k[..., 0] = 16.0
            scale = s / 256.0
            v = torch.ones(1, N, 1, D, dtype=dt, device=dev)
            row = []
            for ns in (1, 2, 4, 8):
                out, lse = kvattn.flash_attn_with_kvcache(q, k, v, cache_seqlens=N, softmax_scale=scale, num_splits=ns,
                                                          return_softmax_lse=True)
                o = out.double().flatten()
                row.append(f"splits {ns}: out {o.min().item():.6g}..{o.max().item():.6g} "
                           f"lse-exact {lse.double().item() - (s + np.log(N)):+.3g}")
            print(f"  {str(dt)[6:]:8s} s={s:<6g} " + "; ".join(row))


def unmasked_prefill_huge_scores():
    print("(b) prefill, 64 queries x 128 keys, not causal, every score tied at s (exact out = mean(v))")
    NQ, NK, D = 64, 128, 128
    for dt in (torch.float16, torch.bfloat16):
        for s in (1e4, 1e6, 3.7e8, 1e9, 5e9):
            q = torch.zeros(1, NQ, 1, D, dtype=dt, device=dev)
            k = torch.zeros(1, NK, 1, D, dtype=dt, device=dev)
            q[..., 0] = 16.0
            k[..., 0] = 16.0
            v = (torch.rand(1, NK, 1, D, device=dev) * 2 - 1).to(dt)
            exact = v.double().mean(dim=1, keepdim=True)
            out = kvattn.flash_attn_with_kvcache(q, k, v, cache_seqlens=NK, softmax_scale=s / 256.0, num_splits=1)
            err = (out.double() - exact).abs()
            bad = (~torch.isfinite(out)).sum().item()
            print(f"  {str(dt)[6:]:8s} s={s:<8g} max |out - exact| {err[torch.isfinite(err)].max().item() if bad < out.numel() else float('nan'):.3g}, "
                  f"non-finite {bad} of {out.numel()}")


tied_split_merge()
unmasked_prefill_huge_scores()
