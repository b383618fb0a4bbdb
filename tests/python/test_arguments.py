# test_arguments.py — how the binding takes its arguments, checked where the other tests do not reach: arguments
# refused in Python (each names the argument and leaves the caches and out byte-identical), strided views that must
# give the same results as contiguous copies, boundary values that must be taken, flash-attention's defaults and
# positional order, PagedKVCache's all-or-nothing steps and lifetime, the pure-Python helpers (status_name,
# DeviceStatus, the params mirror's int fields) and how the library is found and checked at import.
import inspect
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

import harness
from conftest import torch_or_skip
from harness import Case, build
from test_errors import astype, base_args, noncontig_last
from test_paged import make_cache

INT32_MAX = (1 << 31) - 1
FUNCS = {"varlen_kv": "flash_attn_varlen_func_with_kvcache", "kv": "flash_attn_with_kvcache",
         "varlen": "flash_attn_varlen_func"}


# ---- array helpers (NumPy or torch, the values unchanged) --------------------------------------------------------
def is_np(a):
    return isinstance(a, np.ndarray)


def fresh(a):
    """A copy with its own storage (the same strides where torch keeps them)."""
    return np.array(a, copy=True) if is_np(a) else a.clone()


def more_rows(a, n=1):
    """a with n more entries along dimension 0 (copies of its first ones)."""
    if is_np(a):
        return np.concatenate([a, a[:n]])
    import torch

    return torch.cat([a, a[:n]])


def padded(a, pad=5):
    """The same values in a view with other strides: each dimension one longer, the last `pad` longer; the padding
    is NaN, so a stride taken from another array reads it (or other elements) and shows."""
    shape = tuple(s + 1 for s in a.shape[:-1]) + (a.shape[-1] + pad,)
    inner = tuple(slice(0, s) for s in a.shape)
    if is_np(a):
        buf = np.full(shape, np.nan, a.dtype)
        buf[inner] = a
        return buf[inner]
    import torch

    buf = torch.full(shape, float("nan"), dtype=a.dtype, device=a.device)
    buf[inner] = a
    return buf[inner]


def every_third(a):
    """The same values with a last-dimension stride of 3 (NaN between them)."""
    if is_np(a):
        buf = np.full(a.shape[:-1] + (3 * a.shape[-1],), np.nan, a.dtype)
    else:
        import torch

        buf = torch.full(a.shape[:-1] + (3 * a.shape[-1],), float("nan"), dtype=a.dtype, device=a.device)
    buf[..., ::3] = a
    return buf[..., ::3]


def one_row_column_major(a):
    """A [1, n] table as a column-major one is stored: strides (1, 1) (elements), which a row stride taken at face
    value gets wrong."""
    assert a.shape[0] == 1
    if is_np(a):
        return np.lib.stride_tricks.as_strided(np.array(a[0]), a.shape, (a.itemsize, a.itemsize))
    return a[0].clone().as_strided(tuple(a.shape), (1, 1))


def read_only(a):
    a = np.array(a, copy=True)
    a.flags.writeable = False
    return a


def misaligned(a):
    """A NumPy copy of a whose data starts one byte past an aligned address."""
    buf = np.zeros(a.nbytes + a.itemsize, np.uint8)
    m = np.frombuffer(buf, a.dtype, count=a.size, offset=1).reshape(a.shape)
    m[...] = a
    return m


def numpy_only(be):
    if be.name != "numpy":
        pytest.skip("a read-only array is NumPy's (torch's stride-0 views are tested in test_errors.py)")


def torch_only(be):
    if be.name == "numpy":
        pytest.skip("needs torch tensors")


def cpu_only(be):
    if be.name == "torch-cuda":
        pytest.skip("on CUDA, data-dependent failures go to the device status")


def to_meta(a):
    return a.to("meta") if a is not None and not is_np(a) and not isinstance(a, (int, bool, float, tuple)) else a


def snap(be, args, keys):
    """The bytes of the arrays the call may write (None for arrays that hold no data, e.g. on torch's meta device)."""
    return {k: None if args.get(k) is None or getattr(args[k], "is_meta", False) else be.snapshot(args[k])
            for k in keys}


# ---- the bases: one valid call of each function ------------------------------------------------------------------
def fixed_args(be, layout="paged"):
    """A valid flash_attn_with_kvcache call: B=2, 2 queries and 2 new tokens each, rotary, causal."""
    case = Case(fn="kv", n_q=(2, 2), n_new=(2, 2), S=(5, 9), H=4, Hk=2, D=32, layout=layout, page_size=3,
                dtype="float16", causal=True, rotary=(16, True, "float32"))
    d = build(case, be)
    ix = be.index
    args = dict(q=d["q"], k_cache=d["k_cache"], v_cache=d["v_cache"], k=d["k"], v=d["v"], rotary_cos=d["cos"],
                rotary_sin=d["sin"], cache_seqlens=ix(d["S"]), causal=True,
                out=be.array(np.zeros((2, 2, 4, 32)), "float16"))
    if layout == "paged":
        args["block_table"] = ix(d["block_table"])
    return args, d


