"""dev/cudnn_probe.py — how cuDNN's decode (SDPA, enable_gqa) reads the shapes of issue 3, for ncu.

  python3 dev/cudnn_probe.py time            # events: isolated (L2 flushed by buffer rotation) and back-to-back us
  ncu --nvtx --nvtx-include "prof/" ... python3 dev/cudnn_probe.py prof B L   # one call inside an NVTX range
bf16, H 32 / Hk 8, D 128, one query per sequence; K / V as [B, L, Hk, D] viewed [B, Hk, L, D] (the layout kvattn's
contiguous cache has and bench/compare_systems.py passes)."""
import sys
import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

H, HK, D = 32, 8, 128


def make(B, L, rot):
    g = torch.Generator(device="cuda").manual_seed(1)
    q = [torch.randn(B, 1, H, D, device="cuda", dtype=torch.bfloat16, generator=g).transpose(1, 2) for _ in range(rot)]
    kv = [(torch.randn(B, L, HK, D, device="cuda", dtype=torch.bfloat16, generator=g).transpose(1, 2),
           torch.randn(B, L, HK, D, device="cuda", dtype=torch.bfloat16, generator=g).transpose(1, 2)) for _ in range(rot)]
    return q, kv


def call(q, k, v):
    with sdpa_kernel([SDPBackend.CUDNN_ATTENTION]):
        return F.scaled_dot_product_attention(q, k, v, scale=D ** -0.5, enable_gqa=True)


def main():
    mode = sys.argv[1]
    if mode == "prof":
        B, L = int(sys.argv[2]), int(sys.argv[3])
        q, kv = make(B, L, 1)
        for _ in range(3):
            call(q[0], *kv[0])
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push("prof")
        call(q[0], *kv[0])
        torch.cuda.nvtx.range_pop()
        torch.cuda.synchronize()
        return
    for B, L in ((8, 8192), (64, 4096), (1, 32768)):
        rot = max(2, int(2 * 2 ** 30 // (2 * B * L * HK * D * 2)) + 1)
        q, kv = make(B, L, rot)
        ref = call(q[0], *kv[0]).float()
        qq, kk, vv = q[0].float(), kv[0][0].float().repeat_interleave(H // HK, 1), kv[0][1].float().repeat_interleave(H // HK, 1)
        exp = torch.softmax(qq @ kk.transpose(-1, -2) * D ** -0.5, -1) @ vv
        err = (ref - exp).abs().max().item()
        for i in range(rot):
            call(q[i], *kv[i])
        torch.cuda.synchronize()
        ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
        iso = []
        for it in range(30):
            i = it % rot
            torch.cuda.synchronize()
            ev[0].record()
            call(q[i], *kv[i])
            ev[1].record()
            torch.cuda.synchronize()
            iso.append(ev[0].elapsed_time(ev[1]) * 1e3)
        n = 50
        ev[0].record()
        for it in range(n):
            i = it % rot
            call(q[i], *kv[i])
        ev[1].record()
        torch.cuda.synchronize()
        b2b = ev[0].elapsed_time(ev[1]) * 1e3 / n
        # a graph replay of one call, as bench/compare.py times peers
        s = torch.cuda.Stream()
        with torch.cuda.stream(s):
            gr = torch.cuda.CUDAGraph()
            with torch.cuda.graph(gr):
                call(q[0], *kv[0])
        torch.cuda.synchronize()
        ev[0].record()
        for it in range(n):
            gr.replay()
        ev[1].record()
        torch.cuda.synchronize()
        gms = ev[0].elapsed_time(ev[1]) * 1e3 / n
        iso.sort()
        byt = 2 * B * L * HK * D * 2
        print(f"cudnn decode {B}x{L}: isolated median {iso[len(iso)//2]:.1f} us (min {iso[0]:.1f}), back-to-back "
              f"{b2b:.1f} us, graph replay {gms:.1f} us ({byt / gms / 1e6:.2f} TB/s); max err vs fp32 {err:.2e}")


main()
