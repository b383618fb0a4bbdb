# harness.py — builds one test case (ragged lengths, a contiguous or paged cache laid out with shuffled pages
# and non-trivial strides), runs one of kvattn's three functions on NumPy arrays or torch tensors, and checks
# out, lse and the whole cache against reference.py (written cache rows match, every other byte unchanged).
# Inputs are fresh on every run: each test draws from fresh_rng(tag), seeded by the session seed (KVATTN_TEST_SEED,
# else random; conftest.py prints it at the end of the run) and the test's own tag.
import dataclasses
import math
import os
import secrets

import numpy as np

import reference

try:
    import ml_dtypes

    HAVE_BF16_NUMPY = True
except ImportError:  # pragma: no cover
    ml_dtypes = None
    HAVE_BF16_NUMPY = False


# ---- array backends: NumPy, torch on the CPU, torch on CUDA ------------------------------------------------
class NumpyBackend:
    name = "numpy"

    @staticmethod
    def np_dtype(dtype):
        return ml_dtypes.bfloat16 if dtype == "bfloat16" else np.dtype(dtype)

    def array(self, x, dtype):
        return np.asarray(x, np.float64).astype(self.np_dtype(dtype))

    def index(self, x):
        return np.asarray(x, dtype=np.int32)

    def to64(self, a):
        return np.asarray(a).astype(np.float64)

    def snapshot(self, a):
        return np.asarray(a).tobytes() if a is not None else None

    def empty_like_buffer(self, shape, dtype):
        return np.zeros(shape, dtype=self.np_dtype(dtype))


class TorchBackend:
    def __init__(self, device):
        import torch

        self.torch = torch
        self.device = device
        self.name = f"torch-{device}"

    def array(self, x, dtype):
        t = self.torch.from_numpy(np.ascontiguousarray(np.asarray(x, np.float64)))
        return t.to(getattr(self.torch, dtype)).to(self.device)

    def index(self, x):
        return self.torch.from_numpy(np.asarray(x, dtype=np.int32)).to(self.device)

    def to64(self, a):
        return a.detach().to("cpu").to(self.torch.float64).numpy()

    def snapshot(self, a):
        if a is None:
            return None
        base = a.detach().to("cpu").contiguous()
        return base.view(self.torch.uint8).numpy().tobytes() if base.numel() else b""

    def empty_like_buffer(self, shape, dtype):
        return self.torch.zeros(shape, dtype=getattr(self.torch, dtype), device=self.device)


def rounded(backend, x, dtype):
    return backend.to64(backend.array(x, dtype))


def _session_seed():
    env = os.environ.get("KVATTN_TEST_SEED", "").strip()
    return int(env, 0) if env else secrets.randbelow(10 ** 12)


SEED = _session_seed()


def fresh_rng(tag):
    """The generator of one test (tag: a non-negative int unique among the tests that share inputs' shapes)."""
    return np.random.default_rng([SEED, tag])


# The largest error seen, as a fraction of its bound, over the session's checks (conftest.py prints it).
WORST = {"out": 0.0, "lse": 0.0}

# KVATTN_TEST_MUTANT=1 makes expected() drop each sequence's first attended key (as a stale length or a wrong
# page would): a check that still passes then cannot see a one-key error. For checking the checks only.
MUTANT = os.environ.get("KVATTN_TEST_MUTANT", "") not in ("", "0")

UNIT_ROUNDOFF = {"float16": 2.0 ** -11, "bfloat16": 2.0 ** -8}  # float32: no rounded query term

TOL = {  # (atol, rtol) for out; lse atol and rtol; cache rtol (one rounding of the rotated key)
    # lse is computed in float32 from the (already rounded) inputs, and the sum of probabilities is taken
    # before they are rounded: only float32 arithmetic (at 16 bits on CUDA, the tensor cores' fp32 accumulation)
    # and the rounded rotated query (dq, below) move it, so its bound does not grow with the element type's unit
    # roundoff; 2e-3 as in tests/common/harness.c (until the fifty-first session 2e-2 + 2e-2 |lse| for
    # bfloat16, which let an lse off by 0.15 pass)
    "float32": (2e-5, 2e-5, 2e-5, 1e-5),
    "float16": (2e-3, 2e-3, 2e-3, 2e-3),
    "bfloat16": (1.6e-2, 1.6e-2, 2e-3, 1.6e-2),
}


