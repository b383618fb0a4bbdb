# test_errors.py — bad input: each case raises an exception whose message names the argument, and leaves the
# caches and the given output byte-identical. Argument problems raise on every backend; data-dependent ones
# (lengths, pages) raise KVATTN_ERR_BAD_DATA on the CPU (on CUDA they go to the device status: test_cuda.py).
import numpy as np
import pytest

from conftest import cuda_or_skip, torch_or_skip
from harness import Case, build, fresh_rng


def base_args(be, dtype="float16", layout="paged"):
    case = Case(n_q=(2, 1), n_new=(2, 1), S=(5, 9), H=4, Hk=2, D=32, layout=layout, page_size=3, dtype=dtype,
                causal=True, rotary=(16, True, "float32"))
    d = build(case, be)
    ix = be.index
    args = dict(q=d["q"], k_cache=d["k_cache"], v_cache=d["v_cache"], cu_seqlens_q=ix(d["cu_q"]), max_seqlen_q=2,
                k=d["k"], v=d["v"], cu_seqlens_k=ix(d["cu_k"]), cache_seqlens=ix(d["S"]),
                rotary_cos=d["cos"], rotary_sin=d["sin"], causal=True, out=be.array(np.zeros((3, 4, 32)), dtype))
    if layout == "paged":
        args["block_table"] = ix(d["block_table"])
    return args, d


def astype(be, a, dtype):
    if isinstance(a, np.ndarray):
        return a.astype(dtype)
    import torch

    return a.to(getattr(torch, dtype))


def noncontig_last(be, a):
    """The same values with a last-dimension stride of 2."""
    if isinstance(a, np.ndarray):
        buf = np.zeros(a.shape[:-1] + (2 * a.shape[-1],), a.dtype)
        buf[..., ::2] = a
        return buf[..., ::2]
    import torch

    buf = torch.zeros(a.shape[:-1] + (2 * a.shape[-1],), dtype=a.dtype, device=a.device)
    buf[..., ::2] = a
    return buf[..., ::2]


def broadcast_rows(a):
    """Row 0 of a 2-D table seen as every row (row stride 0), the shape unchanged."""
    if isinstance(a, np.ndarray):
        return np.broadcast_to(a[:1], a.shape)
    return a[:1].expand(a.shape)