def packed_args(be):
    """A valid flash_attn_varlen_func call over packed keys: B=2 with 2 and 1 queries over 5 and 9 keys."""
    d = build(Case(fn="varlen", n_q=(2, 1), S=(5, 9), H=4, Hk=2, D=32, layout="contig", causal=True), be)
    ix = be.index
    args = dict(q=d["q"], k=d["k_cache"], v=d["v_cache"], cu_seqlens_q=ix(d["cu_q"]), cu_seqlens_k=ix(d["cu_k"]),
                max_seqlen_q=2, max_seqlen_k=9, causal=True, out=be.array(np.zeros((3, 4, 32)), "float16"))
    return args, d


BASES = {"varlen_kv": base_args, "kv": fixed_args, "varlen": lambda be, layout=None: packed_args(be)}
WRITTEN = {"varlen_kv": ("k_cache", "v_cache", "out"), "kv": ("k_cache", "v_cache", "out"),
           "varlen": ("k", "v", "out")}


def a_rotary_table(be, d, rows_more=0, dtype="float32"):
    """d's sine table (float32) with rows_more extra rows."""
    s = d["sin64"]
    return be.array(np.concatenate([s, s[:rows_more]]) if rows_more else s, dtype)


# (id, function, layout, mutation(args, be, d), exception, words the message must contain, status name)
# Every one is a check made in Python: the error names the public function, not a C one.
REFUSED = [
    # index vectors are read through a bare int32 pointer: a view with other strides would be read wrong
    ("seqlens-byte-stride", "varlen_kv", "paged",
     lambda a, be, d: (numpy_only(be), a.update(cache_seqlens=np.ndarray((2,), np.int32, np.zeros(16, np.uint8), 0,
                                                                         (6,)))),
     ValueError, ["cache_seqlens:", "byte strides (6,)", "element size 4"], None),
    ("seqlens-strided", "varlen_kv", "paged", lambda a, be, d: a.update(cache_seqlens=be.index([5, 0, 9, 0])[::2]),
     ValueError, ["cache_seqlens:", "contiguous", "stride 2"], None),
    ("seqlens-none-with-new", "varlen_kv", "paged", lambda a, be, d: a.update(cache_seqlens=None), ValueError,
     ["cache_seqlens:", "required", "k/v"], None),
    ("seqlens-bool", "varlen_kv", "paged", lambda a, be, d: a.update(cache_seqlens=True), TypeError,
     ["cache_seqlens:", "True"], None),
    ("batch-idx-with-paged", "varlen_kv", "paged", lambda a, be, d: a.update(cache_batch_idx=be.index([0, 1])),
     ValueError, ["cache_batch_idx:", "paged"], None),
    ("batch-idx-int64", "varlen_kv", "contig",
     lambda a, be, d: a.update(cache_batch_idx=astype(be, be.index([1, 0]), "int64")), TypeError,
     ["cache_batch_idx:", "int64", "int32"], None),
    ("batch-idx-length", "varlen_kv", "contig", lambda a, be, d: a.update(cache_batch_idx=be.index([1, 0, 2])),
     ValueError, ["cache_batch_idx:", "[2]"], None),
    ("too-few-cache-rows", "varlen_kv", "contig",
     lambda a, be, d: a.update(k_cache=a["k_cache"][:1], v_cache=a["v_cache"][:1]), ValueError,
     ["k_cache:", "has 1 cache rows", "B=2", "cache_batch_idx is not given"], None),
    ("v-rows", "varlen_kv", "paged", lambda a, be, d: a.update(v=more_rows(a["v"])), ValueError,
     ["v:", "differs from k's"], None),
    ("cu-k-without-k", "varlen_kv", "paged", lambda a, be, d: a.update(k=None, v=None), ValueError,
     ["cu_seqlens_k:", "without k/v"], None),
    ("cu-q-empty", "varlen_kv", "paged", lambda a, be, d: a.update(cu_seqlens_q=be.index(np.zeros(0))), ValueError,
     ["cu_seqlens_q:", "[B + 1]", "[0]"], None),
    ("leftpad-int64", "varlen_kv", "contig",
     lambda a, be, d: a.update(cache_leftpad=astype(be, be.index([0, 1]), "int64")), TypeError,
     ["cache_leftpad:", "int32"], None),
    ("block-table-noncontig", "varlen_kv", "paged",
     lambda a, be, d: a.update(block_table=noncontig_last(be, a["block_table"])), ValueError,
     ["block_table:", "last dimension", "contiguous"], None),
    ("rotary-noncontig", "varlen_kv", "paged",
     lambda a, be, d: a.update(rotary_cos=noncontig_last(be, a["rotary_cos"]),
                               rotary_sin=noncontig_last(be, a["rotary_sin"])), ValueError,
     ["rotary_cos:", "contiguous"], None),
    ("rotary-float64", "varlen_kv", "paged",
     lambda a, be, d: a.update(rotary_cos=astype(be, a["rotary_cos"], "float64"),
                               rotary_sin=astype(be, a["rotary_sin"], "float64")), TypeError,
     ["rotary_cos:", "float64", "float32 or q's dtype"], None),
    ("rotary-sin-rows", "varlen_kv", "paged", lambda a, be, d: a.update(rotary_sin=a_rotary_table(be, d, 2)),
     ValueError, ["rotary_sin:", "shape", "rotary_cos's"], None),
    ("rotary-sin-dtype", "varlen_kv", "paged",
     lambda a, be, d: a.update(rotary_cos=astype(be, a["rotary_cos"], "float16")), TypeError,
     ["rotary_sin:", "float32", "rotary_cos's float16"], None),
    ("rotary-sin-row-stride", "varlen_kv", "paged", lambda a, be, d: a.update(rotary_sin=padded(a["rotary_sin"])),
     ValueError, ["rotary_sin:", "row stride", "rotary_cos's"], None),
    ("alibi-noncontig", "varlen_kv", "paged",
     lambda a, be, d: a.update(alibi_slopes=noncontig_last(be, be.array(np.linspace(0.1, 0.4, 4), "float32"))),
     ValueError, ["alibi_slopes:", "contiguous"], None),
    ("out-dtype", "varlen_kv", "paged", lambda a, be, d: a.update(out=astype(be, a["out"], "float32")), TypeError,
     ["out:", "float32", "q's dtype float16"], None),
    ("out-noncontig", "varlen_kv", "paged", lambda a, be, d: a.update(out=noncontig_last(be, a["out"])),
     ValueError, ["out:", "contiguous"], None),
    ("out-read-only", "varlen_kv", "paged", lambda a, be, d: (numpy_only(be), a.update(out=read_only(a["out"]))),
     ValueError, ["out:", "read-only"], None),
    ("v-cache-read-only", "varlen_kv", "paged",
     lambda a, be, d: (numpy_only(be), a.update(v_cache=read_only(a["v_cache"]))), ValueError,
     ["v_cache:", "read-only"], None),
    # the C library reads elements through typed pointers: a misaligned array is refused in Python, naming it
    ("q-misaligned", "varlen_kv", "paged", lambda a, be, d: (numpy_only(be), a.update(q=misaligned(a["q"]))),
     ValueError, ["q:", "data address", "not a multiple of its element size 2"], None),
    # devices: torch's meta device stands for one that is neither the CPU nor CUDA
    ("k-cache-on-meta", "varlen_kv", "paged",
     lambda a, be, d: (torch_only(be), a.update(k_cache=a["k_cache"].to("meta"))), ValueError,
     ["k_cache:", "meta", "q is on", "one device"], None),
    ("all-on-meta", "varlen_kv", "paged",
     lambda a, be, d: (torch_only(be), a.update({k: to_meta(v) for k, v in a.items()})), ValueError,
     ["q:", "meta", "cpu or cuda only"], None),
    # flash_attn_with_kvcache
    ("fixed-k-batch", "kv", "paged", lambda a, be, d: a.update(k=more_rows(a["k"]), v=more_rows(a["v"])),
     ValueError, ["k:", "batch 3", "q's batch 2"], None),
    ("fixed-k-cache-head-dim", "kv", "paged",
     lambda a, be, d: a.update(k_cache=a["k_cache"][..., :16], v_cache=a["v_cache"][..., :16]), ValueError,
     ["k_cache:", "head dim 16", "q's head dim 32"], None),
    # flash_attn_varlen_func, packed keys
    ("packed-cu-k-int64", "varlen", None, lambda a, be, d: a.update(cu_seqlens_k=astype(be, a["cu_seqlens_k"],
                                                                                         "int64")),
     TypeError, ["cu_seqlens_k:", "int32"], None),
    ("packed-cu-k-length", "varlen", None, lambda a, be, d: a.update(cu_seqlens_k=be.index([0, 5, 14, 14])),
     ValueError, ["cu_seqlens_k:", "[3]"], None),
    ("packed-v-rows", "varlen", None, lambda a, be, d: a.update(v=more_rows(a["v"])), ValueError,
     ["v:", "differs from k's"], None),
    ("packed-k-head-dim", "varlen", None, lambda a, be, d: a.update(k=a["k"][..., :16], v=a["v"][..., :16]),
     ValueError, ["k:", "head dim 16", "q's head dim 32"], None),
    ("packed-cu-k-negative", "varlen", None,
     lambda a, be, d: (cpu_only(be), a.update(cu_seqlens_k=be.index([-1, 5, 14]))), None,
     ["cu_seqlens_k:", "cu_seqlens_k[0]=-1", ">= 0"], "KVATTN_ERR_BAD_DATA"),
]