@dataclasses.dataclass
class Case:
    fn: str = "varlen_kv"          # "varlen_kv" | "kv" (fixed [B, Sq]) | "varlen" (no cache update)
    n_q: tuple = (1, 3)
    n_new: tuple = (1, 3)
    S: tuple = (5, 17)             # tokens in the cache before the call (for "varlen": the key counts)
    L: tuple = None                # leftpad per sequence
    H: int = 4
    Hk: int = 2
    D: int = 32
    dtype: str = "float16"
    layout: str = "paged"          # "paged" | "contig"
    page_size: int = 3
    batch_idx: bool = False        # contiguous: sequences use shuffled cache rows
    view: str = "plain"            # "plain" | "padded" (caches/q are views into bigger buffers) | "hnd"
    causal: bool = False
    window: tuple = (-1, -1)
    softcap: float = 0.0
    alibi: str = None              # None | "H" | "BH"
    rotary: tuple = None           # (R, interleaved, cos dtype "float32" | "same")
    lse: bool = True
    scale: float = None
    num_splits: int = 0
    seed: int = 0

    @property
    def B(self):
        return len(self.n_q)


def build(case, be):
    """Returns a dict with the arrays for the call (backend arrays) and the logical float64 data."""
    rng = fresh_rng(case.seed)
    B, H, Hk, D, dt = case.B, case.H, case.Hk, case.D, case.dtype
    n_q, n_new, S = list(case.n_q), list(case.n_new), list(case.S)
    if case.fn == "varlen":
        n_new = [0] * B
    L = list(case.L) if case.L is not None else [0] * B
    need = [S[b] + n_new[b] for b in range(B)]
    d = {"case": case, "n_q": n_q, "n_new": n_new, "S": S, "L": L}
    pad = 8 if case.view == "padded" else 0

    def rows(n, heads):  # [n, heads, D], as a view into a wider buffer when padded
        x = rounded(be, rng.standard_normal((n, heads, D)), dt)
        if not pad:
            return x, be.array(x, dt)
        buf = be.empty_like_buffer((n, heads + 1, D + pad), dt)
        view = buf[:, 1:, :D]
        view[...] = be.array(x, dt)
        return x, view

    # queries and new tokens
    if case.fn == "kv":
        assert len(set(n_q)) == 1 and len(set(n_new)) == 1
        qx, qa = rows(B * n_q[0], H)
        d["q"] = qa.reshape(B, n_q[0], H, D)
        d["q64"] = [qx[b * n_q[0]:(b + 1) * n_q[0]] for b in range(B)]
        if n_new[0]:
            kx, ka = rows(B * n_new[0], Hk)
            vx, va = rows(B * n_new[0], Hk)
            d["k"] = ka.reshape(B, n_new[0], Hk, D)
            d["v"] = va.reshape(B, n_new[0], Hk, D)
            d["k64"] = [kx[b * n_new[0]:(b + 1) * n_new[0]] for b in range(B)]
            d["v64"] = [vx[b * n_new[0]:(b + 1) * n_new[0]] for b in range(B)]
    else:
        cu_q = np.concatenate([[0], np.cumsum(n_q)]).astype(np.int32)
        qx, d["q"] = rows(int(cu_q[-1]), H)
        d["q64"] = [qx[cu_q[b]:cu_q[b + 1]] for b in range(B)]
        d["cu_q"] = cu_q
        if case.fn == "varlen_kv":
            cu_k = np.concatenate([[0], np.cumsum(n_new)]).astype(np.int32)
            kx, d["k"] = rows(int(cu_k[-1]), Hk)
            vx, d["v"] = rows(int(cu_k[-1]), Hk)
            d["k64"] = [kx[cu_k[b]:cu_k[b + 1]] for b in range(B)]
            d["v64"] = [vx[cu_k[b]:cu_k[b + 1]] for b in range(B)]
            d["cu_k"] = cu_k

    # the cache: addr(b, pos) -> index tuple into the [X, Y, Hk, D] cache
    if case.fn == "varlen" and case.layout != "paged":
        cu_k = np.concatenate([[0], np.cumsum(S)]).astype(np.int32)
        total = int(cu_k[-1])
        kx, ka = rows(total, Hk)
        vx, va = rows(total, Hk)
        d.update(cu_k=cu_k, k_cache=ka, v_cache=va, k_cache64=kx[None], v_cache64=vx[None])
        d["addr"] = [[(0, int(cu_k[b]) + p) for p in range(S[b])] for b in range(B)]
        d["packed_offsets"] = cu_k
    elif case.layout == "paged":
        ps = case.page_size
        pages = [math.ceil(need[b] / ps) for b in range(B)]
        num_pages = sum(pages) + 3
        perm = rng.permutation(num_pages)
        width = max(pages + [0]) + 1
        bt = np.full((B, width), -1, dtype=np.int32)
        at = 0
        for b in range(B):
            bt[b, :pages[b]] = perm[at:at + pages[b]]
            at += pages[b]
        d["block_table"] = bt
        d["addr"] = [[(int(bt[b, p // ps]), p % ps) for p in range(need[b])] for b in range(B)]
        shape = (num_pages, ps, Hk, D)
    else:
        C = max(need + [1]) + 2
        rows_n = B + 1
        row_of = rng.permutation(rows_n)[:B] if case.batch_idx else np.arange(B)
        if case.batch_idx:
            d["cache_batch_idx"] = row_of.astype(np.int32)
        d["addr"] = [[(int(row_of[b]), p) for p in range(need[b])] for b in range(B)]
        shape = (rows_n, C, Hk, D)
    if "k_cache" not in d:
        for name in ("k_cache", "v_cache"):
            x = rounded(be, rng.standard_normal(shape), dt)
            d[name + "64"] = x
            d[name] = _cache_view(be, x, dt, case.view)
    if case.fn == "varlen" and case.layout == "paged":
        d["cu_k"] = np.concatenate([[0], np.cumsum(S)]).astype(np.int32)

    # rotary and ALiBi
    if case.rotary is not None:
        R, inter, cdt = case.rotary
        max_pos = max(need) + 4
        ang = np.arange(max_pos)[:, None] * (10000.0 ** (-np.arange(R // 2) / (R // 2)))[None, :]
        cdt = "float32" if cdt == "float32" else dt
        d["cos64"], d["sin64"] = rounded(be, np.cos(ang), cdt), rounded(be, np.sin(ang), cdt)
        d["cos"], d["sin"] = be.array(d["cos64"], cdt), be.array(d["sin64"], cdt)
    if case.alibi:
        sl = rng.uniform(0.01, 0.5, size=(B, H) if case.alibi == "BH" else (H,))
        d["alibi64"] = sl.astype(np.float32).astype(np.float64)
        d["alibi"] = be.array(sl, "float32")
    return d


def _cache_view(be, x, dt, view):
    """The cache as plain [X, Y, Hk, D], as a view into a padded buffer, or HND storage transposed to NHD."""
    if view == "padded":
        X, Y, Hk, D = x.shape
        buf = be.empty_like_buffer((X, Y + 1, Hk, D + 8), dt)
        v = buf[:, :Y, :, :D]
        v[...] = be.array(x, dt)
        return v
    if view == "hnd":
        a = be.array(np.ascontiguousarray(x.transpose(0, 2, 1, 3)), dt)  # storage [X, Hk, Y, D]
        return a.transpose(0, 2, 1, 3) if isinstance(a, np.ndarray) else a.permute(0, 2, 1, 3)
    return be.array(x, dt)


def call(kvattn, d, be, out=None):
    """Runs the case's function; returns (out, lse or None)."""
    c = d["case"]
    common = dict(softmax_scale=c.scale, causal=c.causal, window_size=c.window, softcap=c.softcap,
                  alibi_slopes=d.get("alibi"))
    ix = be.index
    if c.fn == "varlen":
        res = kvattn.flash_attn_varlen_func(
            d["q"], d["k_cache"], d["v_cache"], ix(d["cu_q"]), ix(d["cu_k"]), max(d["n_q"] + [0]),
            max(d["S"] + [0]), block_table=ix(d["block_table"]) if "block_table" in d else None,
            return_softmax_lse=c.lse, num_splits=c.num_splits, out=out, **common)
        return res if c.lse else (res, None)
    kw = dict(k=d.get("k"), v=d.get("v"), rotary_cos=d.get("cos"), rotary_sin=d.get("sin"),
              cache_seqlens=ix(d["S"]),
              cache_batch_idx=ix(d["cache_batch_idx"]) if "cache_batch_idx" in d else None,
              cache_leftpad=ix(d["L"]) if c.L is not None else None,
              block_table=ix(d["block_table"]) if "block_table" in d else None,
              rotary_interleaved=c.rotary[1] if c.rotary else True, num_splits=c.num_splits,
              return_softmax_lse=c.lse, out=out, **common)
    if c.fn == "kv":
        res = kvattn.flash_attn_with_kvcache(d["q"], d["k_cache"], d["v_cache"], **kw)
    else:
        res = kvattn.flash_attn_varlen_func_with_kvcache(d["q"], d["k_cache"], d["v_cache"], ix(d["cu_q"]),
                                                         max(d["n_q"] + [0]), cu_seqlens_k=ix(d["cu_k"]), **kw)
    return res if c.lse else (res, None)


def expected(d, be):
    """Reference outputs per sequence and the expected whole caches (float64) with the written mask."""
    c = d["case"]
    B = c.B
    kc, vc = d["k_cache64"].copy(), d["v_cache64"].copy()
    written = np.zeros(kc.shape[:2], dtype=bool)
    store = lambda x: rounded(be, x, c.dtype)  # noqa: E731
    outs, lses, sens = [], [], []
    for b in range(B):
        S, n_new, L = d["S"][b], d["n_new"][b], d["L"][b]
        addr = d["addr"][b]
        logical_k = np.stack([kc[a] for a in addr]) if addr else np.zeros((0, c.Hk, c.D))
        logical_v = np.stack([vc[a] for a in addr]) if addr else np.zeros((0, c.Hk, c.D))
        slopes = None
        if c.alibi:
            slopes = d["alibi64"] if c.alibi == "H" else d["alibi64"][b]
        o, l, ak, av, qs, vm = reference.sequence(
            d["q64"][b], logical_k, logical_v, S, L, d["k64"][b] if "k64" in d else None,
            d["v64"][b] if "v64" in d else None, scale=c.scale, causal=c.causal, window=c.window,
            softcap=c.softcap, slopes=slopes, cos=d.get("cos64"), sin=d.get("sin64"),
            interleaved=c.rotary[1] if c.rotary else True, store=store, sens=True)
        if MUTANT and S + n_new > L:  # the check's own mutant: the first attended key left out
            o, l = reference.sequence(
                d["q64"][b], logical_k, logical_v, S, L + 1,
                d["k64"][b] if "k64" in d else None, d["v64"][b] if "v64" in d else None, scale=c.scale,
                causal=c.causal, window=c.window, softcap=c.softcap, slopes=slopes, cos=d.get("cos64"),
                sin=d.get("sin64"), interleaved=c.rotary[1] if c.rotary else True, store=store)[:2]
        outs.append(o)
        lses.append(l)
        sens.append((qs, vm))
        for t in range(n_new):
            a = addr[S + t]
            kc[a], vc[a] = ak[t], av[t]
            written[a] = True
    return outs, lses, kc, vc, written, sens


def assert_close(got, want, atol, rtol, what):
    """|got - want| <= atol + rtol |want| elementwise (atol may be an array that broadcasts), NaN never close;
    records the worst error as a fraction of its bound in WORST[kind] (kind: the first word of what)."""
    got, want = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert got.shape == want.shape, f"{what}: shape {got.shape}, want {want.shape}"
    if not got.size:
        return
    bound = np.broadcast_to(atol + rtol * np.abs(want), got.shape)
    err = np.abs(got - want)
    ratio = np.where(np.isnan(err), np.inf, err / bound)
    worst = float(ratio.max())
    kind = what.split()[0]
    WORST[kind] = max(WORST.get(kind, 0.0), worst)
    if not worst <= 1.0:
        i = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
        bad = int(np.count_nonzero(~(ratio <= 1.0)))
        raise AssertionError(f"{what}: {bad} of {got.size} elements outside the bound; worst at {tuple(map(int, i))}: "
                             f"got {got[i]!r}, want {want[i]!r}, err {err[i]:.4g} > bound {bound[i]:.4g} "
                             f"(seed {SEED})")


def check(kvattn, case, be):
    import pytest

    d = build(case, be)
    # every other case writes into a caller's out filled with NaN (the rest into one the library allocates): each
    # element must then be written, or it stays NaN, which is never close
    poisoned = None
    if case.seed % 2:
        poisoned = be.array(np.full(tuple(d["q"].shape), np.nan), case.dtype)
    try:
        out, lse = call(kvattn, d, be, out=poisoned)
    except kvattn.KvattnError as e:
        if e.status_name == "KVATTN_ERR_UNSUPPORTED" and be.name == "torch-cuda":
            pytest.skip(f"not supported by the CUDA backend: {e.message}")
        raise
    outs, lses, kc, vc, written, sens = expected(d, be)
    c = case
    atol, rtol, lse_atol, cache_rtol = TOL[c.dtype]
    if be.name == "torch-cuda":  # the tensor-core kernels round probabilities to the element type
        atol, rtol = 2 * atol, 2 * rtol
    # A backend may round the rotated query to the element type (the CUDA kernels do, for the tensor cores;
    # DECISIONS.md "Numerics"): each score then moves by up to dq = (u/2) q_sens, the row's lse by dq and its
    # out by 2 dq max|v| -- the C harness's term (tests/common/harness.c, "tolerances"). Zero without rotary.
    half_u = 0.5 * UNIT_ROUNDOFF.get(c.dtype, 0.0)
    if poisoned is not None:
        assert out is poisoned, "out= was not the array returned"
    got = be.to64(out)
    got_lse = be.to64(lse) if lse is not None else None
    for b in range(c.B):
        if c.fn == "kv":
            o = got[b]
            l = got_lse[b] if got_lse is not None else None
        else:
            lo, hi = int(d["cu_q"][b]), int(d["cu_q"][b + 1])
            o = got[lo:hi]
            l = got_lse[:, lo:hi] if got_lse is not None else None
        dq = half_u * sens[b][0]  # [n_q, H]
        assert_close(o, outs[b], atol + (2 * dq * sens[b][1])[:, :, None], rtol,
                     f"out of sequence {b} ({case})")
        if l is not None:
            assert np.array_equal(np.isneginf(l), np.isneginf(lses[b])), f"lse -inf rows of sequence {b} ({case})"
            fin = np.isfinite(lses[b])
            assert_close(l[fin], lses[b][fin], lse_atol + dq.T[fin], lse_atol, f"lse of sequence {b} ({case})")
    for name, exp in (("k_cache", kc), ("v_cache", vc)):
        now = be.to64(d[name])
        if c.fn == "varlen" and c.layout != "paged":
            now = now[None]
        assert np.array_equal(now[~written], exp[~written]), f"{name}: rows that must not change changed ({case})"
        np.testing.assert_allclose(now[written], exp[written], atol=cache_rtol, rtol=cache_rtol,
                                   err_msg=f"{name}: appended rows ({case})")
    return d