# (id, mutation(args, be, d), expected exception type, words the message must contain, status name)
ARG_ERRORS = [
    ("q-dtype-f64", lambda a, be, d: a.update(q=astype(be, a["q"], "float64")), TypeError, ["q:", "float64"], None),
    ("kcache-dtype", lambda a, be, d: a.update(k_cache=astype(be, a["k_cache"], "float32")), TypeError,
     ["k_cache:", "float32", "q"], None),
    ("cu-int64", lambda a, be, d: a.update(cu_seqlens_q=astype(be, a["cu_seqlens_q"], "int64")), TypeError,
     ["cu_seqlens_q:", "int32"], None),
    ("block-table-int64", lambda a, be, d: a.update(block_table=astype(be, a["block_table"], "int64")), TypeError,
     ["block_table:", "int32"], None),
    ("seqlens-float", lambda a, be, d: a.update(cache_seqlens=astype(be, a["cache_seqlens"], "float32")),
     TypeError, ["cache_seqlens:", "int32"], None),
    ("q-2d", lambda a, be, d: a.update(q=a["q"][0]), ValueError, ["q:", "3 dimensions"], None),
    # both caches are written when k/v are appended: one buffer for both would lose the keys
    ("kcache-is-vcache", lambda a, be, d: a.update(v_cache=a["k_cache"]), ValueError,
     ["k_cache and v_cache", "share memory", "appended"], "KVATTN_ERR_INVALID_ARGUMENT"),
    ("vcache-shape", lambda a, be, d: a.update(v_cache=a["v_cache"][:-1]), ValueError, ["v_cache:", "shape"], None),
    ("k-shape", lambda a, be, d: a.update(k=a["k"][:, :1], v=a["v"][:, :1]), ValueError, ["k:", "Hk=2"], None),
    ("k-without-v", lambda a, be, d: a.update(v=None), ValueError, ["k/v", "together"], None),
    ("block-table-rows", lambda a, be, d: a.update(block_table=a["block_table"][:1]), ValueError,
     ["block_table:", "B=2"], None),
    ("seqlens-len", lambda a, be, d: a.update(cache_seqlens=be.index([1, 2, 3])), ValueError,
     ["cache_seqlens:", "[2]"], None),
    # a cu_seqlens_q one entry short shows up as a cache_seqlens of the wrong length: the message says where B is from
    ("cu-q-short", lambda a, be, d: a.update(cu_seqlens_q=be.index([0, 2])), ValueError,
     ["B=1", "len(cu_seqlens_q) - 1"], None),
    ("out-shape", lambda a, be, d: a.update(out=a["out"][:2]), ValueError, ["out:", "shape"], None),
    # ints are taken with operator.index: a float or a string is a mistake, not a silently truncated int
    ("window-float", lambda a, be, d: a.update(window_size=(2.7, -1)), TypeError, ["window_size[0]", "2.7"], None),
    ("splits-string", lambda a, be, d: a.update(num_splits="3"), TypeError, ["num_splits", "'3'"], None),
    ("softcap-string", lambda a, be, d: a.update(softcap="x"), TypeError, ["softcap"], None),
    ("q-noncontig", lambda a, be, d: a.update(q=noncontig_last(be, a["q"])), ValueError,
     ["q:", "last dimension", "contiguous"], None),
    ("kcache-noncontig", lambda a, be, d: a.update(k_cache=noncontig_last(be, a["k_cache"])), ValueError,
     ["k_cache:", "contiguous"], None),
    ("rotary-cos-only", lambda a, be, d: a.update(rotary_sin=None), ValueError, ["rotary_cos/rotary_sin"], None),
    # row stride 0 cannot be passed to C (0 there means rotary_dim / 2): it would read past the one stored row
    ("rotary-broadcast", lambda a, be, d: a.update(rotary_cos=broadcast_rows(a["rotary_cos"]),
                                                   rotary_sin=broadcast_rows(a["rotary_sin"])), ValueError,
     ["rotary_cos:", "row stride 0"], None),
    ("alibi-shape", lambda a, be, d: a.update(alibi_slopes=be.array(np.ones(3), "float32")), ValueError,
     ["alibi_slopes:", "[H=4]"], None),
    ("alibi-dtype", lambda a, be, d: a.update(alibi_slopes=be.array(np.ones(4), "float16")), TypeError,
     ["alibi_slopes:", "float32"], None),
    ("not-an-array", lambda a, be, d: a.update(q=[[1.0]]), TypeError, ["q:", "list"], None),
    # found by the C validation: its status and message are forwarded, as a ValueError like Python's own finds
    ("c-heads", lambda a, be, d: a.update(q=a["q"][:, :3], out=a["out"][:, :3]), ValueError,
     ["num_heads", "3"], "KVATTN_ERR_INVALID_ARGUMENT"),
    ("c-window", lambda a, be, d: a.update(window_size=(-5, 0)), ValueError, ["window_left", "-5"],
     "KVATTN_ERR_INVALID_ARGUMENT"),
    ("c-softcap", lambda a, be, d: a.update(softcap=-1.0), ValueError, ["softcap"], "KVATTN_ERR_INVALID_ARGUMENT"),
    # the C field reads 0 as "1/sqrt(D)": a scale of 0 (or one that is 0 in float32) must not silently become that
    ("scale-zero", lambda a, be, d: a.update(softmax_scale=0.0), ValueError, ["softmax_scale:", "None"], None),
    ("scale-underflow", lambda a, be, d: a.update(softmax_scale=1e-46), ValueError, ["softmax_scale:", "float32"],
     None),
    # ctypes would wrap an int past int32 onto another length
    ("seqlens-int-overflow", lambda a, be, d: a.update(cache_seqlens=2**32 + 5), ValueError,
     ["cache_seqlens:", "int32"], None),
    # overlapping rows: named here, not through the C field block_table_batch_stride
    ("block-table-broadcast", lambda a, be, d: a.update(block_table=broadcast_rows(a["block_table"])), ValueError,
     ["block_table:", "row stride 0"], None),
    # written arrays whose elements share memory: NumPy's broadcast views are read-only, torch's expand() is not
    ("out-expanded", lambda a, be, d: a.update(out=broadcast_rows(a["out"])), ValueError, ["out:"], None),
    ("kcache-expanded", lambda a, be, d: a.update(k_cache=broadcast_rows(a["k_cache"])), ValueError, ["k_cache:"],
     None),
]

