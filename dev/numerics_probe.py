# numerics_probe.py — the CUDA backend at extreme (but finite) scores, for the fifty-third session's numerics audit
# (docs/DECISIONS.md, "Numerics at extreme scores"). Not a test: it prints what the library returns next to the exact
# answer, for predictions that the audit made from the kernels' formulas without a GPU:
#   (a) split merges combine the pieces by their fp32 lse alone, so with every score tied at s the merged weights drift
#       by ~|s| 2^-24 relative per piece: out should be exactly v = 1, predicted off at |s| >= ~1e5;
#       (measured so in the fifty-third session; fixed in the fifty-fourth: the pieces now carry (m, log2 l), out = 1)
#   (b) the warp-specialized prefill kernel's unmasked tiles take the row max from a rounded product but the exponent
#       from an unrounded fma, so at |score log2 e| >= 2^29 (fp16) P is rounded to inf / 0 / subnormals.
# and the three of "Predicted, not measured (CUDA)" (docs/DECISIONS.md), each against a float64 answer and, on CUDA,
# against the prediction worked out here in float64 (P rounded to the element type for P x V, l the sum of unrounded P):
#   (c) fp16 P underflow: a P below 2^-25 of the running row max is dropped from the products but counted in l.
#       65536 keys: 8 top keys (score g, v = 0; a top key in the first tile of every decode warp and prefill row)
#       or key 0 alone, the rest small keys (score 0, v = 1), P_small = e^-g ~ 2^-26 (rounds to 0 in fp16) or
#       ~1.45 2^-24 (a subnormal half, rounds to 2^-24); decode and 64-query prefill, fp16 and bf16;
#   (d) fp16 output overflow: rounding P up by up to 2^-11 relative can take an output near 65504 past 65520, to inf.
#       Tied scores (v = 65504; v = 65504 / 65472, exact 65488), then 8 top keys at P = 1 and the rest at
#       P = 0.5 + 1.05 2^-12 (rounded up by 0.95 2^-11 in fp16) with v = 65504, 65504 x 3 / 65472 x 1 (exact
#       65496), 65504 / 65472 (exact 65488, the edge: out < 65488 (1 + 2^-11) = 65519.98 < 65520) and 65472;
#   (e) a NaN / +inf in v or k of one key j of a causal prefill, masked for the rows < j: exactly, those rows are
#       finite (rows >= j are not); predicted non-finite on CUDA (0 x NaN in the mma), finite on the CPU backend,
#       which computes masked keys not at all. flash_attn_varlen_func (128 x 128) and flash_attn_with_kvcache (64 new
#       keys appended to 64 cached).
# (c) - (e) run on every backend the machine has (CUDA tensors, CPU tensors); without torch, (a) and (b) are skipped
# and (c) - (e) run on the CPU backend with NumPy arrays (bf16 from ml_dtypes).
# Usage (GPU, torch): KVATTN_LIBRARY=build/libkvattn.so python3 dev/numerics_probe.py
import numpy as np

try:
    import torch
except ImportError:  # (c) - (e) on the CPU backend with NumPy arrays
    torch = None

import kvattn

dev = "cuda" if torch is not None and torch.cuda.is_available() else "cpu"
if torch is not None:
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


# ---- (c) - (e): inputs built in float64 NumPy, put on each backend in the element type, read back for the answers --
BACKENDS = ("cuda", "cpu") if dev == "cuda" else ("cpu",)
UNIT = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}  # unit roundoff of the element type


def put(x, dt, where):
    """float64 NumPy x as a kvattn input of dtype dt ("float16", "bfloat16", "int32") for backend where ("cuda",
    "cpu"): a torch tensor when torch is here, else a NumPy array (bfloat16 from ml_dtypes)."""
    x = np.ascontiguousarray(x)
    if torch is not None:
        return torch.from_numpy(x).to(device=where, dtype=getattr(torch, dt))
    if dt == "bfloat16":
        import ml_dtypes

        return x.astype(ml_dtypes.bfloat16)
    return x.astype(dt)


def get(t):
    """a kvattn input or output as float64 NumPy"""
    if torch is not None and isinstance(t, torch.Tensor):
        return t.double().cpu().numpy()
    return np.asarray(t).astype(np.float64)


def rounded(x, dt):
    """x rounded to the element type dt, as float64 (float16: subnormals, 0 below 2^-25, inf from 65520)"""
    with np.errstate(over="ignore"):
        return get(put(np.asarray(x, dtype=np.float64), dt, "cpu"))


