#!/usr/bin/env python3
"""compare_selftest.py — CPU check of bench/compare.py's FlashInfer plumbing (no GPU, no FlashInfer needed).

A fake `flashinfer` module whose wrappers compute paged attention from (qo_indptr, kv_indptr, kv_indices,
last_page_len) as FlashInfer defines them stands in for the real one; the page tables, indptrs and cascade
levels that compare_systems.FlashInfer / FlashInferCascade build for every (shrunk) decode, inflight, spec and
shared-prefix case must then reproduce kvattn's CPU output.

  KVATTN_LIBRARY=build/libkvattn.so PYTHONPATH=python python3 bench/compare_selftest.py
"""
import os
import sys
import types

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(os.path.dirname(HERE), "python"))
import compare  # noqa: E402
import compare_cases as cc  # noqa: E402
import compare_systems as cs  # noqa: E402

def paged_attn(q, kc, vc, qo_indptr, indptr, indices, last, causal, scale, ps):
    outs, lses = [], []
    for b in range(len(indptr) - 1):
        pages = indices[indptr[b]:indptr[b + 1]].long()
        T = (len(pages) - 1) * ps + int(last[b])
        k = kc[pages].reshape(-1, kc.shape[2], kc.shape[3])[:T].float()
        v = vc[pages].reshape(-1, vc.shape[2], vc.shape[3])[:T].float()
        qb = q[qo_indptr[b]:qo_indptr[b + 1]].float()
        G = qb.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(G, 1), v.repeat_interleave(G, 1)
        s = torch.einsum("qhd,khd->hqk", qb, k) * scale
        if causal:
            nq = qb.shape[0]
            s = s.masked_fill(torch.arange(T)[None, :] > torch.arange(nq)[:, None] + T - nq, float("-inf"))
        lses.append(torch.logsumexp(s, -1).transpose(0, 1))
        outs.append(torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), v))
    return torch.cat(outs), torch.cat(lses)

class Paged:
    def __init__(self, ws, layout, **kw): assert layout == "NHD"
    def plan(self, *a, **kw):
        if len(a) == 8 and isinstance(a[4], int) and not isinstance(a[3], int):  # prefill: qo, indptr, idx, last, H, Hk, D, ps
            self.qo, self.indptr, self.idx, self.last, _, _, _, self.ps = a
        else:  # decode: indptr, idx, last, H, Hk, D, ps
            self.indptr, self.idx, self.last, _, _, _, self.ps = a
            self.qo = torch.arange(len(self.indptr))
        self.causal, self.scale = kw.get("causal", False), kw["sm_scale"]
    def run(self, q, kv, out=None, return_lse=False):
        o, l = paged_attn(q, kv[0], kv[1], self.qo, self.indptr, self.idx, self.last, self.causal, self.scale, self.ps)
        if out is not None: out.copy_(o); o = out
        return (o.to(q.dtype), l) if return_lse else o.to(q.dtype)

class Cascade:
    def __init__(self, n, ws, layout): pass
    def plan(self, qo, indptr, idx, last, H, Hk, D, ps, causal, sm_scale, **kw):
        self.lv = list(zip(qo, indptr, idx, last)); self.ps, self.scale = ps, sm_scale
    def run(self, q, kv):
        res = [paged_attn(q, kv[0], kv[1], a, b, c, d, False, self.scale, self.ps) for a, b, c, d in self.lv]
        # level 0 has one "request" holding all queries: merge the states per query row
        (o0, l0), (o1, l1) = res
        m = torch.maximum(l0, l1)
        w0, w1 = torch.exp(l0 - m), torch.exp(l1 - m)
        return ((o0 * w0[..., None] + o1 * w1[..., None]) / (w0 + w1)[..., None]).to(q.dtype)

def main():
    fake = types.ModuleType("flashinfer")
    fake.__version__ = "fake"
    fake.BatchDecodeWithPagedKVCacheWrapper = Paged
    fake.BatchPrefillWithPagedKVCacheWrapper = Paged
    fake.MultiLevelCascadeAttentionWrapper = Cascade
    sys.modules["flashinfer"] = fake
    fi = cs.FlashInfer(torch, "cpu")
    kv = cs.Kvattn(torch)
    cases = [compare.shrink(c) for c in cc.select_cases(compare.parse_args(["--workloads", "decode,inflight,spec,shared"]))]
    bad = 0
    for c in cases:
        inp = cc.Inputs(c, "cpu", 7, 0)
        ko = kv.prepare(inp)(0).clone()
        for sysobj in (fi, cs.FlashInferCascade(fi)):
            try:
                o = sysobj.prepare(inp)(0)
            except cs.Unsupported:
                continue
            err = compare.rel_err(o, ko)
            ok = err < 2e-2
            bad += not ok
            print(f"{'ok ' if ok else 'BAD'} {err:.1e} {type(sysobj).__name__:<18} {c['name']}")
    print("failures:", bad)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