@pytest.mark.parametrize("name,fn,layout,mutate,exc,words,status", REFUSED, ids=[e[0] for e in REFUSED])
def test_refused(kvattn, backend, name, fn, layout, mutate, exc, words, status):
    args, d = BASES[fn](backend, layout=layout)
    original = dict(args)
    before = snap(backend, original, WRITTEN[fn])
    mutate(args, backend, d)
    before_args = snap(backend, args, WRITTEN[fn])
    with pytest.raises(exc or kvattn.KvattnError) as info:
        getattr(kvattn, FUNCS[fn])(**args)
    e = info.value
    assert isinstance(e, kvattn.KvattnError), f"{type(e)} is not a KvattnError: {e}"
    for w in words:
        assert w in e.message, f"message {e.message!r} lacks {w!r}"
    assert e.status_name == (status or "KVATTN_ERR_INVALID_ARGUMENT"), str(e)
    assert e.function == FUNCS[fn], f"not found in Python: {e}"  # found by the binding, which names the argument
    # nothing written: the arrays given, and the buffers their views point into
    assert snap(backend, args, WRITTEN[fn]) == before_args, "a refused call wrote into its arrays"
    assert snap(backend, original, WRITTEN[fn]) == before, "a refused call wrote into the base arrays"


# ---- strided views: the same results as contiguous copies ----------------------------------------------------------
def call_args(d, be):
    """harness.call's arguments for the case, as a dict (lse always returned)."""
    c, ix = d["case"], be.index
    a = dict(q=d["q"], softmax_scale=c.scale, causal=c.causal, window_size=c.window, softcap=c.softcap,
             alibi_slopes=d.get("alibi"), num_splits=c.num_splits, return_softmax_lse=True)
    bt = ix(d["block_table"]) if "block_table" in d else None
    if c.fn == "varlen":
        a.update(k=d["k_cache"], v=d["v_cache"], cu_seqlens_q=ix(d["cu_q"]), cu_seqlens_k=ix(d["cu_k"]),
                 max_seqlen_q=max(d["n_q"]), max_seqlen_k=max(d["S"]), block_table=bt)
        return a
    a.update(k_cache=d["k_cache"], v_cache=d["v_cache"], k=d.get("k"), v=d.get("v"), rotary_cos=d.get("cos"),
             rotary_sin=d.get("sin"), cache_seqlens=ix(d["S"]),
             cache_batch_idx=ix(d["cache_batch_idx"]) if "cache_batch_idx" in d else None,
             cache_leftpad=ix(d["L"]) if c.L is not None else None, block_table=bt,
             rotary_interleaved=c.rotary[1] if c.rotary else True)
    if c.fn == "varlen_kv":
        a.update(cu_seqlens_q=ix(d["cu_q"]), max_seqlen_q=max(d["n_q"]), cu_seqlens_k=ix(d["cu_k"]))
    return a


