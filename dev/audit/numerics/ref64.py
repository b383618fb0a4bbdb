"""Independent float64 reference of docs/SPEC.md (fixed-length batch, contiguous cache, no rotary / append).
Also a thin runner over the kvattn Python binding (CPU backend, NumPy arrays)."""
import math, os, sys
import numpy as np
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "python"))
os.environ.setdefault("KVATTN_LIBRARY", os.path.join(os.path.dirname(__file__), "..", "build", "libkvattn.so"))
import kvattn
import ml_dtypes
BF16 = np.dtype(ml_dtypes.bfloat16)
DT = {"f16": np.float16, "bf16": BF16, "f32": np.float32}


def ref(q, kc, vc, seqlens, scale=None, causal=False, window=(-1, -1), softcap=0.0, alibi=None, leftpad=None):
    """q [B,Sq,H,D], kc/vc [B,C,Hk,D] (any float dtype: converted exactly to float64). Returns out, lse in float64."""
    q = np.asarray(q).astype(np.float64); kc = np.asarray(kc).astype(np.float64); vc = np.asarray(vc).astype(np.float64)
    B, Sq, H, D = q.shape
    Hk = kc.shape[2]; G = H // Hk
    if scale is None:
        scale = 1.0 / math.sqrt(D)
    scale = float(np.float32(scale))      # the C field is float32
    softcap = float(np.float32(softcap))
    out = np.zeros((B, Sq, H, D)); lse = np.full((B, H, Sq), -np.inf)
    for b in range(B):
        L = 0 if leftpad is None else int(leftpad[b])
        S = int(seqlens[b]); s_k = S - L; n_q = Sq
        for i in range(n_q):
            qk = i + s_k - n_q
            for h in range(H):
                kvh = h // G
                js = []
                for j in range(s_k):
                    if causal and j > qk: continue
                    wl, wr = window
                    if causal: wr = 0
                    if wl >= 0 and j < qk - wl: continue
                    if wr >= 0 and j > qk + wr: continue
                    js.append(j)
                if not js:
                    continue
                K = kc[b, L + np.array(js), kvh]; V = vc[b, L + np.array(js), kvh]
                with np.errstate(over="ignore", invalid="ignore"):
                    s = scale * (K @ q[b, i, h])
                    if softcap > 0:
                        s = softcap * np.tanh(s / softcap)
                    if alibi is not None:
                        sl = float(np.float32(alibi[h] if np.ndim(alibi) == 1 else alibi[b, h]))
                        s = s - sl * np.abs(qk - np.array(js, dtype=np.float64))
                m = s.max()
                w = np.exp(s - m)
                l = w.sum()
                out[b, i, h] = (w @ V) / l
                lse[b, h, i] = m + math.log(l)
    return out, lse


def run(q, kc, vc, seqlens, dtype="f16", **kw):
    """kvattn CPU backend; arrays are converted to dtype. Returns (out as float64, lse)."""
    t = DT[dtype]
    q_ = np.ascontiguousarray(np.asarray(q, dtype=np.float64).astype(t))
    k_ = np.ascontiguousarray(np.asarray(kc, dtype=np.float64).astype(t))
    v_ = np.ascontiguousarray(np.asarray(vc, dtype=np.float64).astype(t))
    sl = np.asarray(seqlens, dtype=np.int32)
    opts = dict(kw)
    if "alibi" in opts:
        a = opts.pop("alibi")
        if a is not None:
            opts["alibi_slopes"] = np.ascontiguousarray(np.asarray(a, dtype=np.float32))
    if "window" in opts:
        opts["window_size"] = opts.pop("window")
    if "scale" in opts:
        opts["softmax_scale"] = opts.pop("scale")
    if "leftpad" in opts:
        lp = opts.pop("leftpad")
        if lp is not None:
            opts["cache_leftpad"] = np.asarray(lp, dtype=np.int32)
    out, lse = kvattn.flash_attn_with_kvcache(q_, k_, v_, cache_seqlens=sl, return_softmax_lse=True, **opts)
    return np.asarray(out).astype(np.float64), np.asarray(lse).astype(np.float64), (q_, k_, v_)


def compare(name, q, kc, vc, seqlens, dtype="f16", show=True, **kw):
    """runs the library, then the reference on the *rounded* inputs; prints a one-line verdict."""
    out, lse, (q_, k_, v_) = run(q, kc, vc, seqlens, dtype=dtype, **kw)
    rkw = {k: v for k, v in kw.items() if k != "num_splits"}
    ro, rl = ref(q_, k_, v_, seqlens, **rkw)
    # exact out, as the dtype would round it (what a perfect library would write)
    ro_t = ro.astype(DT[dtype]).astype(np.float64)
    with np.errstate(invalid="ignore", over="ignore"):
        bad_nan = np.isnan(out).sum(); bad_inf = np.isinf(out).sum()
        ref_nonfinite = (~np.isfinite(ro_t)).sum()
        fin = np.isfinite(ro_t) & np.isfinite(out)
        err = np.abs(out - ro_t)[fin].max() if fin.any() else 0.0
        scalev = max(1.0, np.abs(ro[np.isfinite(ro)]).max() if np.isfinite(ro).any() else 1.0)
        lerr = np.nanmax(np.where(np.isfinite(rl) & np.isfinite(lse), np.abs(lse - rl), 0.0))
        lmis = ((np.isfinite(rl) != np.isfinite(lse)) | (np.isnan(lse))).sum()
    verdict = "OK"
    if bad_nan or (bad_inf > ref_nonfinite) or lmis or err > 1e-2 * scalev:
        verdict = "BAD"
    if show:
        print(f"[{verdict}] {name:58s} dtype={dtype:4s} out: nan={bad_nan} inf={bad_inf} (ref nonfinite after "
              f"rounding={ref_nonfinite}) maxerr={err:.3g} (|ref|max {scalev:.3g}); lse: maxerr={lerr:.3g} "
              f"nonfinite-mismatch={lmis}")
    return out, lse, ro, rl, verdict
