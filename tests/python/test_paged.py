# test_paged.py — PagedKVCache: page bookkeeping (all-or-nothing steps, fork, free, fixed-width tables) and an
# inflight-batching generation loop (decode + new prompts + speculative steps, finished sequences replaced)
# whose every step is checked against the float64 reference, on every array backend.
import numpy as np
import pytest

import reference
from harness import fresh_rng, rounded


def make_cache(kvattn, be, num_pages, page_size, Hk, D, dtype="float16", **kw):
    if be.name == "numpy":
        return kvattn.PagedKVCache(num_pages, page_size, Hk, D, be.np_dtype(dtype), **kw)
    return kvattn.PagedKVCache(num_pages, page_size, Hk, D, getattr(be.torch, dtype), device=be.device, **kw)


def test_bookkeeping(kvattn, backend):
    c = make_cache(kvattn, backend, num_pages=6, page_size=4, Hk=2, D=8)
    assert tuple(c.k_cache.shape) == (6, 4, 2, 8) and c.free_pages == 6
    a, b = c.add_seq(), c.add_seq()
    bt, sl = c.step([a, b], [5, 3])
    bt, sl = backend.to64(bt).astype(int), backend.to64(sl).astype(int)
    assert list(sl) == [0, 0] and bt.shape == (2, 2)
    assert (bt[0] >= 0).all() and bt[1, 0] >= 0 and bt[1, 1] == -1
    assert len({*bt[0], bt[1, 0]}) == 3 and c.used_pages == 3 and c.seq_len(a) == 5
    # a step the pool cannot hold changes nothing
    with pytest.raises(kvattn.KvattnError) as info:
        c.step([a, b], [1, 20])
    assert info.value.status_name == "KVATTN_ERR_OUT_OF_PAGES" and "pages" in info.value.message
    assert c.seq_len(a) == 5 and c.seq_len(b) == 3 and c.free_pages == 3
    # fork shares whole pages; free returns only the unshared ones
    f = c.fork(a, 4)
    assert c.seq_len(f) == 4 and c.free_pages == 3
    bt2, sl2 = c.tables([a, f])
    bt2 = backend.to64(bt2).astype(int)
    assert bt2[0, 0] == bt2[1, 0] and list(backend.to64(sl2).astype(int)) == [5, 4]
    c.free(a)
    assert c.free_pages == 4  # a's second page; the shared first page stays with f
    c.free(f)
    c.free(b)
    assert c.free_pages == 6
    with pytest.raises(kvattn.KvattnError):
        c.free(b)
    with pytest.raises(ValueError):
        c.step([c.add_seq()] * 2, [1, 1])


def test_fixed_width_and_out_buffers(kvattn, backend):
    c = make_cache(kvattn, backend, num_pages=10, page_size=2, Hk=1, D=4, max_pages_per_seq=5)
    s = c.add_seq()
    bt, sl = c.step([s], [3])
    assert tuple(bt.shape) == (1, 5)
    bt_buf, sl_buf = backend.index(np.zeros((1, 7))), backend.index(np.zeros(1))
    res = c.tables([s], pending=[1], out=(bt_buf, sl_buf))
    assert res[0] is bt_buf and tuple(bt_buf.shape) == (1, 7)
    row = backend.to64(bt_buf).astype(int)[0]
    assert (row[:2] >= 0).all() and (row[2:] == -1).all() and int(backend.to64(sl_buf)[0]) == 2


def test_step_checks_everything_before_appending(kvattn, backend):
    """A step that a sequence's table width cannot hold (max_pages_per_seq, or out's width) changes nothing."""
    c = make_cache(kvattn, backend, num_pages=16, page_size=4, Hk=1, D=8, max_pages_per_seq=2)
    a, b = c.add_seq(), c.add_seq()
    with pytest.raises(ValueError) as info:
        c.step([a, b], [3, 9])  # b would need 3 pages
    assert "max_pages_per_seq" in str(info.value) and "3 pages" in str(info.value)
    assert (c.seq_len(a), c.seq_len(b), c.free_pages) == (0, 0, 16)
    bt_buf, sl_buf = backend.index(np.zeros((2, 1))), backend.index(np.zeros(2))
    with pytest.raises(ValueError, match="out"):
        c.step([a, b], [3, 5], out=(bt_buf, sl_buf))  # b would need 2 pages, out has 1 column
    assert (c.seq_len(a), c.seq_len(b), c.free_pages) == (0, 0, 16)
    bt, sl = c.step([a, b], [3, 5])
    assert [int(x) for x in backend.to64(sl)] == [0, 0] and (c.seq_len(a), c.seq_len(b)) == (3, 5)


