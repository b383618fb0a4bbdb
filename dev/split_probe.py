#!/usr/bin/env python3
"""split_probe.py — decode steps timed at several num_splits values, for the auto split's choices (dev tool,
forty-first session).

  python3 dev/split_probe.py [--rounds R] SPEC ...
  SPEC = BxL:D:page:n1/n2/...   e.g. 16x8192:128:0:0/2   (page 0: contiguous cache; n 0: the automatic split)
  page with a suffix h (0h, 16h): the cache in the HND layout ([B, Hk, L, D] or [pages, Hk, page, D] in memory,
  passed as the strided view [B, L, Hk, D] / [pages, page, Hk, D]; forty-seventh session)
  page with a suffix v (0v, 16v, 0hv): the same step through flash_attn_varlen_func_with_kvcache, q [B, H, D] with
  cu_seqlens_q = 0, 1, ..., B (the form of bench_cuda's decode rows, without their lse, and of an inflight step's
  pure-decode call; forty-seventh session, first run in the forty-eighth: docs/perf/s48/run1)

bf16, H 32 / Hk 8, one query per sequence, every cache holding L keys. Per spec the inputs are built once; for each
n a CUDA graph of 20 flash_attn_with_kvcache calls (num_splits=n) is captured, and the graphs are replayed in
rotated rounds (CUDA events; per-call time = replay / 20). Prints per n the median over the rounds, the K / V
bytes per second, and the largest difference of its output from the first n's (a check that every n computes the
same attention)."""
import statistics
import sys

import torch

import kvattn

CALLS = 20


def spec_run(spec, rounds):
    bl, d, page, ns = spec.split(":")
    B, L = (int(x) for x in bl.lower().split("x"))
    varlen = page.endswith("v")
    page = page.rstrip("v")
    hnd = page.endswith("h")
    D, page = int(d), int(page.rstrip("h"))
    ns = [int(x) for x in ns.split("/")]
    H, Hk = 32, 8
    g = torch.Generator(device="cuda").manual_seed(1)
    q = torch.randn(B, 1, H, D, device="cuda", dtype=torch.bfloat16, generator=g)
    bt = None
    if page > 0:
        per = (L + page - 1) // page
        perm = torch.randperm(B * per, generator=torch.Generator().manual_seed(2)).to(torch.int32)
        bt = perm.view(B, per).cuda()
        shape = (B * per, page, Hk, D)
    else:
        shape = (B, L, Hk, D)
    if hnd:  # heads outermost in memory: the same logical tensor, strides (.., D, rows * D, 1)
        hs = (shape[0], shape[2], shape[1], shape[3])
        kc = torch.randn(hs, device="cuda", dtype=torch.bfloat16, generator=g).transpose(1, 2)
        vc = torch.randn(hs, device="cuda", dtype=torch.bfloat16, generator=g).transpose(1, 2)
    else:
        kc = torch.randn(shape, device="cuda", dtype=torch.bfloat16, generator=g)
        vc = torch.randn_like(kc)
    seqlens = torch.full((B,), L, dtype=torch.int32, device="cuda")
    cu = torch.arange(B + 1, dtype=torch.int32, device="cuda")  # (the varlen form's cu_seqlens_q)
    outs, graphs = {}, {}
    for n in ns:
        out = torch.empty(B, 1, H, D, device="cuda", dtype=torch.bfloat16)

        def call(n=n, out=out):
            if varlen:
                kvattn.flash_attn_varlen_func_with_kvcache(q.view(B, H, D), kc, vc, cu, 1, cache_seqlens=seqlens,
                                                           block_table=bt, num_splits=n, out=out.view(B, H, D))
            else:
                kvattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=seqlens, block_table=bt, num_splits=n,
                                               out=out)
        call()
        torch.cuda.synchronize()
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            call()
        torch.cuda.current_stream().wait_stream(s)
        gr = torch.cuda.CUDAGraph()
        with torch.cuda.graph(gr):
            for _ in range(CALLS):
                call()
        gr.replay()
        torch.cuda.synchronize()
        outs[n], graphs[n] = out, gr
    times = {n: [] for n in ns}
    for r in range(rounds):
        order = ns[r % len(ns):] + ns[:r % len(ns)]
        for n in order:
            e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            e0.record()
            graphs[n].replay()
            e1.record()
            torch.cuda.synchronize()
            times[n].append(e0.elapsed_time(e1) * 1e3 / CALLS)
    nbytes = 2 * B * L * Hk * D * 2
    ref = outs[ns[0]].float()
    for n in ns:
        med = statistics.median(times[n])
        diff = (outs[n].float() - ref).abs().max().item()
        form = ("page %d" % page if page else "contig") + (" HND" if hnd else "") + (" varlen" if varlen else "")
        print(f"{bl} D {D} {form} splits {n if n else 'auto'}: {med:.1f} us "
              f"({min(times[n]):.1f} - {max(times[n]):.1f}), {nbytes / med / 1e6:.2f} TB/s, max diff {diff:.1e}",
              flush=True)
    del graphs, outs, kc, vc
    torch.cuda.empty_cache()


def main():
    args = sys.argv[1:]
    rounds = 7
    if args and args[0] == "--rounds":
        rounds = int(args[1])
        args = args[2:]
    for spec in args:
        spec_run(spec, rounds)


if __name__ == "__main__":
    main()