def one_row_rotary(a, be):
    """Tables of one position (the case has one key and one query per sequence, at position 0)."""
    a.update(rotary_cos=fresh(a["rotary_cos"][:1]), rotary_sin=fresh(a["rotary_sin"][:1]))


# (id, case, prepare(args, be) for both calls or None, view(args, be): the same values in views with other strides)
STRIDED = [
    ("v-cache-other-strides-than-k-cache", Case(fn="varlen_kv", layout="paged", rotary=(16, True, "float32")),
     None, lambda a, be: a.update(v_cache=padded(a["v_cache"]))),
    ("contig-v-cache-other-strides", Case(fn="kv", n_q=(2, 2), n_new=(1, 1), layout="contig"),
     None, lambda a, be: a.update(v_cache=padded(a["v_cache"]))),
    ("fixed-v-other-strides-than-k", Case(fn="kv", n_q=(2, 2), n_new=(3, 3), layout="paged"),
     None, lambda a, be: a.update(v=padded(a["v"]))),
    ("varlen-v-other-strides-than-k", Case(fn="varlen_kv", n_new=(2, 3), layout="contig"),
     None, lambda a, be: a.update(v=padded(a["v"]))),
    ("packed-v-other-strides-than-k", Case(fn="varlen", n_q=(2, 3), S=(6, 4), layout="contig"),
     None, lambda a, be: a.update(v=padded(a["v"]))),
    ("alibi-BH-row-stride", Case(fn="kv", n_q=(2, 2), n_new=(1, 1), layout="contig", alibi="BH", causal=True),
     None, lambda a, be: a.update(alibi_slopes=padded(a["alibi_slopes"]))),
    # an extent-1 last dimension is never stepped: any stride is taken (R = 2: tables of one column)
    ("rotary-one-column-strided", Case(fn="varlen_kv", layout="paged", rotary=(2, False, "float32")),
     None, lambda a, be: a.update(rotary_cos=every_third(a["rotary_cos"]), rotary_sin=every_third(a["rotary_sin"]))),
    # a one-row table's row stride is never stepped either (a column-major [1, R/2] has strides (1, 1))
    ("rotary-one-row-column-major", Case(fn="kv", n_q=(1, 1), n_new=(1, 1), S=(0, 0), layout="contig",
                                         rotary=(16, True, "float32")),
     one_row_rotary,
     lambda a, be: a.update(rotary_cos=one_row_column_major(a["rotary_cos"]),
                            rotary_sin=one_row_column_major(a["rotary_sin"]))),
    # an index vector of one element: its stride is never stepped
    ("seqlens-one-element-strided", Case(fn="kv", n_q=(2,), n_new=(1,), S=(6,), layout="contig"),
     None, lambda a, be: a.update(cache_seqlens=be.index([6, 0])[::2])),
]