# data-dependent: the CPU finds them before writing anything
DATA_ERRORS = [
    ("capacity", lambda a, be, d: a.update(cache_seqlens=be.index([5, 100])), ["capacity"]),
    ("page-index", lambda a, be, d: a.update(block_table=be.index(np.where(d["block_table"] >= 0,
                                                                           d["block_table"] + 1000, -1))),
     ["page"]),
    ("negative-seqlen", lambda a, be, d: a.update(cache_seqlens=be.index([5, -1])), []),
    ("cu-decreasing", lambda a, be, d: a.update(cu_seqlens_q=be.index([0, 3, 2])), ["cu_seqlens_q"]),
    ("cu-past-rows", lambda a, be, d: a.update(cu_seqlens_q=be.index([0, 2, 7])), ["cu_seqlens_q"]),
    ("leftpad", lambda a, be, d: a.update(cache_leftpad=be.index([6, 0])), ["leftpad"]),
    ("rotary-range", lambda a, be, d: a.update(rotary_cos=a["rotary_cos"][:6], rotary_sin=a["rotary_sin"][:6]),
     ["rotary"]),
    # a table of 0 positions (an empty torch tensor has a NULL data pointer, which the C layer reads as "no
    # rotary": it must stay a table, and fail its range check)
    ("rotary-no-rows", lambda a, be, d: a.update(rotary_cos=be.array(np.zeros((0, 8)), "float32"),
                                                 rotary_sin=be.array(np.zeros((0, 8)), "float32")), ["rotary"]),
]


def snapshot(be, args):
    return {k: be.snapshot(args[k]) for k in ("k_cache", "v_cache", "out")}


def run_and_expect(kvattn, be, args, exc_type, words, status):
    before = snapshot(be, args)
    with pytest.raises(exc_type) as info:
        kvattn.flash_attn_varlen_func_with_kvcache(**args)
    msg = str(info.value)
    for w in words:
        assert w in msg, f"message {msg!r} lacks {w!r}"
    if status is not None:
        assert isinstance(info.value, kvattn.KvattnError)
        assert info.value.status_name == status, msg
    assert isinstance(info.value, kvattn.KvattnError), f"{type(info.value)} is not a KvattnError"
    after = snapshot(be, args)
    for k in before:
        assert before[k] == after[k], f"{k} changed by a failing call"
    return info.value


@pytest.mark.parametrize("name,mutate,exc,words,status", ARG_ERRORS, ids=[e[0] for e in ARG_ERRORS])
def test_argument_errors(kvattn, backend, name, mutate, exc, words, status):
    args, d = base_args(backend)
    mutate(args, backend, d)
    run_and_expect(kvattn, backend, args, exc, words, status)


@pytest.mark.parametrize("name,mutate,words", DATA_ERRORS, ids=[e[0] for e in DATA_ERRORS])
def test_bad_data_cpu(kvattn, backend, name, mutate, words):
    if backend.name == "torch-cuda":
        pytest.skip("on CUDA, data-dependent failures go to the device status (test_cuda.py)")
    args, d = base_args(backend)
    if name == "leftpad":  # leftpad needs the contiguous layout to be meaningful on its own
        args, d = base_args(backend, layout="contig")
    mutate(args, backend, d)
    e = run_and_expect(kvattn, backend, args, kvattn.KvattnError, words, "KVATTN_ERR_BAD_DATA")
    assert e.status == 4 and e.message


def test_non_native_byte_order(kvattn):
    import harness

    be = harness.NumpyBackend()
    args, d = base_args(be, dtype="float32")
    args["q"] = args["q"].astype(args["q"].dtype.newbyteorder("S"))
    run_and_expect(kvattn, be, args, TypeError, ["q:", "byte order"], None)


def test_read_only_numpy_cache(kvattn):
    import harness

    be = harness.NumpyBackend()
    args, d = base_args(be)
    args["k_cache"].flags.writeable = False
    run_and_expect(kvattn, be, args, ValueError, ["k_cache:", "read-only"], None)


