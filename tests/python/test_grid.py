# test_grid.py — the three functions against the float64 reference on every array backend (NumPy, torch
# CPU, torch CUDA): paged page sizes 1/3/16 and contiguous caches, GQA/MQA, causal/window/softcap/ALiBi,
# rotary in both pairings, leftpad, cache_batch_idx, strided views, empty rows, lse.
import pytest

from harness import HAVE_BF16_NUMPY, Case, check


def grid():
    cases = []
    # layouts x page sizes x dtypes, GQA, both entry points with a cache
    for fn in ("varlen_kv", "kv"):
        for layout, ps in (("paged", 1), ("paged", 3), ("paged", 16), ("contig", 0)):
            for dtype in ("float16", "float32", "bfloat16"):
                if fn == "kv":
                    nq, nn, S = (2, 2, 2), (2, 2, 2), (0, 13, 40)
                else:
                    nq, nn, S = (1, 7, 0, 3), (1, 7, 2, 3), (33, 0, 5, 97)
                cases.append(Case(fn=fn, n_q=nq, n_new=nn, S=S, layout=layout, page_size=ps, dtype=dtype,
                                  causal=True, seed=len(cases)))
    # heads: MHA, GQA, MQA; head dims
    for H, Hk, D in ((4, 4, 64), (8, 2, 32), (6, 1, 128), (4, 2, 80), (2, 1, 59)):
        cases.append(Case(H=H, Hk=Hk, D=D, n_q=(3, 1), n_new=(3, 1), S=(20, 35), causal=True, page_size=16,
                          seed=len(cases)))
    # masks and score options
    for causal, window, softcap, alibi in ((False, (-1, -1), 0.0, None), (True, (4, -1), 0.0, None),
                                           (False, (3, 2), 0.0, None), (False, (-1, -1), 5.0, None),
                                           (True, (-1, -1), 0.0, "H"), (False, (-1, -1), 0.0, "BH"),
                                           (True, (6, 0), 3.0, "H"), (True, (5, 3), 0.0, None)):
        # (the last: causal with window_right > 0, where causal's right edge of 0 wins)
        for dtype in ("float16", "float32"):
            cases.append(Case(n_q=(1, 5, 9), n_new=(1, 5, 9), S=(30, 3, 0), causal=causal, window=window,
                              softcap=softcap, alibi=alibi, dtype=dtype, seed=len(cases)))
    # rotary: both pairings, full and partial rotary dim, cos/sin in fp32 or q's dtype; also with leftpad
    for R, inter, cdt in ((32, True, "float32"), (32, False, "float32"), (16, True, "same"), (8, False, "same")):
        for layout in ("paged", "contig"):
            cases.append(Case(n_q=(2, 1, 4), n_new=(2, 1, 4), S=(9, 0, 21), rotary=(R, inter, cdt), causal=True,
                              layout=layout, page_size=3, seed=len(cases)))
        cases.append(Case(fn="kv", n_q=(3, 3), n_new=(3, 3), S=(4, 10), rotary=(R, inter, cdt), causal=False,
                          layout="contig", seed=len(cases)))
    # rotary without new tokens (queries only), non-causal queries at bottom-right positions
    cases.append(Case(n_q=(2, 3), n_new=(0, 0), S=(5, 7), rotary=(32, True, "float32"), seed=len(cases)))
    # leftpad and cache_batch_idx (contiguous), with and without causal
    for causal in (False, True):
        cases.append(Case(layout="contig", batch_idx=True, L=(2, 0, 5), n_q=(1, 4, 2), n_new=(1, 4, 2),
                          S=(6, 3, 5), causal=causal, seed=len(cases)))
        cases.append(Case(layout="paged", page_size=3, L=(4, 1), n_q=(3, 2), n_new=(3, 2), S=(7, 1),
                          causal=causal, rotary=(16, False, "float32"), seed=len(cases)))
    # empty rows (more queries than keys under causal: lse = -inf, out = 0), empty sequences, no new tokens
    cases.append(Case(n_q=(5, 0, 2), n_new=(2, 0, 0), S=(0, 4, 0), causal=True, seed=len(cases)))
    cases.append(Case(n_q=(0, 0), n_new=(3, 2), S=(1, 2), seed=len(cases)))
    cases.append(Case(n_q=(), n_new=(), S=(), seed=len(cases)))
    # caches and queries as views into bigger buffers; HND storage
    for view in ("padded", "hnd"):
        for layout in ("paged", "contig"):
            cases.append(Case(view=view, layout=layout, n_q=(2, 3), n_new=(2, 3), S=(11, 4), causal=True,
                              page_size=3, seed=len(cases)))
    cases.append(Case(fn="kv", view="padded", n_q=(2, 2), n_new=(1, 1), S=(11, 4), causal=True, seed=len(cases)))
    # flash_attn_varlen_func: packed and paged keys, causal with n_q != n_k, window, alibi, lse
    for layout in ("contig", "paged"):
        for causal, window, alibi in ((True, (-1, -1), None), (False, (-1, -1), "H"), (False, (2, 1), None)):
            for dtype in ("float16", "float32"):
                cases.append(Case(fn="varlen", layout=layout, page_size=3, n_q=(3, 1, 0, 6), n_new=(0, 0, 0, 0),
                                  S=(5, 1, 3, 6), causal=causal, window=window, alibi=alibi, dtype=dtype,
                                  seed=len(cases)))
    cases.append(Case(fn="varlen", layout="contig", view="padded", n_q=(4, 2), S=(4, 9), n_new=(0, 0),
                      causal=True, seed=len(cases)))
    # lengths that miss tile sizes, explicit scale, num_splits
    cases.append(Case(n_q=(97, 1), n_new=(97, 1), S=(0, 129), causal=True, page_size=16, D=64, scale=0.3,
                      seed=len(cases)))
    cases.append(Case(n_q=(1, 1, 1), n_new=(1, 1, 1), S=(300, 17, 1025), num_splits=4, page_size=16, D=64,
                      seed=len(cases)))
    return cases


CASES = grid()


def _id(c):
    parts = [c.fn, c.dtype, f"{c.layout}{c.page_size if c.layout == 'paged' else ''}", f"H{c.H}k{c.Hk}D{c.D}"]
    for flag, name in ((c.causal, "causal"), (c.window != (-1, -1), f"win{c.window}"), (c.softcap, "softcap"),
                       (c.alibi, f"alibi{c.alibi}"), (c.rotary, f"rot{c.rotary}"), (c.L, "leftpad"),
                       (c.batch_idx, "bidx"), (c.view != "plain", c.view)):
        if flag:
            parts.append(name)
    return "-".join(parts) + f"-s{c.seed}"


@pytest.mark.parametrize("case", CASES, ids=[_id(c) for c in CASES])
def test_grid(kvattn, backend, case):
    if case.dtype == "bfloat16" and backend.name == "numpy" and not HAVE_BF16_NUMPY:
        pytest.skip("bfloat16 with NumPy needs ml_dtypes")
    if case.dtype == "float32" and backend.name == "torch-cuda":
        pytest.skip("float32 is CPU-only in kvattn")
    check(kvattn, case, backend)