@pytest.mark.parametrize("name,case,prepare,view", STRIDED, ids=[e[0] for e in STRIDED])
def test_strided_view_same_as_contiguous(kvattn, backend, name, case, prepare, view):
    d = build(case, backend)
    fn = getattr(kvattn, FUNCS[case.fn])
    written = ("k", "v") if case.fn == "varlen" else ("k_cache", "v_cache")
    results = []
    for strided in (False, True):
        a = call_args(d, backend)
        for k in written:
            a[k] = fresh(a[k])  # appends write the caches: each call gets its own
        if prepare:
            prepare(a, backend)
        if strided:
            views = dict(a)
            view(views, backend)
            changed = [k for k in views if views[k] is not a[k]]
            assert changed and all(tuple(views[k].shape) == tuple(a[k].shape) for k in changed)
            assert any(tuple(views[k].stride() if not is_np(views[k]) else views[k].strides)
                       != tuple(a[k].stride() if not is_np(a[k]) else a[k].strides) for k in changed)
            a = views
        out, lse = fn(**a)
        results.append([backend.to64(out), backend.to64(lse)] + [backend.to64(a[k]) for k in written])
    want, got = results
    assert np.isfinite(want[0]).all() and np.abs(want[0]).max() > 0
    for what, w, g in zip(("out", "lse") + written, want, got):
        if backend.name == "torch-cuda" and what in ("out", "lse"):
            # the CUDA kernels may take another path for another layout (bits are promised run to run, not across
            # layouts): within a few units of fp16's / bf16's rounding of the largest element
            assert np.abs(w - g).max() <= 2.0 ** -6 * max(1.0, np.abs(w).max()), f"{what}: strided call differs"
        else:
            assert np.array_equal(w, g, equal_nan=False), f"{what}: the strided call differs from the contiguous one"


# ---- boundary values the functions must take (checked against the float64 reference) -----------------------------
def paged_keys_fill_the_row(d):
    d["block_table"] = np.ascontiguousarray(d["block_table"][:, :2])  # sequence 0's 6 keys fill its 2 pages of 3
    return d


# (id, case, tweak of the built case or None)
BOUNDARIES = [
    # cache_leftpad of flash_attn_with_kvcache (the fixed-length function)
    ("fixed-leftpad", Case(fn="kv", n_q=(2, 2), n_new=(1, 1), S=(5, 9), L=(2, 4), layout="contig"), None),
    ("fixed-leftpad-paged", Case(fn="kv", n_q=(1, 1), n_new=(2, 2), S=(4, 7), L=(3, 1), layout="paged",
                                 causal=True, seed=1), None),
    # flash_attn_varlen_func with a block table exactly as long as a sequence's keys
    ("paged-keys-fill-the-row", Case(fn="varlen", n_q=(2, 1), S=(6, 4), layout="paged", page_size=3),
     paged_keys_fill_the_row),
]


@pytest.mark.parametrize("name,case,tweak", BOUNDARIES, ids=[e[0] for e in BOUNDARIES])
def test_boundaries_match_reference(kvattn, backend, monkeypatch, name, case, tweak):
    if tweak is not None:
        plain = harness.build
        monkeypatch.setattr(harness, "build", lambda c, be: tweak(plain(c, be)))
    harness.check(kvattn, case, backend)


@pytest.mark.parametrize("layout", ["contig", "paged"])
def test_no_cache_seqlens_means_full(kvattn, backend, layout):
    """cache_seqlens=None reads every cache to its capacity (a contiguous cache's last position included): the same
    as passing that capacity."""
    rng = harness.fresh_rng(4101)
    q = backend.array(rng.standard_normal((2, 3, 4, 16)), "float16")
    kc, vc = (backend.array(rng.standard_normal((3, 7, 2, 16)), "float16") for _ in range(2))
    kw = dict(causal=False)
    if layout == "paged":  # pages of 7: each sequence holds 2, so the capacity is 14
        kw["block_table"] = backend.index([[2, 0], [1, 2]])
    capacity = 14 if layout == "paged" else 7
    full = kvattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=capacity, **kw)
    got = kvattn.flash_attn_with_kvcache(q, kc, vc, **kw)
    shorter = kvattn.flash_attn_with_kvcache(q, kc, vc, cache_seqlens=capacity - 1, **kw)
    full, got, shorter = backend.to64(full), backend.to64(got), backend.to64(shorter)
    assert np.array_equal(got, full) and not np.array_equal(full, shorter) and np.abs(full).max() > 0


# ---- flash-attention's defaults and positional order -------------------------------------------------------------
FLASH_KVCACHE = [("q", inspect.Parameter.empty), ("k_cache", inspect.Parameter.empty),
                 ("v_cache", inspect.Parameter.empty), ("k", None), ("v", None), ("rotary_cos", None),
                 ("rotary_sin", None), ("cache_seqlens", None), ("cache_batch_idx", None), ("cache_leftpad", None),
                 ("block_table", None), ("softmax_scale", None), ("causal", False), ("window_size", (-1, -1)),
                 ("softcap", 0.0), ("rotary_interleaved", True), ("alibi_slopes", None), ("num_splits", 0),
                 ("return_softmax_lse", False)]
FLASH_VARLEN = [("q", inspect.Parameter.empty), ("k", inspect.Parameter.empty), ("v", inspect.Parameter.empty),
                ("cu_seqlens_q", inspect.Parameter.empty), ("cu_seqlens_k", inspect.Parameter.empty),
                ("max_seqlen_q", inspect.Parameter.empty), ("max_seqlen_k", inspect.Parameter.empty),
                ("dropout_p", 0.0), ("softmax_scale", None), ("causal", False), ("window_size", (-1, -1)),
                ("softcap", 0.0), ("alibi_slopes", None), ("deterministic", False), ("return_attn_probs", False),
                ("block_table", None)]


def _positional_kvcache(kvattn, d, be):
    ix = be.index
    return kvattn.flash_attn_with_kvcache(d["q"], d["k_cache"], d["v_cache"], d["k"], d["v"], d["cos"], d["sin"],
                                          ix(d["S"]))