def test_mixed_numpy_and_torch(kvattn):
    torch_or_skip()
    import harness

    be = harness.NumpyBackend()
    args, d = base_args(be)
    import torch

    args["cache_seqlens"] = torch.from_numpy(np.asarray(d["S"], np.int32))
    run_and_expect(kvattn, be, args, TypeError, ["cache_seqlens:", "torch.Tensor", "numpy.ndarray"], None)


def test_mixed_devices(kvattn):
    torch = cuda_or_skip()
    import harness

    be = harness.TorchBackend("cuda")
    for arg in ("cache_seqlens", "k_cache", "block_table", "out"):
        args, d = base_args(be)
        args[arg] = args[arg].cpu()
        run_and_expect(kvattn, be, args, ValueError, [f"{arg}:", "cpu", "cuda:0", "one device"], None)
    if torch.cuda.device_count() > 1:
        args, d = base_args(be)
        args["q"] = args["q"].to("cuda:1")
        run_and_expect(kvattn, be, args, ValueError, ["cuda:1", "cuda:0"], None)


def test_cuda_rejects_float32(kvattn):
    cuda_or_skip()
    import harness

    be = harness.TorchBackend("cuda")
    args, d = base_args(be, dtype="float32")
    e = run_and_expect(kvattn, be, args, kvattn.KvattnError, ["f32"], "KVATTN_ERR_UNSUPPORTED")
    assert e.status == 2


def test_cuda_unavailable_says_so(kvattn):
    """A library built without nvcc answers a CUDA tensor with KVATTN_ERR_NOT_AVAILABLE, not a crash."""
    torch = torch_or_skip()
    if kvattn.cuda_available() or not torch.cuda.is_available():
        pytest.skip("needs CUDA tensors with a CPU-only libkvattn")
    import harness

    be = harness.TorchBackend("cuda")
    args, d = base_args(be)
    run_and_expect(kvattn, be, args, kvattn.KvattnError, [], "KVATTN_ERR_NOT_AVAILABLE")


def bad_data_error(kvattn):
    """The KvattnError of a NumPy call whose second sequence is past its capacity (KVATTN_ERR_BAD_DATA)."""
    import harness

    be = harness.NumpyBackend()
    args, d = base_args(be)
    args["cache_seqlens"] = be.index([5, 100])
    with pytest.raises(kvattn.KvattnError) as info:
        kvattn.flash_attn_varlen_func_with_kvcache(**args)
    return info.value


def test_page_manager_message_names_the_function_once(kvattn):
    with pytest.raises(ValueError) as info:
        kvattn.PagedKVCache(4, 0, 1, 8, np.float16)
    msg = str(info.value)
    assert msg.count("kvattn_pages_create") == 1 and "page_size=0" in msg, msg


def test_cuda_helpers_without_torch_say_so(kvattn):
    import sys

    if "torch" in sys.modules or __import__("importlib").util.find_spec("torch") is not None:
        pytest.skip("torch is installed: the message for its absence cannot be seen")
    with pytest.raises(kvattn.KvattnError) as info:
        kvattn.device_status()
    assert info.value.status_name == "KVATTN_ERR_NOT_AVAILABLE" and "torch" in info.value.message
    assert info.value.function == "device_status" and str(info.value).startswith("device_status: "), str(info.value)


def test_error_attributes(kvattn):
    e = bad_data_error(kvattn)
    assert e.status == 4 and e.status_name == "KVATTN_ERR_BAD_DATA"
    assert e.message and e.message in str(e) and e.function == "kvattn_forward"
    # the C text, then what its kvattn_params fields were taken from, in the order the text names them
    assert e.message.startswith(kvattn.last_error()) and e.message != kvattn.last_error(), e.message
    assert e.message.endswith("(Python: max_pages_per_seq is block_table.shape[1], page_size is k_cache.shape[1])"), \
        e.message