def test_step_with_unwritable_out_changes_nothing(kvattn, backend):
    """out buffers that cannot take the tables (read-only, an expanded view, another device) are refused before
    the step appends anything."""
    c = make_cache(kvattn, backend, num_pages=8, page_size=2, Hk=1, D=8)
    a = c.add_seq()
    sl_buf = backend.index(np.zeros(1))
    if backend.name == "numpy":
        bt_buf = np.zeros((1, 4), np.int32)
        bt_buf.flags.writeable = False
        bad = [(bt_buf, sl_buf)]
    else:
        bad = [(backend.index(np.zeros((1, 4)))[:1].expand(3, 4), backend.index(np.zeros(3)))]
        if backend.device != "cpu":
            bad.append((backend.index(np.zeros((1, 4))).cpu(), sl_buf.cpu()))
    for out in bad:
        with pytest.raises(ValueError, match="out"):
            c.step([a], [3], out=out)
        assert (c.seq_len(a), c.free_pages) == (0, 8)


def test_step_out_as_an_iterator(kvattn, backend):
    """out given as a one-shot iterable is read once: the step fills the buffers (it used to append, then find the
    iterator empty in tables() and raise, leaving 3 tokens counted that no call would write)."""
    c = make_cache(kvattn, backend, num_pages=8, page_size=2, Hk=1, D=8)
    a = c.add_seq()
    bt_buf, sl_buf = backend.index(np.zeros((1, 4))), backend.index(np.zeros(1))
    res = c.step([a], [3], out=iter((bt_buf, sl_buf)))
    assert res[0] is bt_buf and res[1] is sl_buf
    assert (c.seq_len(a), c.free_pages) == (3, 6)
    row = backend.to64(bt_buf).astype(int)[0]
    assert (row[:2] >= 0).all() and (row[2:] == -1).all() and int(backend.to64(sl_buf)[0]) == 0


def test_numpy_dtype_spellings(kvattn):
    for spelling, name in (("f2", "float16"), ("half", "float16"), ("<f4", "float32"), ("e", "float16"),
                           (np.float32, "float32"), ("float16", "float16")):
        c = kvattn.PagedKVCache(2, 2, 1, 8, spelling)
        assert c.k_cache.dtype.name == name and c.v_cache.dtype.name == name
    with pytest.raises(TypeError, match="not a dtype"):
        kvattn.PagedKVCache(2, 2, 1, 8, "nonsense")


def test_ids_and_counts_past_int32(kvattn, backend):
    """ctypes would wrap 2**32 + id onto id: the page manager's int arguments are range-checked instead."""
    c = make_cache(kvattn, backend, num_pages=8, page_size=4, Hk=1, D=8)
    a = c.add_seq()
    c.step([a], [6])
    for bad in (lambda: c.free(2**32 + a), lambda: c.append(2**32 + a, 1), lambda: c.append(a, 2**32 + 1),
                lambda: c.step([2**32 + a], [1]), lambda: c.step([a], [2**32 + 1]), lambda: c.fork(2**32 + a, 4),
                lambda: c.tables([2**32 + a])):
        with pytest.raises(ValueError, match="int32"):
            bad()
    assert c.seq_len(a) == 6 and c.seq_len(2**32 + a) == -1 and c.seq_num_pages(2**32 + a) == -1
    assert c.free_pages == 6