def _explicit_kvcache(kvattn, d, be):
    return kvattn.flash_attn_with_kvcache(
        q=d["q"], k_cache=d["k_cache"], v_cache=d["v_cache"], k=d["k"], v=d["v"], rotary_cos=d["cos"],
        rotary_sin=d["sin"], cache_seqlens=be.index(d["S"]), cache_batch_idx=None, cache_leftpad=None,
        block_table=None, softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, rotary_interleaved=True,
        alibi_slopes=None, num_splits=0, return_softmax_lse=False)


def _positional_varlen(kvattn, d, be):
    ix = be.index
    return kvattn.flash_attn_varlen_func(d["q"], d["k_cache"], d["v_cache"], ix(d["cu_q"]), ix(d["cu_k"]),
                                         max(d["n_q"]), max(d["S"]))


def _explicit_varlen(kvattn, d, be):
    ix = be.index
    return kvattn.flash_attn_varlen_func(
        q=d["q"], k=d["k_cache"], v=d["v_cache"], cu_seqlens_q=ix(d["cu_q"]), cu_seqlens_k=ix(d["cu_k"]),
        max_seqlen_q=max(d["n_q"]), max_seqlen_k=max(d["S"]), dropout_p=0.0, softmax_scale=None, causal=False,
        window_size=(-1, -1), softcap=0.0, alibi_slopes=None, deterministic=False, return_attn_probs=False,
        block_table=None)


# (function, flash-attention's leading parameters, a case where every default matters, positional call, explicit)
DEFAULTS = [
    # 3 queries over more keys, no mask: causal or a window (-1, 0) would hide keys; a rotary table that is not
    # symmetric, so swapping cos and sin, or the other pairing of channels, changes the result
    ("flash_attn_with_kvcache", FLASH_KVCACHE,
     Case(fn="kv", n_q=(3, 3), n_new=(2, 2), S=(5, 9), layout="contig", rotary=(16, True, "float32")),
     _positional_kvcache, _explicit_kvcache),
    ("flash_attn_varlen_func", FLASH_VARLEN, Case(fn="varlen", n_q=(3, 2), S=(5, 9), layout="contig"),
     _positional_varlen, _explicit_varlen),
]


@pytest.mark.parametrize("name,params,case,positional,explicit", DEFAULTS, ids=[e[0] for e in DEFAULTS])
def test_flash_attention_defaults_and_order(kvattn, backend, name, params, case, positional, explicit):
    sig = list(inspect.signature(getattr(kvattn, name)).parameters.values())
    got = [(p.name, p.default) for p in sig[:len(params)]]
    assert got == params, f"{name}: parameters differ from flash-attention's"
    assert all(p.kind == inspect.Parameter.POSITIONAL_OR_KEYWORD for p in sig[:len(params)])
    d = build(case, backend)
    written = ("k_cache", "v_cache") if case.fn != "varlen" else ()
    outs = []
    for call in (positional, explicit):
        dd = dict(d, **{k: fresh(d[k]) for k in written})
        outs.append(backend.to64(call(kvattn, dd, backend)))
    assert np.isfinite(outs[1]).all() and np.abs(outs[1]).max() > 0
    assert np.array_equal(outs[0], outs[1]), f"{name}: the defaults differ from flash-attention's"


# ---- PagedKVCache: steps are all or nothing; the values at the edges are taken -------------------------------------
def other_kind(be, shapes):
    """int32 buffers of the other array kind than the backend's."""
    if be.name == "numpy":
        torch = torch_or_skip()
        return tuple(torch.zeros(s, dtype=torch.int32) for s in shapes)
    return tuple(np.zeros(s, np.int32) for s in shapes)


# (id, num_pages, page_size, lengths of the sequences before, action(cache, seq_ids, be), refusal (exception,
#  words) or None, after a success: (cache_seqlens returned, lengths, free pages))
STEPS = [
    ("n-new-too-short", 8, 4, [3, 0], lambda c, s, be: c.step(s, [1]),
     (ValueError, ["n_new:", "1 counts for 2 sequences"]), None),
    ("n-new-negative", 8, 4, [3, 0], lambda c, s, be: c.step(s, [2, -1]),
     (ValueError, ["n_new: -1", "must be >= 0"]), None),
    ("length-past-int32", 8, 4, [5], lambda c, s, be: c.step(s, [INT32_MAX]),
     (ValueError, ["n_new:", "5 + 2147483647", "int32"]), None),
    ("seq-id-int32-max", 8, 4, [1], lambda c, s, be: c.step([INT32_MAX], [1]),
     (ValueError, ["seq_ids: 2147483647 is not a live sequence"]), None),
    ("out-seqlens-2d", 8, 4, [1, 2],
     lambda c, s, be: c.step(s, [1, 1], out=(be.index(np.zeros((2, 3))), be.index(np.zeros((2, 1))))),
     (ValueError, ["out[1] (cache_seqlens)", "1 dimension"]), None),
    ("out-width-0", 8, 4, [0], lambda c, s, be: c.step(s, [0], out=(be.index(np.zeros((1, 0))),
                                                                     be.index(np.zeros(1)))),
     (ValueError, ["out[0] (block_table)", "width 0", ">= 1"]), None),
    ("out-other-kind", 8, 4, [1], lambda c, s, be: c.step(s, [1], out=other_kind(be, [(1, 3), (1,)])),
     (TypeError, ["out[0] (block_table)", "the cache's are"]), None),
    ("tables-pending-too-long", 8, 4, [3], lambda c, s, be: c.tables(s, pending=[1, 2]),
     (ValueError, ["pending:", "2 counts for 1 sequences"]), None),
    # taken: pages a sequence already holds are not needed again; the last free pages can be used
    ("held-pages-not-counted", 4, 4, [10], lambda c, s, be: c.step(s, [2]), None, ([10], [12], 1)),
    ("last-free-pages", 4, 4, [0, 0], lambda c, s, be: c.step(s, [8, 8]), None, ([0, 0], [8, 8], 0)),
    ("empty-sequence-auto-width", 8, 4, [0], lambda c, s, be: c.step(s, [0]), None, ([0], [0], 8)),
]