def test_python_checks_name_the_function(kvattn):
    """A check made in Python names the public function it failed in (fifty-fourth session; it carried none), as
    the library's errors name their C function; the message starts with it, once."""
    import harness

    be = harness.NumpyBackend()
    args, d = base_args(be)
    q3 = args["q"]  # [total_q, H, D]: three dimensions, where flash_attn_with_kvcache wants four
    bad = dict(args, v_cache=args["v_cache"][:, :-1])  # v_cache's shape differs from k_cache's
    calls = [
        ("flash_attn_varlen_func_with_kvcache", lambda: kvattn.flash_attn_varlen_func_with_kvcache(**bad), "v_cache"),
        ("flash_attn_with_kvcache", lambda: kvattn.flash_attn_with_kvcache(q3, args["k_cache"], args["v_cache"]), "q:"),
        ("flash_attn_varlen_func",
         lambda: kvattn.flash_attn_varlen_func(q3[None], args["k_cache"], args["v_cache"], args["cu_seqlens_q"],
                                               args["cu_seqlens_q"], 2, 2), "q:"),
    ]
    for name, call, word in calls:
        with pytest.raises(kvattn.KvattnArgumentError) as info:
            call()
        e = info.value
        assert e.function == name, (name, e.function, str(e))
        assert str(e).startswith(f"{name}: KVATTN_ERR_INVALID_ARGUMENT: ") and str(e).count(name) == 1, str(e)
        assert word in e.message and not e.message.startswith(name), e.message
    # the page manager's Python checks too (its C calls name their C function, e.g. kvattn_pages_create)
    with pytest.raises(kvattn.KvattnArgumentError) as info:
        kvattn.PagedKVCache(4, 16, 1, 8, np.float16, max_pages_per_seq=0)
    assert info.value.function == "PagedKVCache" and str(info.value).startswith("PagedKVCache: "), str(info.value)
    cache = kvattn.PagedKVCache(4, 16, 1, 8, np.float16)
    with pytest.raises(kvattn.KvattnArgumentError) as info:
        cache.step([99], [1])
    assert info.value.function == "PagedKVCache.step" and "seq_ids: 99" in info.value.message, str(info.value)
    # the library's own errors keep their C function
    assert bad_data_error(kvattn).function == "kvattn_forward"


def test_int32_fields_never_wrap(kvattn):
    # ctypes would store 2**31 as -2**31: the params mirror must refuse it, naming the field
    from kvattn._lib import Params
    p = Params()
    p.total_q = 2**31 - 1
    with pytest.raises(kvattn.KvattnArgumentError, match="total_q"):
        p.total_q = 2**31
    with pytest.raises(kvattn.KvattnArgumentError, match="q_row_stride"):
        p.q_row_stride = 2**63
    assert p.total_q == 2**31 - 1


def test_read_only_cache_without_new_tokens(kvattn):
    """Only appends write the caches: a call without k/v takes read-only caches (and gives the same result)."""
    import harness

    be = harness.NumpyBackend()
    args, d = base_args(be)
    for key in ("k", "v", "cu_seqlens_k", "rotary_cos", "rotary_sin"):
        args.pop(key)
    want = np.array(kvattn.flash_attn_varlen_func_with_kvcache(**args))
    args["out"] = None
    for key in ("k_cache", "v_cache"):
        args[key] = args[key].copy()
        args[key].flags.writeable = False
    got = kvattn.flash_attn_varlen_func_with_kvcache(**args)
    assert np.array_equal(got, want) and np.isfinite(want).all() and np.abs(want).max() > 0
    # flash_attn_varlen_func with a paged k/v never writes them either
    cu_k = be.index(np.asarray(d["S"]).cumsum().tolist() and [0] + np.asarray(d["S"]).cumsum().tolist())
    out = kvattn.flash_attn_varlen_func(args["q"], args["k_cache"], args["v_cache"], args["cu_seqlens_q"], cu_k, 2, 9,
                                        block_table=args["block_table"], causal=True)
    assert np.isfinite(out).all()


def test_errors_pickle(kvattn):
    """An error raised in a worker process reaches the caller as itself (multiprocessing pickles it)."""
    import pickle

    for e in (bad_data_error(kvattn), kvattn.KvattnArgumentError("q: bad", "f"), kvattn.KvattnTypeError("q: worse")):
        e2 = pickle.loads(pickle.dumps(e))
        assert type(e2) is type(e) and str(e2) == str(e)
        assert (e2.status, e2.status_name, e2.message, e2.function) == (e.status, e.status_name, e.message, e.function)