def test_out_buffers_with_more_rows(kvattn, backend):
    """Graph buffers sized for a larger batch: rows past B become empty sequences (-1 pages, length 0)."""
    c = make_cache(kvattn, backend, num_pages=10, page_size=2, Hk=1, D=4, max_pages_per_seq=4)
    a, b = c.add_seq(), c.add_seq()
    c.step([a, b], [3, 1])
    bt_buf, sl_buf = backend.index(np.full((4, 4), 7)), backend.index(np.full(4, 7))
    c.tables([a, b], out=(bt_buf, sl_buf))
    bt, sl = backend.to64(bt_buf).astype(int), backend.to64(sl_buf).astype(int)
    assert (bt[0, :2] >= 0).all() and (bt[0, 2:] == -1).all() and bt[1, 0] >= 0 and (bt[1, 1:] == -1).all()
    assert (bt[2:] == -1).all() and list(sl) == [3, 1, 0, 0]
    with pytest.raises(ValueError, match="rows"):
        c.tables([a, b], out=(backend.index(np.zeros((1, 4))), backend.index(np.zeros(1))))
    with pytest.raises(TypeError, match="int32"):
        c.tables([a], out=(backend.array(np.zeros((1, 4)), "float32"), backend.index(np.zeros(1))))


def test_empty_step_with_fixed_width(kvattn, backend):
    """B = 0 is a valid no-op, also with the [0, W] table of a fixed width (NumPy 2 gives it strides (0, 0))."""
    c = make_cache(kvattn, backend, num_pages=4, page_size=2, Hk=1, D=8, max_pages_per_seq=3)
    bt, sl = c.step([], [])
    assert tuple(bt.shape) == (0, 3) and tuple(sl.shape) == (0,)
    q = backend.array(np.zeros((0, 2, 8)), "float16")
    out = kvattn.flash_attn_varlen_func_with_kvcache(q, c.k_cache, c.v_cache, backend.index([0]), 0,
                                                     cache_seqlens=sl, block_table=bt)
    assert tuple(out.shape) == (0, 2, 8)


def test_truncate(kvattn, backend):
    c = make_cache(kvattn, backend, num_pages=8, page_size=4, Hk=1, D=8)
    a = c.add_seq()
    c.append(a, 10)  # 3 pages
    assert c.used_pages == 3
    for bad in (11, -1):
        with pytest.raises(ValueError, match="n_tokens"):
            c.truncate(a, bad)
    with pytest.raises(ValueError, match="seq_id"):
        c.truncate(99, 0)
    assert c.seq_len(a) == 10 and c.used_pages == 3
    c.truncate(a, 5)  # keeps 2 pages, the second partial
    assert c.seq_len(a) == 5 and c.seq_num_pages(a) == 2 and c.used_pages == 2
    bt, sl = c.tables([a])
    assert int(backend.to64(sl)[0]) == 5
    # a fork shares page 1 and 2 (8 tokens): a cut inside them is refused and changes nothing, at 4 it is allowed
    c.append(a, 3)
    f = c.fork(a, 8)
    with pytest.raises(ValueError, match="share"):
        c.truncate(a, 6)
    assert c.seq_len(a) == 8 and c.used_pages == 2
    c.truncate(a, 4)
    assert c.used_pages == 2 and c.seq_num_pages(a) == 1
    c.free(a)
    c.free(f)
    assert c.free_pages == 8


def test_append_respects_max_pages_per_seq(kvattn, backend):
    c = make_cache(kvattn, backend, num_pages=10, page_size=2, Hk=1, D=4, max_pages_per_seq=3)
    s = c.add_seq()
    c.append(s, 5)
    with pytest.raises(ValueError, match="max_pages_per_seq"):
        c.append(s, 2)  # 4 pages
    assert c.seq_len(s) == 5 and c.used_pages == 3
    c.append(s, 1)  # fills page 3
    bt, _ = c.tables([s])
    assert tuple(bt.shape) == (1, 3)


def test_fork_default_names_the_partial_page(kvattn, backend):
    c = make_cache(kvattn, backend, num_pages=8, page_size=4, Hk=1, D=8)
    a = c.add_seq()
    c.append(a, 6)
    with pytest.raises(ValueError, match=r"not a multiple of page_size=4.*n_tokens=4"):
        c.fork(a)
    assert c.used_pages == 2
    f = c.fork(a, 4)
    assert c.seq_len(f) == 4
    c.append(a, 2)
    g = c.fork(a)  # 8 tokens: whole pages
    assert c.seq_len(g) == 8