@pytest.mark.parametrize("name,num_pages,page_size,lengths,action,refusal,after", STEPS, ids=[e[0] for e in STEPS])
def test_paged_steps(kvattn, backend, name, num_pages, page_size, lengths, action, refusal, after):
    c = make_cache(kvattn, backend, num_pages=num_pages, page_size=page_size, Hk=1, D=8)
    seqs = [c.add_seq() for _ in lengths]
    for s, n in zip(seqs, lengths):
        c.append(s, n)
    state = lambda: ([c.seq_len(s) for s in seqs], [c.seq_num_pages(s) for s in seqs], c.free_pages)  # noqa: E731
    before = state()
    if refusal is not None:
        exc, words = refusal
        with pytest.raises(exc) as info:
            action(c, seqs, backend)
        e = info.value
        assert isinstance(e, kvattn.KvattnError) and e.function.startswith("PagedKVCache."), str(e)
        for w in words:
            assert w in e.message, f"message {e.message!r} lacks {w!r}"
        assert state() == before, "a refused step changed the cache"
        return
    bt, sl = action(c, seqs, backend)
    want_sl, want_len, want_free = after
    bt, sl = backend.to64(bt).astype(int), backend.to64(sl).astype(int)
    assert list(sl) == want_sl and [c.seq_len(s) for s in seqs] == want_len and c.free_pages == want_free
    pages = [-(-n // page_size) for n in want_len]
    assert bt.shape == (len(seqs), max(pages + [1])), bt.shape  # automatic width: the most pages, at least 1
    held = [p for row, n in zip(bt, pages) for p in row[:n]]
    assert all(0 <= p < num_pages for p in held) and len(set(held)) == len(held)
    assert all((row[n:] == -1).all() for row, n in zip(bt, pages))


def test_paged_cache_starts_zeroed(kvattn, backend):
    c = make_cache(kvattn, backend, num_pages=3, page_size=2, Hk=2, D=8)
    for t in (c.k_cache, c.v_cache):
        assert tuple(t.shape) == (3, 2, 2, 8) and str(t.dtype).endswith("float16")
        assert (backend.to64(t) == 0).all()


def test_paged_cache_after_close(kvattn, backend):
    c = make_cache(kvattn, backend, num_pages=4, page_size=2, Hk=1, D=8)
    s = c.add_seq()
    c.step([s], [3])
    c.close()
    for use in (c.add_seq, lambda: c.free_pages, lambda: c.step([s], [1]), lambda: c.seq_len(s),
                lambda: c.tables([s])):
        with pytest.raises(kvattn.KvattnArgumentError, match=r"used after close\(\)"):
            use()
    c.close()  # a second close is a no-op
    with pytest.raises(kvattn.KvattnArgumentError, match=r"used after close\(\)"):
        c.append(s, 1)


# ---- the pure-Python helpers -------------------------------------------------------------------------------------
def test_status_names_match_the_library(kvattn):
    from kvattn._lib import lib

    for status in list(range(-1, 12)) + [42, 1000]:
        want = lib.kvattn_status_string(status).decode()
        assert kvattn.status_name(status) == want, status
        assert kvattn.KvattnError(status, "m").status_name == want
    assert kvattn.status_name(7) == "KVATTN_ERR_OUT_OF_MEMORY" and kvattn.status_name(42) == "KVATTN_ERR_UNKNOWN"


# (flags, num_failed, first_failed, ok, reasons): the flags as kvattn.h's KVATTN_FLAG_* bits
DEVICE_STATUS = [
    (0, 0, -1, True, []),
    (0, 2, 1, False, []),  # skipped sequences fail the call even without a reason
    (1 << 2, 0, -1, False, ["CAPACITY"]),  # and a reason fails it even without a count
    (1 << 3, 1, 0, False, ["PAGE_INDEX"]),
    ((1 << 0) | (1 << 3) | (1 << 5), 3, 0, False, ["BAD_CU_SEQLENS", "PAGE_INDEX", "BATCH_IDX"]),
    (0x3F, 4, 2, False, ["BAD_CU_SEQLENS", "BAD_LEFTPAD", "CAPACITY", "PAGE_INDEX", "ROTARY_RANGE", "BATCH_IDX"]),
]


@pytest.mark.parametrize("flags,num_failed,first_failed,ok,reasons", DEVICE_STATUS)
def test_device_status(kvattn, flags, num_failed, first_failed, ok, reasons):
    st = kvattn.DeviceStatus(flags, num_failed, first_failed)
    assert st.ok is ok and st.reasons == reasons
    assert (st.flags, st.num_failed, st.first_failed) == (flags, num_failed, first_failed)
    assert all(r in repr(st) for r in reasons) and f"num_failed={num_failed}" in repr(st)


@pytest.mark.parametrize("field,bits", [("window_left", 32), ("num_splits", 32), ("q_row_stride", 64)])
def test_params_int_fields_take_their_whole_range(kvattn, field, bits):
    from kvattn._lib import Params

    p = Params()
    lo, hi = -(1 << (bits - 1)), (1 << (bits - 1)) - 1
    for v in (lo, hi, -1, 0):
        setattr(p, field, v)
        assert getattr(p, field) == v
    for v in (lo - 1, hi + 1):
        with pytest.raises(kvattn.KvattnArgumentError, match=field):
            setattr(p, field, v)
        assert getattr(p, field) == 0


def test_cuda_available_asks_for_cuda(kvattn):
    from kvattn._lib import lib

    assert lib.kvattn_backend_available(0) == 1  # the CPU backend always is
    assert kvattn.cuda_available() is bool(lib.kvattn_backend_available(1))
    try:
        import torch
    except ImportError:
        return
    if not torch.cuda.is_available():  # no device: CUDA cannot be available, and the reason is given
        assert kvattn.cuda_available() is False and kvattn.last_error()


# ---- finding and checking the library at import (each in a fresh interpreter) ------------------------------------
_NO_ML_DTYPES = "import sys; sys.modules['ml_dtypes'] = None\n"  # (faster to import; and absent where asked)


def _run(code, env, cwd):
    env = {k: v for k, v in env.items() if v is not None}
    r = subprocess.run([sys.executable, "-c", _NO_ML_DTYPES + code], env=env, cwd=cwd, capture_output=True,
                       text=True, timeout=60)
    return r.stdout + r.stderr


def _pkg_env(kvattn, **extra):
    root = os.path.dirname(os.path.dirname(os.path.abspath(kvattn.__file__)))
    return dict(os.environ, PYTHONPATH=root, **extra), root


def test_library_in_a_folder(kvattn):
    """KVATTN_LIBRARY may name the folder that holds libkvattn.so."""
    env, root = _pkg_env(kvattn, KVATTN_LIBRARY=os.path.dirname(kvattn.library_path))
    out = _run("import kvattn; print('path', kvattn.library_path)", env, root)
    assert f"path {os.path.join(os.path.dirname(kvattn.library_path), 'libkvattn.so')}" in out, out


def test_package_folder_before_checkout_build(kvattn, tmp_path):
    """Without KVATTN_LIBRARY, a library in the package folder (an installed package) is taken before the
    checkout's build/ (README: "else in the package folder, then in the checkout's build/")."""
    pkg = tmp_path / "python" / "kvattn"
    shutil.copytree(os.path.dirname(os.path.abspath(kvattn.__file__)), pkg,
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    (tmp_path / "build").mkdir()
    for where in (pkg, tmp_path / "build"):
        shutil.copy(kvattn.library_path, where / "libkvattn.so")
    env = dict(os.environ, PYTHONPATH=str(tmp_path / "python"), KVATTN_LIBRARY=None)
    code = "import kvattn; print('path', kvattn.library_path)"
    out = _run(code, env, str(tmp_path))
    assert f"path {pkg / 'libkvattn.so'}" in out, out
    os.remove(pkg / "libkvattn.so")
    out = _run(code, env, str(tmp_path))
    assert f"path {tmp_path / 'build' / 'libkvattn.so'}" in out, out


def test_struct_size_mismatch_is_refused(kvattn):
    """A library whose kvattn_params has another size than the Python mirror is refused at import (simulated: the
    library's kvattn_params_size answers 8 bytes more)."""
    env, root = _pkg_env(kvattn)
    code = ("import ctypes\n"
            "class Lib(ctypes.CDLL):\n"
            "    def __init__(self, *a, **kw):\n"
            "        super().__init__(*a, **kw)\n"
            "        real = self.kvattn_params_size\n"
            "        real.restype = ctypes.c_size_t\n"
            "        self.kvattn_params_size = lambda n=real() + 8: n\n"
            "ctypes.CDLL = Lib\n"
            "try:\n    import kvattn\nexcept ImportError as e:\n    print('ImportError', e)\n"
            "else:\n    print('imported')\n")
    out = _run(code, env, root)
    assert "ImportError" in out and "sizeof(kvattn_params)" in out and "Python mirror" in out, out


def test_bfloat16_numpy_cache_without_ml_dtypes(kvattn):
    """PagedKVCache(dtype="bfloat16") without ml_dtypes says that NumPy needs it (not that bfloat16 is no dtype)."""
    env, root = _pkg_env(kvattn)
    code = ("import kvattn\n"
            "try:\n    kvattn.PagedKVCache(2, 2, 1, 8, 'bfloat16')\n"
            "except kvattn.KvattnTypeError as e:\n    print('TypeError', e)\n")
    out = _run(code, env, root)
    assert "TypeError" in out and "needs the ml_dtypes package" in out, out