def test_numpy_strides_and_alignment(kvattn):
    """NumPy views the C layer cannot take are refused naming the argument; a flip over an extent-1 axis (a
    no-op) is taken and gives the same bits."""
    import harness

    be = harness.NumpyBackend()
    rng = fresh_rng(2011)
    q1 = rng.standard_normal((2, 1, 4, 32)).astype(np.float16)  # fixed-length decode: Sq = 1
    kc, vc = (rng.standard_normal((2, 10, 2, 32)).astype(np.float16) for _ in range(2))
    seqlens = be.index([5, 9])
    want = kvattn.flash_attn_with_kvcache(q1, kc, vc, cache_seqlens=seqlens)
    flipped = np.flip(q1, axis=1)
    assert flipped.strides[1] < 0 and np.abs(want).max() > 0
    got = kvattn.flash_attn_with_kvcache(flipped, kc, vc, cache_seqlens=seqlens)
    assert np.array_equal(got, want)
    args, d = base_args(be)
    q = args["q"]
    run_and_expect(kvattn, be, dict(args, rotary_cos=args["rotary_cos"][::-1], rotary_sin=args["rotary_sin"][::-1]),
                   ValueError, ["rotary_cos:", "negative strides"], None)
    buf = np.zeros(q.size * q.itemsize + q.itemsize, np.uint8)
    misaligned = np.frombuffer(buf, q.dtype, count=q.size, offset=1).reshape(q.shape)
    misaligned[...] = q
    run_and_expect(kvattn, be, dict(args, q=misaligned), ValueError, ["q:", "element size"], None)


@pytest.mark.parametrize("layout", ["packed", "paged"])
def test_varlen_func_bad_cu_seqlens_k(kvattn, backend, layout):
    """flash_attn_varlen_func passes cu_seqlens_k as cache_leftpad / cache_seqlens: on the CPU a bad one is
    reported under its own name."""
    if backend.name == "torch-cuda":
        pytest.skip("on CUDA, data-dependent failures go to the device status")
    rng = fresh_rng(2003)
    H, Hk, D = 4, 2, 16
    q = backend.array(rng.standard_normal((3, H, D)), "float16")
    cu_q = backend.index([0, 2, 3])
    if layout == "packed":
        k = backend.array(rng.standard_normal((6, Hk, D)), "float16")
        v = backend.array(rng.standard_normal((6, Hk, D)), "float16")
        bt = None
    else:
        k = backend.array(rng.standard_normal((4, 2, Hk, D)), "float16")
        v = backend.array(rng.standard_normal((4, 2, Hk, D)), "float16")
        bt = backend.index([[0, 1], [2, 3]])
    # paged: sequence 1's 7 keys are past the 4 positions of its block_table row
    past = ["cu_seqlens_k", "9"] if layout == "packed" else ["cu_seqlens_k", "7 keys", "block_table"]
    for cu_k, words in (([0, 4, 2], ["cu_seqlens_k", "non-decreasing"]), ([0, 2, 9], past)):
        with pytest.raises(kvattn.KvattnError) as info:
            kvattn.flash_attn_varlen_func(q, k, v, cu_q, backend.index(cu_k), 2, 4, block_table=bt)
        assert info.value.status_name == "KVATTN_ERR_BAD_DATA"
        for w in words:
            assert w in str(info.value), str(info.value)


@pytest.mark.parametrize("given", ["cu_seqlens_k", "cu_seqlens_q"])
def test_varlen_kvcache_bad_new_offsets(kvattn, backend, given):
    """flash_attn_varlen_func_with_kvcache on the CPU: bad offsets of the new tokens are reported under the
    Python argument that holds them (cu_seqlens_k, or cu_seqlens_q when cu_seqlens_k is not given), not under the
    C field cu_seqlens_knew; the caches and out stay byte-identical."""
    if backend.name == "torch-cuda":
        pytest.skip("on CUDA, data-dependent failures go to the device status")
    args, d = base_args(backend)
    rows = d["k"].shape[0]  # 3 new rows: cu_seqlens_q is [0, 2, 3]
    bad = [([0, 2, rows + 1], [f"{given}[2]={rows + 1}", f"{rows} rows of k"])]
    if given == "cu_seqlens_k":
        bad += [([0, 2, 1], ["cu_seqlens_k", "non-decreasing"]), ([1, 2, 3], ["cu_seqlens_k[0]=1"])]
    for cu, words in bad:
        a = dict(args)
        if given == "cu_seqlens_k":
            a["cu_seqlens_k"] = backend.index(cu)
        else:
            del a["cu_seqlens_k"]
            a["k"], a["v"] = a["k"][:rows - 1], a["v"][:rows - 1]
            words = [f"cu_seqlens_q[2]={rows}", f"{rows - 1} rows of k", "cu_seqlens_k is not given"]
        run_and_expect(kvattn, backend, a, kvattn.KvattnError, words, "KVATTN_ERR_BAD_DATA")