def top_keys(n):
    """The keys that hold the row max: one at the start of each decode warp's 16-key share ([16w, 16w + 16) of every
    64-key tile) of the first and of the last tile, so that every unit of work (a decode warp, a prefill warp or
    warpgroup, tiles of 64 or 128 keys, in either direction) has the row max from its first tile on."""
    return np.array([0, 16, 32, 48, n - 64, n - 48, n - 32, n - 16])


def ranges(idx):
    """[0, 1, 2, 5] -> '0-2,5'"""
    idx = [int(i) for i in idx]
    if not idx:
        return "none"
    out, lo = [], idx[0]
    for a, b in zip(idx, idx[1:] + [None]):
        if b != a + 1:
            out.append(f"{lo}-{a}" if a > lo else f"{lo}")
            lo = b
    return ",".join(out)


def rounded_on_cuda(N, top, mode):
    """The keys whose P the CUDA kernels compute with a top key already in the running row max (so their P is rounded
    to the element type for P x V): the keys go forward from the first tile; a decode warp w has keys [16w, 16w + 16)
    of every 64-key tile and its own running max (attn_kernels.cuh, merged in fp32 at the end), a prefill row all keys
    (every layout here has a top key at key 0, in the first tile of any tile size). The other keys take P against
    their own warp's max (P = 1 here) and get their weight in fp32."""
    j = np.arange(N)
    if mode == "prefill":
        return j >= 0
    out = np.zeros(N, dtype=bool)
    for w in range(4):
        tw = top[top % 64 // 16 == w]
        if tw.size:
            out |= (j % 64 // 16 == w) & (j // 64 >= tw.min() // 64)
    return out


def small_p_dropped():
    N, D = 65536, 64
    print(f"(c) {N} keys: top keys (score g, v = 0) and small keys (score 0, v = 1), softmax_scale 1, num_splits 1: "
          f"exact out = S / (T + S), S = (N - T) e^-g, T top keys; predicted on CUDA: a small key's P rounded to the "
          f"element type in P x V where its warp's running max holds a top key (all keys with 8 top keys in the first "
          f"and last tile; with key 0 alone, decode warps 1 - 3 never see it: 3/4 of the keys kept), l unrounded; "
          f"'l holds' = (e^(lse - g) - T) / S, 1 when l counts every small key")
    for layout, top in (("8 top keys", top_keys(N)), ("key 0 top", np.array([0]))):
        T, small = len(top), np.setdiff1d(np.arange(N), top)
        for label, g in (("P ~ 2^-26", 26 * np.log(2)), ("P ~ 1.45 2^-24", 24 * np.log(2) - np.log(1.45))):
            for dt in ("float16", "bfloat16"):
                for mode, nq in (("decode", 1), ("prefill", 64)):
                    for where in BACKENDS:
                        q = np.zeros((1, nq, 1, D))
                        k = np.zeros((1, N, 1, D))
                        v = np.ones((1, N, 1, D))
                        q[..., 0] = 1.0
                        k[0, top, 0, 0] = g
                        v[0, top] = 0.0
                        qd, kd, vd = put(q, dt, where), put(k, dt, where), put(v, dt, where)
                        gs = get(kd)[0, top[0], 0, 0]  # g as stored
                        p_small = np.exp(-gs)
                        S = len(small) * p_small
                        exact = S / (T + S)
                        lse_exact = gs + np.log(T + S)
                        # CUDA: the products take P rounded to the element type, l the fp32 P; the CPU keeps P in fp32
                        if where == "cuda":
                            r = rounded_on_cuda(N, top, mode)[small].sum()
                            pred = (r * rounded(p_small, dt).item() + (len(small) - r) * p_small) / (T + S)
                        else:
                            pred = exact
                        out, lse = kvattn.flash_attn_with_kvcache(qd, kd, vd, cache_seqlens=N, softmax_scale=1.0,
                                                                  num_splits=1, return_softmax_lse=True)
                        o, ls = get(out), get(lse)
                        tol = 8 * UNIT[dt] * exact
                        if np.all(np.abs(o - pred) <= tol):
                            verdict = "matches prediction" + (" (nothing dropped)" if abs(pred - exact) <= tol else
                                                              " (small keys dropped)" if pred < tol else
                                                              f" (out / exact {pred / exact:.3g})")
                        elif np.all(np.abs(o - exact) <= tol):
                            verdict = "does not: out = exact (small keys kept)"
                        else:
                            verdict = f"does not: out / exact {o.min() / exact:.4g}..{o.max() / exact:.4g}"
                        dl = ls - lse_exact
                        held = (np.exp(ls - gs) - T) / S
                        print(f"  {layout:10s} {label:14s} {dt:8s} {mode:7s} {where:4s} exact {exact:.6g}, predicted "
                              f"{pred:.6g}, out {o.min():.6g}..{o.max():.6g} (rel err {(o.min() - exact) / exact:+.3g}"
                              f"..{(o.max() - exact) / exact:+.3g}), lse - exact {dl.min():+.2g}..{dl.max():+.2g} "
                              f"(l holds {held.min():.3g}..{held.max():.3g} of S) -> {verdict}")


def fp16_output_overflow():
    N, D, dt = 8192, 64, "float16"
    top = top_keys(N)
    small = np.setdiff1d(np.arange(N), top)
    p_up = 0.5 + 1.05 * 2.0 ** -12  # fp16 rounds it to 0.5 + 2^-11: up by 0.95 2^-11 relative
    scale = -np.log(p_up)
    scale32 = float(np.float32(scale))  # as the C library holds it
    alt = np.where(np.arange(N) % 2 == 0, 65504.0, 65472.0)
    print(f"(d) fp16, {N} keys, num_splits 1; 'P up': the {len(top)} top keys at score 0 (P = 1), the rest at score "
          f"-{scale:.6f} (P = 0.5 + 1.05 2^-12, fp16 0.5 + 2^-11); predicted on CUDA: sum(fp16(P) v) / sum(P), "
          f"rounded to fp16 (inf from 65520)")
    cases = (("tied scores, v = 65504", False, np.full(N, 65504.0)),
             ("tied scores, v = 65504 / 65472 alternating", False, alt),
             ("P up, v = 65504", True, np.full(N, 65504.0)),
             ("P up, v = 65504 x 3, 65472 x 1 (top keys 65504)", True, np.where(np.isin(np.arange(N), top) |
                                                                                   (np.arange(N) % 4 != 0), 65504.0,
                                                                                   65472.0)),
             # exact 65488.02: the edge, since a P rounded up by < 2^-11 gives out < 65488 (1 + 2^-11) = 65519.98
             ("P up, v = 65504 / 65472 alternating (top keys 65504)", True, np.where(np.isin(np.arange(N), top),
                                                                                       65504.0, alt)),
             ("P up, v = 65472", True, np.full(N, 65472.0)))
    for label, p_up_case, vals in cases:
        for mode, nq in (("decode", 1), ("prefill", 64)):
            for where in BACKENDS:
                q = np.zeros((1, nq, 1, D))
                k = np.zeros((1, N, 1, D))
                v = np.repeat(vals[None, :, None, None], D, axis=3)
                q[..., 0] = 1.0
                if p_up_case:
                    k[0, small, 0, 0] = -1.0
                s = k[0, :, 0, 0] * scale32  # scores of every row (q = e_0)
                p = np.exp(s - s.max())
                exact = (p * vals).sum() / p.sum()
                pred = (rounded(p, dt) * vals).sum() / p.sum() if where == "cuda" else exact
                pred16 = rounded(pred, dt).item()
                out = kvattn.flash_attn_with_kvcache(put(q, dt, where), put(k, dt, where), put(v, dt, where),
                                                     cache_seqlens=N, softmax_scale=scale, num_splits=1)
                o = get(out)
                fin = np.isfinite(o)
                vals_out = ", ".join(f"{x:g}" for x in np.unique(o)[:4])
                # a finite prediction is met by any finite out within half an fp16 ulp (16) of it: the kernels' fp32
                # sums are not this script's, and 65488 is a tie between 65472 and 65504
                if np.isinf(pred16):
                    ok = not fin.any()
                else:
                    ok = fin.all() and np.abs(o - pred).max() <= 16.0 * (1 + 1e-6)
                print(f"  {label:52s} {mode:7s} {where:4s} exact {exact:.8g} (fp16 {rounded(exact, dt).item():g}), "
                      f"predicted {pred:.8g} -> {pred16:g}; out {vals_out} ({(~fin).sum()} of {o.size} non-finite, "
                      f"max |out - exact| {np.abs(o[fin] - exact).max() if fin.any() else float('nan'):g}) -> "
                      f"{'matches prediction' if ok else 'does not'}")


def reference_rows(q, k, v, first_key, scale):
    """float64 attention of query rows q [R, D] where row i sees keys [0, first_key + i] of k, v [N, D] (causal,
    bottom-right aligned); only the visible keys enter (a NaN in a masked key's v reaches nothing)"""
    out = np.empty_like(q)
    for i in range(q.shape[0]):
        n = first_key + i + 1
        with np.errstate(invalid="ignore"):  # NaN / inf - inf: the row is non-finite, as it should be
            s = (k[:n] @ q[i]) * scale
            e = np.exp(s - s.max())
            out[i] = (e @ v[:n]) / e.sum()
    return out


def masked_nonfinite_key():
    D = 64
    scale = D ** -0.5
    rng = np.random.default_rng(0)
    print("(e) causal prefill, one key j with NaN / +inf in v (all channels) or k (NaN: all channels; +inf: channel 0, "
          "q's channel 0 > 0, so the score is +inf): exact rows < j = the reference over keys <= their position "
          "(finite), rows >= j non-finite; predicted: CUDA rows < j that share a work item with j non-finite (0 x NaN "
          "in the mma), CPU rows < j finite")
    # (api, queries, cached keys, j): varlen: q and k 128 rows, query i sees keys <= i; kvcache: 64 cached keys, 64
    # new keys and queries, query i at position 64 + i; j is the key index (a new token for kvcache)
    setups = (("varlen", 128, 0, 40), ("varlen", 128, 0, 100), ("kvcache", 64, 64, 64 + 20))
    for api, nq, S, j in setups:
        N = S + nq
        q0 = rng.standard_normal((nq, D))
        q0[:, 0] = np.abs(q0[:, 0]) + 0.5
        k0, v0 = rng.standard_normal((N, D)), rng.standard_normal((N, D))
        jr = j - S  # the row of j's query (rows < jr do not see key j)
        for what in ("v NaN", "v +inf", "k NaN", "k +inf"):
            k1, v1 = k0.copy(), v0.copy()
            if what == "v NaN":
                v1[j] = np.nan
            elif what == "v +inf":
                v1[j] = np.inf
            elif what == "k NaN":
                k1[j] = np.nan
            else:
                k1[j, 0] = np.inf
            for where in BACKENDS:
                cells = []
                for dt in ("float16", "bfloat16"):
                    qd, kd, vd = put(q0, dt, where), put(k1, dt, where), put(v1, dt, where)
                    ref = reference_rows(get(qd), get(kd), get(vd), S, scale)  # the inputs as stored
                    if api == "varlen":
                        cu = put(np.array([0, nq]), "int32", where)
                        out = kvattn.flash_attn_varlen_func(qd[:, None], kd[:, None], vd[:, None], cu, cu, nq, N,
                                                            softmax_scale=scale, causal=True, num_splits=1)
                        o = get(out)[:, 0]
                    else:
                        kc = put(np.zeros((1, 2 * N, 1, D)), dt, where)
                        vc = put(np.zeros((1, 2 * N, 1, D)), dt, where)
                        kc[0, :S, 0], vc[0, :S, 0] = kd[:S], vd[:S]
                        out = kvattn.flash_attn_with_kvcache(qd[None, :, None], kc, vc, k=kd[None, S:, None],
                                                             v=vd[None, S:, None], cache_seqlens=S,
                                                             softmax_scale=scale, causal=True, num_splits=1)
                        o = get(out)[0, :, 0]
                    bad = ~np.isfinite(o).all(axis=1)
                    lo_bad = np.flatnonzero(bad[:jr])
                    lo_ok = ~bad[:jr]
                    err = np.abs(o[:jr][lo_ok] - ref[:jr][lo_ok]).max() if lo_ok.any() else float("nan")
                    ref_bad = (~np.isfinite(ref[jr:]).all(axis=1)).sum()
                    if where == "cuda":
                        verdict = "matches prediction" if lo_bad.size else f"does not (rows < {jr} finite)"
                    else:
                        verdict = "matches prediction" if not lo_bad.size else "does not"
                    cells.append(f"{dt}: rows < {jr} non-finite {lo_bad.size} of {jr} ({ranges(lo_bad)}), max err of"
                                 f" the finite ones {err:.2g}; rows >= {jr} non-finite {bad[jr:].sum()} of {nq - jr} "
                                 f"(exact {ref_bad}) -> {verdict}")
                print(f"  {api:7s} key j={j:<3d} (row {jr:3d}) {what:6s} {where:4s} " + "; ".join(cells))


if torch is not None:
    tied_split_merge()
    unmasked_prefill_huge_scores()
else:
    print("(a), (b): skipped (no torch)")
small_p_dropped()
fp16_output_overflow()
masked_nonfinite_key()