def test_constructor_checks(kvattn):
    for kw, exc, word in ((dict(dtype=np.float64), TypeError, "dtype"), (dict(dtype=np.int8), TypeError, "dtype"),
                          (dict(head_dim=0), ValueError, "head_dim"), (dict(num_kv_heads=-1), ValueError,
                                                                       "num_kv_heads"),
                          (dict(max_pages_per_seq=0), ValueError, "max_pages_per_seq")):
        args = dict(num_pages=4, page_size=2, num_kv_heads=1, head_dim=8, dtype=np.float16)
        args.update(kw)
        with pytest.raises(exc, match=word):
            kvattn.PagedKVCache(**args)


@pytest.mark.parametrize("page_size", [1, 3, 16])
def test_generation_loop(kvattn, backend, page_size):
    """Inflight batching: each step has decoding sequences, a new prompt or a few speculative tokens; a
    finished sequence frees its pages and a new prompt takes its slot. Every step is checked."""
    dtype = "float16"
    tol = 4e-3 if backend.name == "torch-cuda" else 2e-3
    H, Hk, D = 4, 2, 32
    rng = fresh_rng(4000 + page_size)
    c = make_cache(kvattn, backend, num_pages=200 // page_size + 40, page_size=page_size, Hk=Hk, D=D, dtype=dtype)
    hist = {}  # seq id -> (keys [n, Hk, D], values) float64 as stored
    budget = {}

    def new_seq():
        s = c.add_seq()
        hist[s] = (np.zeros((0, Hk, D)), np.zeros((0, Hk, D)))
        budget[s] = int(rng.integers(2, 6))
        return s

    live = [new_seq() for _ in range(3)]
    first = {s: True for s in live}
    truncated = [0]
    for step in range(8):
        n_new, prompt_step = [], []
        for s in live:
            prompt_step.append(first.pop(s, False))
            if prompt_step[-1]:
                n_new.append(int(rng.integers(1, 40)))  # prompt
            else:
                n_new.append(int(rng.choice([1, 1, 3])))  # decode or speculative verify
        if step >= 4 and truncated[0] == 0 and not any(n == 3 and not p for n, p in zip(n_new, prompt_step)) \
                and not all(prompt_step):
            n_new[prompt_step.index(False)] = 3  # at least one verification with dropped tokens per run
        bt, sl = c.step(live, n_new)
        cu = np.concatenate([[0], np.cumsum(n_new)]).astype(np.int32)
        T = int(cu[-1])
        q64 = rounded(backend, rng.standard_normal((T, H, D)), dtype)
        k64 = rounded(backend, rng.standard_normal((T, Hk, D)), dtype)
        v64 = rounded(backend, rng.standard_normal((T, Hk, D)), dtype)
        out, lse = kvattn.flash_attn_varlen_func_with_kvcache(
            backend.array(q64, dtype), c.k_cache, c.v_cache, backend.index(cu), max(n_new),
            k=backend.array(k64, dtype), v=backend.array(v64, dtype), cu_seqlens_k=backend.index(cu),
            cache_seqlens=sl, block_table=bt, causal=True, return_softmax_lse=True)
        got, got_lse = backend.to64(out), backend.to64(lse)
        for b, s in enumerate(live):
            K, V = hist[s]
            lo, hi = cu[b], cu[b + 1]
            o, l, ak, av = reference.sequence(q64[lo:hi], np.concatenate([K, np.zeros((n_new[b], Hk, D))]),
                                              np.concatenate([V, np.zeros((n_new[b], Hk, D))]), K.shape[0], 0,
                                              k64[lo:hi], v64[lo:hi], causal=True)
            np.testing.assert_allclose(got[lo:hi], o, atol=tol, rtol=tol, err_msg=f"step {step} seq {s}")
            np.testing.assert_allclose(got_lse[:, lo:hi], l, atol=2 * tol, rtol=2 * tol)
            hist[s] = (np.concatenate([K, ak]), np.concatenate([V, av]))
        # the whole cache of every live sequence, read back through its pages
        bt_np = backend.to64(bt).astype(int)
        kc, vc = backend.to64(c.k_cache), backend.to64(c.v_cache)
        for b, s in enumerate(live):
            K, V = hist[s]
            pos = np.arange(K.shape[0])
            pages = bt_np[b, pos // page_size]
            assert np.array_equal(kc[pages, pos % page_size], K) and np.array_equal(vc[pages, pos % page_size], V)
        # speculative verification: a sequence that took 3 tokens keeps 1 or 2 of them (truncate drops the rest;
        # the next step appends over the dropped rows)
        for b, s in enumerate(live):
            if n_new[b] == 3 and not prompt_step[b]:
                drop = int(rng.integers(1, 3))
                K, V = hist[s]
                c.truncate(s, K.shape[0] - drop)
                hist[s] = (K[:K.shape[0] - drop], V[:V.shape[0] - drop])
                assert c.seq_len(s) == hist[s][0].shape[0]
                truncated[0] += drop
        # finished sequences free their pages; new prompts take their slots
        for i, s in enumerate(list(live)):
            budget[s] -= 1
            if budget[s] == 0:
                c.free(s)
                del hist[s]
                ns = new_seq()
                live[i] = ns
                first[ns] = True
    assert truncated[0] > 0, "no speculative token was dropped: the draw should be widened"
    for s in live:
        c.free(s)
    assert c.free_pages == c.num_pages


def test_copy_and_pickle_are_refused(kvattn, backend):
    """A copy would share the C page manager and destroy it twice (fifty-eighth session, an audit: use after free,
    then an abort): copy, deepcopy and pickle raise a TypeError, and the cache keeps working."""
    import copy
    import pickle

    c = make_cache(kvattn, backend, num_pages=4, page_size=2, Hk=1, D=8)
    a = c.add_seq()
    c.append(a, 3)
    for fn in (copy.copy, copy.deepcopy, pickle.dumps):
        with pytest.raises(TypeError, match="PagedKVCache"):
            fn(c)
    assert c.seq_len(a) == 3 and c.used_pages == 2


def test_wide_out_keeps_max_pages_per_seq(kvattn, backend):
    """out wider than max_pages_per_seq takes the tables, but a step past the cache's own cap is refused and changes
    nothing (it used to pass, leaving a sequence that tables() could not fill)."""
    c = make_cache(kvattn, backend, num_pages=16, page_size=4, Hk=1, D=8, max_pages_per_seq=2)
    a = c.add_seq()
    bt_buf, sl_buf = backend.index(np.zeros((1, 8))), backend.index(np.zeros(1))
    with pytest.raises(ValueError, match="max_pages_per_seq"):
        c.step([a], [12], out=(bt_buf, sl_buf))  # 3 pages
    assert (c.seq_len(a), c.free_pages) == (0, 16)
    bt, sl = c.step([a], [8], out=(bt_buf, sl_buf))  # 2 pages: fits both
    assert [int(x) for x in backend.to64(bt)[0][2:]] == [-1] * 6


def test_step_with_inference_tensors_outside_inference_mode(kvattn, backend):
    """out buffers made under torch.inference_mode() cannot be updated outside it: refused before the step appends."""
    if backend.name == "numpy":
        pytest.skip("NumPy arrays have no inference mode")
    torch = backend.torch
    c = make_cache(kvattn, backend, num_pages=8, page_size=2, Hk=1, D=8)
    a = c.add_seq()
    with torch.inference_mode():
        bt_buf = torch.zeros((1, 4), dtype=torch.int32, device=backend.device)
        sl_buf = torch.zeros(1, dtype=torch.int32, device=backend.device)
    assert bt_buf.is_inference()
    with pytest.raises(ValueError, match="inference"):
        c.step([a], [3], out=(bt_buf, sl_buf))
    assert (c.seq_len(a), c.free_pages) == (0, 8)
    with torch.inference_mode():
        c.step([a], [3], out=(bt_buf, sl_buf))
    assert c.seq_len(a) == 3


def test_step_scalars_are_a_type_error(kvattn, backend):
    c = make_cache(kvattn, backend, num_pages=8, page_size=2, Hk=1, D=8)
    a = c.add_seq()
    with pytest.raises(kvattn.KvattnTypeError, match="seq_ids"):
        c.step(a, 5)
    assert c.seq_len(a) == 0


def test_numpy_cache_with_a_torch_cpu_device(kvattn):
    torch = pytest.importorskip("torch")
    c = kvattn.PagedKVCache(4, 2, 1, 8, np.float16, device=torch.device("cpu"))
    assert c.kind == "numpy" and isinstance(c.k_cache, np.ndarray)
    with pytest.raises(ValueError, match="device"):
        kvattn.PagedKVCache(4, 2, 1, 8, np.float16, device=torch.device("meta"))