def test_requires_grad_is_refused(kvattn, backend):
    """kvattn has no backward: with grad mode on, an input that requires grad is refused (an output that
    silently left the autograd graph would train wrong); under no_grad the same call runs."""
    if backend.name == "numpy":
        pytest.skip("NumPy arrays have no autograd")
    import torch

    args, d = base_args(backend)
    args["q"] = args["q"].clone().requires_grad_(True)
    e = run_and_expect(kvattn, backend, args, kvattn.KvattnError, ["q:", "requires grad", "no_grad"],
                       "KVATTN_ERR_UNSUPPORTED")
    assert e.function == "flash_attn_varlen_func_with_kvcache"
    with torch.no_grad():
        kvattn.flash_attn_varlen_func_with_kvcache(**args)


def test_nothing_printed(kvattn, backend, capfd):
    """The library never prints (SPEC.md "Bad input"): a valid call, argument errors found in Python and in C,
    and a bad-data call leave stdout and stderr (file descriptors 1 and 2, where C output goes) empty."""
    args, d = base_args(backend)
    kvattn.flash_attn_varlen_func_with_kvcache(**args)
    bad_calls = [dict(args, softcap="x"), dict(args, window_size=(1, 2, 3)), dict(args, cache_seqlens=None)]
    if backend.name != "torch-cuda":  # data errors raise on the CPU (on CUDA they go to the device status)
        bad_calls.append(dict(args, cache_seqlens=backend.index([5, 100])))
    for bad in bad_calls:
        with pytest.raises(kvattn.KvattnError):
            kvattn.flash_attn_varlen_func_with_kvcache(**bad)
    c = kvattn.PagedKVCache(2, 4, 1, 8, "float16")
    with pytest.raises(kvattn.KvattnError):
        c.step([c.add_seq()], [100])
    out, err = capfd.readouterr()
    assert out == "" and err == "", f"printed: {out!r} {err!r}"


def test_requires_grad_scalars_are_refused(kvattn, backend):
    """softmax_scale and softcap given as tensors that require grad would leave the autograd graph through float()
    (fifty-eighth session, an audit): refused like tensor arguments; under no_grad they are taken as floats."""
    if backend.name == "numpy":
        pytest.skip("NumPy arrays have no autograd")
    import torch

    for name, value in (("softmax_scale", 0.25), ("softcap", 30.0)):
        args, d = base_args(backend)
        args[name] = torch.tensor(value, requires_grad=True)
        run_and_expect(kvattn, backend, args, kvattn.KvattnError, [f"{name}:", "requires grad"],
                       "KVATTN_ERR_UNSUPPORTED")
        with torch.no_grad():
            kvattn.flash_attn_varlen_func_with_kvcache(**args)


def test_softcap_that_is_zero_in_float32(kvattn):
    """A softcap that rounds to 0 in float32 (which the C library reads as off) is refused, as softmax_scale is."""
    import harness

    be = harness.NumpyBackend()
    args, d = base_args(be)
    args["softcap"] = 1e-46
    run_and_expect(kvattn, be, args, ValueError, ["softcap:", "float32"], "KVATTN_ERR_INVALID_ARGUMENT")


def test_cuda_helpers_without_a_device_say_so(kvattn):
    """With torch but no CUDA device, the status helpers raise KVATTN_ERR_NOT_AVAILABLE, not torch's RuntimeError."""
    torch = torch_or_skip()
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is visible")
    for fn in (kvattn.device_status, kvattn.workspace):
        with pytest.raises(kvattn.KvattnError) as info:
            fn()
        assert info.value.status_name == "KVATTN_ERR_NOT_AVAILABLE", str(info.value)


