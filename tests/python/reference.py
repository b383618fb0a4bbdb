# reference.py — the naive float64 reference of SPEC.md, written in NumPy from the spec alone (it shares no
# code with the library): one sequence at a time, all scores materialized, then softmax.
# H query heads, Hk key/value heads, D head dim, R rotary dim.
import numpy as np


def rope(x, positions, cos, sin, interleaved):
    """Rotates the first R = 2 * cos.shape[1] channels of x [n, heads, D] at the given absolute positions.
    interleaved: pairs (2i, 2i+1) (GPT-J); else pairs (i, i + R/2) (GPT-NeoX)."""
    x = np.array(x, dtype=np.float64, copy=True)
    if cos is None or x.shape[0] == 0:
        return x
    half = cos.shape[1]
    c = np.asarray(cos, np.float64)[positions][:, None, :]  # [n, 1, R/2]
    s = np.asarray(sin, np.float64)[positions][:, None, :]
    if interleaved:
        x1, x2 = x[..., 0:2 * half:2].copy(), x[..., 1:2 * half:2].copy()
        x[..., 0:2 * half:2] = x1 * c - x2 * s
        x[..., 1:2 * half:2] = x1 * s + x2 * c
    else:
        x1, x2 = x[..., :half].copy(), x[..., half:2 * half].copy()
        x[..., :half] = x1 * c - x2 * s
        x[..., half:2 * half] = x1 * s + x2 * c
    return x


def sequence(q, cache_k, cache_v, S, L=0, k_new=None, v_new=None, *, scale=None, causal=False, window=(-1, -1),
             softcap=0.0, slopes=None, cos=None, sin=None, interleaved=True, store=lambda x: x, sens=False):
    """One sequence of SPEC.md "What one call does".

    q [n_q, H, D]; cache_k/cache_v [C, Hk, D]: the sequence's logical cache (position p at row p) before the
    call; S tokens already in it, positions < L ignored; k_new/v_new [n_new, Hk, D]; slopes [H] or None;
    store: rounds a value to the cache's element type (what the cache really holds after the append).
    Returns (out [n_q, H, D], lse [H, n_q], appended_k [n_new, Hk, D], appended_v [n_new, Hk, D]); with
    sens=True also (q_sens [n_q, H], v_max [n_q, H]) for the check's rounding term: q_sens = scale x the
    largest sum over rotated channels c of |rope(q)_c k_c| over the visible keys (0 without rotary), so a
    rounding of the rotated query by u/2 relative moves each score by at most (u/2) q_sens (softcap's tanh has
    slope <= 1), and v_max = the largest |v| over the visible keys."""
    q = np.asarray(q, np.float64)
    n_q, H, D = q.shape
    Hk = cache_k.shape[1]
    n_new = 0 if k_new is None else k_new.shape[0]
    keys = np.array(cache_k, np.float64, copy=True)
    vals = np.array(cache_v, np.float64, copy=True)
    # 2. append: position S + t receives rope(k_new[t], S + t) and v_new[t]
    app_k = store(rope(k_new, np.arange(S, S + n_new), cos, sin, interleaved)) if n_new else np.zeros((0, Hk, D))
    app_v = store(np.asarray(v_new, np.float64)) if n_new else np.zeros((0, Hk, D))
    keys[S:S + n_new] = app_k
    vals[S:S + n_new] = app_v
    # 3. attend over positions [L, S + n_new); query i sits at key index i + s_k - n_q
    s_k = S + n_new - L
    keys, vals = keys[L:S + n_new], vals[L:S + n_new]
    qpos = np.arange(n_q) + s_k - n_q
    qr = rope(q, S + n_new - n_q + np.arange(n_q), cos, sin, interleaved) if cos is not None else q
    if scale is None:
        scale = 1.0 / np.sqrt(D)
    j = np.arange(s_k)
    visible = np.ones((n_q, s_k), dtype=bool)
    left, right = window
    if causal:
        right = 0
    if right >= 0:
        visible &= j[None, :] <= qpos[:, None] + right
    if left >= 0:
        visible &= j[None, :] >= qpos[:, None] - left
    out = np.zeros((n_q, H, D))
    lse = np.full((H, n_q), -np.inf)
    q_sens = np.zeros((n_q, H))
    v_max = np.zeros((n_q, H))
    R = 2 * cos.shape[1] if cos is not None else 0
    group = H // Hk
    for h in range(H):
        kh = h // group
        score = scale * (qr[:, h, :] @ keys[:, kh, :].T)  # [n_q, s_k]
        if softcap > 0:
            score = softcap * np.tanh(score / softcap)
        if slopes is not None:
            score = score - slopes[h] * np.abs(qpos[:, None] - j[None, :])
        score = np.where(visible, score, -np.inf)
        for i in range(n_q):
            if not visible[i].any():
                continue  # empty row: out = 0, lse = -inf
            m = score[i].max()
            e = np.exp(score[i] - m)
            lse[h, i] = m + np.log(e.sum())
            out[i, h] = (e / e.sum()) @ vals[:, kh, :]
            if sens:
                vis = visible[i]
                if R:
                    q_sens[i, h] = scale * np.abs(qr[i, h, None, :R] * keys[vis, kh, :R]).sum(axis=1).max()
                v_max[i, h] = np.abs(vals[vis, kh, :]).max()
    if sens:
        return out, lse, app_k, app_v, q_sens, v_max
    return out, lse, app_k, app_v