def test_a_library_that_is_not_kvattn(kvattn):
    """KVATTN_LIBRARY naming another shared library gives a clear ImportError, not an AttributeError."""
    import os
    import subprocess
    import sys

    other = None  # the C maths library this process has loaded (a full path, as KVATTN_LIBRARY takes)
    try:
        with open("/proc/self/maps") as f:
            other = next((line.split()[-1] for line in f if "/libm.so" in line or "/libm-" in line), None)
    except OSError:
        pass
    if other is None:
        pytest.skip("no libm path to point at")
    pkg_root = os.path.dirname(os.path.dirname(os.path.abspath(kvattn.__file__)))
    env = dict(os.environ, KVATTN_LIBRARY=other,
               PYTHONPATH=os.pathsep.join([pkg_root] + [p for p in [os.environ.get("PYTHONPATH")] if p]))
    code = "import kvattn"
    r = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True)
    assert r.returncode != 0 and "ImportError" in r.stderr and "not a kvattn library" in r.stderr, r.stderr


def test_library_errors_name_the_python_argument(kvattn, backend):
    """The C library's messages name kvattn_params fields (window_left, num_heads, rotary_dim, ...); where the
    field is not a Python argument, the error also says which argument it came from (sixty-first session: the
    message named only the C field). The C text itself is kept, first."""
    args, d = base_args(backend)
    q, kc, vc = args["q"], args["k_cache"], args["v_cache"]
    H3 = q[:, :3]  # 3 query heads over 2 KV heads
    F, G, V = (kvattn.flash_attn_varlen_func_with_kvcache, kvattn.flash_attn_with_kvcache,
               kvattn.flash_attn_varlen_func)
    wide_cos = backend.array(np.ones((64, 20)), "float32")  # R = 40 > head dim 32
    cases = [
        (lambda: F(**dict(args, window_size=(-2, -1))), "window_left", "window_size[0]"),
        (lambda: F(**dict(args, window_size=(0, -5))), "window_right", "window_size[1]"),
        (lambda: F(**dict(args, q=H3, out=None)), "num_heads", "q.shape[-2]"),
        (lambda: F(**dict(args, rotary_cos=wide_cos, rotary_sin=wide_cos)), "rotary_dim", "2 * rotary_cos.shape[1]"),
        (lambda: G(q[None, :1], kc, vc, cache_seqlens=1, window_size=(-3, -1)), "window_left", "window_size[0]"),
        (lambda: V(H3, kc[0], vc[0], args["cu_seqlens_q"], args["cu_seqlens_q"], 2, 2), "num_kv_heads",
         "k.shape[-2]"),
    ]
    for call, field, source in cases:
        with pytest.raises(kvattn.KvattnArgumentError) as info:
            call()
        e = info.value
        assert e.function == "kvattn_forward" or (backend.name == "torch-cuda" and
                                                  e.function == "kvattn_workspace_size"), str(e)
        assert e.message.startswith(kvattn.last_error()) and field in kvattn.last_error(), (e.message, field)
        assert f"{field} is {source}" in e.message, (e.message, field, source)


def test_sparse_and_nested_tensors_are_refused(kvattn, backend):
    """A tensor without strides (sparse, nested) is refused naming the argument, as a KvattnTypeError (sixty-first
    session: torch's own RuntimeError escaped, naming nothing)."""
    if backend.name == "numpy":
        pytest.skip("NumPy arrays are always strided")
    import torch

    args, d = base_args(backend)
    sparse = args["q"].float().to_sparse().to(args["q"].dtype) if backend.name == "torch-cpu" else None
    nested = torch.nested.nested_tensor([args["q"][:2], args["q"][2:]])
    for bad, what in ((sparse, "sparse"), (nested, "nested")):
        if bad is None:
            continue
        before = snapshot(backend, args)
        with pytest.raises(kvattn.KvattnTypeError) as info:
            kvattn.flash_attn_varlen_func_with_kvcache(**dict(args, q=bad))
        assert info.value.message.startswith("q: ") and what in info.value.message, str(info.value)
        assert snapshot(backend, args) == before
