# attention.py — the three flash-attention-compatible entry points. Each one turns its arguments into one
# kvattn_params (SPEC.md "Inputs of one call") and makes one kvattn_forward call: CPU tensors and NumPy arrays
# go to the CPU backend, CUDA tensors to the CUDA backend on torch's current stream.
# B sequences, H query heads, Hk key/value heads, D head dim.
import ctypes
import operator
import re
import sys

from . import _cuda
from ._arrays import (Call, need_float, need_index_vector, need_int32, need_last_contiguous, need_ndim,
                      need_same_dtype, need_writable)
import numpy as np

from ._lib import (BACKEND_CPU, ERR_BAD_DATA, ERR_UNSUPPORTED, INT32_MAX, INT32_MIN, KvattnArgumentError, KvattnError,
                   KvattnTypeError, check, lib, names_errors)

_DIFFERENCES = """
    Differences from flash-attention (kvattn's docs/SPEC.md, "Positions of the design"):

    - Every query row is placed by bottom-right alignment, causal or not: query i of a sequence with n_q
      queries sits at absolute position S + n_new - n_q + i (S = cache_seqlens, n_new = new tokens). This is
      its rotary position and the position that causal/window masks and ALiBi use. flash-attention rotates
      query i at S + i in a causal or local call and every query at S otherwise: the rotary positions agree
      only in a causal or local call with n_new = n_q.
    - With causal ALiBi, lse is that of the documented bias -slope * |i + S_k - S_q - j|; flash-attention's
      kernel returns an lse larger by slope * (i + S_k - S_q) (out agrees).
    - Where flash-attention adjusts an argument, kvattn refuses it naming it: a last dimension that is not
      contiguous, window_size entries < -1, softcap < 0, num_splits < 0, a negative softmax_scale.
    - A query row that sees no key gets out = 0 and lse = -inf (the log of an empty sum); flash-attention
      returns lse = +inf there.
    - page_size (k_cache.shape[1] with block_table) may be any integer >= 1; no multiple is required.
    - softmax_lse is float32 natural-log LSE: [B, H, Sq] for the fixed-length function and [H, total_q] for
      the varlen functions, as in flash-attention 2.
    - rotary_cos/sin may be given without k/v (then only the queries are rotated); their dtype is float32 or
      q's dtype. Rotary covers the first R = 2 * rotary_cos.shape[1] channels.
    - float32 tensors work on the CPU only; CUDA takes float16 and bfloat16.
    - Forward only: no autograd, no dropout. Results are deterministic (bitwise) run to run;
      batch_invariant=True also makes a sequence's results independent of the rest of the batch.
    - Index tensors (cu_seqlens_*, cache_seqlens, cache_batch_idx, cache_leftpad, block_table) must be int32
      and contiguous (block_table: its last dimension); nothing is converted silently.
    - Data-dependent errors (lengths past the capacity, a bad page index, leftpad > cache_seqlens, ...): on
      the CPU the call raises KvattnError(KVATTN_ERR_BAD_DATA) and changes nothing; on CUDA the host never
      reads device data, so the failing sequence is skipped (its cache rows and outputs untouched), the other
      sequences are computed, and the failure is recorded in the device status: read it with
      kvattn.device_status() / kvattn.check_device_status() (synchronizing) or device_status_tensor().
    - CUDA calls run on torch.cuda.current_stream() with a workspace cached per device and stream, so calls on
      two streams may run at the same time. They are capturable in a CUDA graph: captured calls use the
      device's graph workspace (allocated from the graph's pool if the capture finds it too small, or before
      with kvattn.reserve_workspace(n, graph=True)). Passing an int as cache_seqlens (or None) creates a small
      tensor each call; pass an int32 tensor inside graphs.
    - Forward only: with grad mode on, an input tensor that requires grad is refused (KVATTN_ERR_UNSUPPORTED);
      call under torch.no_grad() or torch.inference_mode().
"""


def _opt_int(name, value):
    # operator.index, not int(): 2.7 or "3" is a caller's mistake, not a window of 2 or 3 (NumPy integers and
    # one-element integer tensors are ints)
    try:
        return operator.index(value)
    except TypeError:
        raise KvattnTypeError(f"{name}: expected an int, got {value!r}") from None


def _floats(call, q, others):
    need_float(q)
    for a in others:
        if a is not None:
            need_same_dtype(a, q)
    for a in (q,) + tuple(others):
        if a is not None:
            need_last_contiguous(a)


def _set_cache(p, call, q, kc, vc, block_table, cache_batch_idx, B, writes, b_from="q's batch"):
    """k_cache/v_cache, contiguous [B_cache, C, Hk, D] or paged [num_pages, page_size, Hk, D]. Returns capacity.
    writes: the call appends new tokens (only then must the caches be writable)."""
    D = q.shape[-1]
    if block_table is not None:
        need_ndim(kc, 4, "[num_pages, page_size, Hk, D] (paged: block_table is given)")
    else:
        need_ndim(kc, 4, "[B_cache, seqlen_cache, Hk, D]")
    if vc.shape != kc.shape:
        raise KvattnArgumentError(f"{vc.name}: shape {list(vc.shape)} differs from {kc.name}'s {list(kc.shape)}")
    if kc.shape[3] != D:
        raise KvattnArgumentError(f"{kc.name}: head dim {kc.shape[3]} differs from q's head dim {D}")
    if writes:
        need_writable(kc)
        need_writable(vc)
    p.num_kv_heads = kc.shape[2]
    p.k_cache, p.v_cache = kc.ptr, vc.ptr
    p.k_batch_stride, p.k_row_stride, p.k_head_stride = kc.strides[:3]
    p.v_batch_stride, p.v_row_stride, p.v_head_stride = vc.strides[:3]
    if block_table is not None:
        bt = block_table
        need_int32(bt)
        need_ndim(bt, 2, "[B, max_pages_per_seq]")
        if bt.shape[0] != B:
            raise KvattnArgumentError(f"block_table: has {bt.shape[0]} rows but the batch has B={B} sequences "
                                      f"(from {b_from})")
        if bt.numel > 0 and bt.shape[1] > 1 and bt.strides[1] != 1:
            raise KvattnArgumentError(f"block_table: the last dimension must be contiguous, got strides "
                                      f"{list(bt.strides)}")
        if bt.shape[0] > 1 and bt.strides[0] < bt.shape[1]:
            raise KvattnArgumentError(f"block_table: row stride {bt.strides[0]} is less than its width {bt.shape[1]} "
                                      f"(rows that overlap, e.g. a broadcast view); pass one stored row per sequence")
        if cache_batch_idx is not None:
            raise KvattnArgumentError("cache_batch_idx: not supported with a paged cache (block_table is given)")
        p.block_table = bt.ptr
        p.block_table_batch_stride = bt.strides[0] if bt.shape[0] > 1 else bt.shape[1]
        p.max_pages_per_seq = bt.shape[1]
        p.num_pages, p.page_size = kc.shape[0], kc.shape[1]
        return bt.shape[1] * kc.shape[1]
    need_index_vector(cache_batch_idx, B, "one cache row per sequence")
    if cache_batch_idx is None and kc.shape[0] < B:
        raise KvattnArgumentError(f"{kc.name}: has {kc.shape[0]} cache rows but the batch has B={B} sequences (from "
                                  f"{b_from}) and cache_batch_idx is not given")
    p.cache_batch, p.cache_capacity = kc.shape[0], kc.shape[1]
    if cache_batch_idx is not None:
        p.cache_batch_idx = cache_batch_idx.ptr
    return kc.shape[1]


def _set_seqlens(p, call, cache_seqlens, B, capacity, have_new, b_from="q's batch"):
    """cache_seqlens: an int32 tensor [B], an int (all sequences), or None (every cache is full). b_from says
    where B came from, for the message of a wrong length (a short cu_seqlens_q shows up here)."""
    if cache_seqlens is None:
        if have_new:
            raise KvattnArgumentError("cache_seqlens: required when k/v (new tokens) are given")
        value = capacity
    elif isinstance(cache_seqlens, (bool, np.bool_)):
        raise KvattnTypeError(f"cache_seqlens: expected an int32 tensor [B] or an int, got {cache_seqlens!r}")
    elif isinstance(cache_seqlens, (int, np.integer)):
        value = _opt_int("cache_seqlens", cache_seqlens)
        if not INT32_MIN <= value <= INT32_MAX:
            raise KvattnArgumentError(f"cache_seqlens: {value} does not fit the C library's int32")
    else:
        a = call.add(cache_seqlens, "cache_seqlens")
        need_index_vector(a, B, f"tokens already in each cache; B={B} from {b_from}")
        p.cache_seqlens = a.ptr
        return
    arr = call.full((B,), value)
    call.keep.append(arr)
    p.cache_seqlens = call.add(arr, "cache_seqlens").ptr


def _set_new(p, kn, vn, Hk, D, fixed_B=None):
    if (kn is None) != (vn is None):
        raise KvattnArgumentError("k/v: the new keys and values must be given together "
                                  f"(k={'set' if kn is not None else 'None'}, v={'set' if vn is not None else 'None'})")
    if kn is None:
        return
    if fixed_B is not None:
        need_ndim(kn, 4, "[B, seqlen_new, Hk, D]")
        if kn.shape[0] != fixed_B:
            raise KvattnArgumentError(f"k: batch {kn.shape[0]} differs from q's batch {fixed_B}")
    else:
        need_ndim(kn, 3, "[total_new, Hk, D]")
    if vn.shape != kn.shape:
        raise KvattnArgumentError(f"v: shape {list(vn.shape)} differs from k's {list(kn.shape)}")
    if kn.shape[-2] != Hk or kn.shape[-1] != D:
        raise KvattnArgumentError(f"k: shape {list(kn.shape)} must end with [Hk={Hk}, D={D}] like k_cache")
    p.k_new, p.v_new = kn.ptr, vn.ptr
    if fixed_B is not None:
        p.seqlen_knew = kn.shape[1]
        p.knew_batch_stride, p.knew_row_stride, p.knew_head_stride = kn.strides[:3]
        p.vnew_batch_stride, p.vnew_row_stride, p.vnew_head_stride = vn.strides[:3]
    else:
        p.total_knew = kn.shape[0]
        p.knew_row_stride, p.knew_head_stride = kn.strides[:2]
        p.vnew_row_stride, p.vnew_head_stride = vn.strides[:2]


def _set_rotary(p, q, cos, sin, interleaved):
    if (cos is None) != (sin is None):
        raise KvattnArgumentError("rotary_cos/rotary_sin: must be given together")
    p.rotary_interleaved = 1 if interleaved else 0
    if cos is None:
        return
    for a in (cos, sin):
        need_ndim(a, 2, "[max_pos, rotary_dim / 2]")
        need_last_contiguous(a)
        if a.dtype not in ("float32", q.dtype):
            raise KvattnTypeError(f"{a.name}: dtype {a.dtype} must be float32 or q's dtype {q.dtype}")
    if sin.shape != cos.shape:
        raise KvattnArgumentError(f"rotary_sin: shape {list(sin.shape)} differs from rotary_cos's {list(cos.shape)}")
    if sin.dtype != cos.dtype:
        raise KvattnTypeError(f"rotary_sin: dtype {sin.dtype} differs from rotary_cos's {cos.dtype}")
    row_stride = cos.strides[0] if cos.shape[0] > 1 else cos.shape[1]
    if cos.shape[0] > 1 and row_stride == 0:
        # the C layer reads rotary_row_stride = 0 as "rotary_dim / 2": a broadcast table (one row expanded to
        # max_pos rows) would then be read past its one stored row
        raise KvattnArgumentError(f"{cos.name}: row stride 0 (a broadcast [max_pos, R/2] view) is not supported; "
                                  f"pass a table with one stored row per position (e.g. .contiguous())")
    if cos.shape[0] > 1 and sin.strides[0] != cos.strides[0]:
        raise KvattnArgumentError(f"rotary_sin: row stride {sin.strides[0]} differs from rotary_cos's "
                                  f"{cos.strides[0]} (kvattn takes one stride for both)")
    p.rotary_cos, p.rotary_sin = cos.ptr, sin.ptr
    p.rotary_dtype = cos.dtype_code()
    p.rotary_dim = 2 * cos.shape[1]
    p.rotary_max_pos = cos.shape[0]
    p.rotary_row_stride = row_stride


def _no_grad_scalar(name, value):
    """A float argument given as a torch tensor that requires grad would leave the autograd graph through float():
    refused, as tensor arguments that require grad are."""
    torch = sys.modules.get("torch")
    if (torch is not None and isinstance(value, torch.Tensor) and value.requires_grad
            and torch.is_grad_enabled()):
        raise KvattnError(ERR_UNSUPPORTED, f"{name}: requires grad, but kvattn computes the forward pass only (no "
                                           f"backward); call it under torch.no_grad() or torch.inference_mode(), or "
                                           f"pass {name}.detach() or a float")


def _set_options(p, B, H, alibi, softmax_scale, causal, window_size, softcap, num_splits, batch_invariant):
    _no_grad_scalar("softmax_scale", softmax_scale)
    _no_grad_scalar("softcap", softcap)
    if alibi is not None:
        if alibi.dtype != "float32":
            raise KvattnTypeError(f"alibi_slopes: dtype {alibi.dtype} must be float32")
        need_last_contiguous(alibi)
        if alibi.shape == (H,):
            p.alibi_batch_stride = 0
        elif alibi.shape == (B, H):
            p.alibi_batch_stride = alibi.strides[0] if B > 1 else H
        else:
            raise KvattnArgumentError(f"alibi_slopes: expected shape [H={H}] or [B={B}, H={H}], got "
                                      f"{list(alibi.shape)}")
        p.alibi_slopes = alibi.ptr
    if softmax_scale is not None:
        try:
            scale = float(softmax_scale)
        except (TypeError, ValueError):
            raise KvattnTypeError(f"softmax_scale: expected a float or None, got {softmax_scale!r}") from None
        if ctypes.c_float(scale).value == 0.0:
            # the C field holds 0 for "the default 1/sqrt(D)", so a scale of 0 cannot be passed through it
            raise KvattnArgumentError(f"softmax_scale: {softmax_scale!r} is 0 in float32, which kvattn does not take "
                                      f"(the C library reads 0 as the default 1/sqrt(D)); pass None for the default")
        p.softmax_scale = scale
    try:
        left, right = window_size
    except (TypeError, ValueError):
        raise KvattnArgumentError(f"window_size: expected a pair (left, right), got {window_size!r}") from None
    p.window_left, p.window_right = _opt_int("window_size[0]", left), _opt_int("window_size[1]", right)
    p.causal = 1 if causal else 0
    try:
        cap = float(softcap or 0.0)
    except (TypeError, ValueError):
        raise KvattnTypeError(f"softcap: expected a float (0 = off), got {softcap!r}") from None
    if cap != 0.0 and ctypes.c_float(cap).value == 0.0:
        # 0 in float32 is "off": a tiny cap (which flattens every score to ~0) must not silently turn capping off
        raise KvattnArgumentError(f"softcap: {softcap!r} is 0 in float32, which kvattn reads as off; pass 0 for off "
                                  f"or a cap of at least ~1.4e-45")
    p.softcap = cap
    p.num_splits = _opt_int("num_splits", num_splits or 0)
    p.batch_invariant = 1 if batch_invariant else 0


def _out(call, out, q):
    if out is None:
        o = call.empty(q.shape, q.dtype)
        return o, call.add(o, "out")
    o = call.add(out, "out")
    need_same_dtype(o, q)
    need_last_contiguous(o)
    need_writable(o)
    if o.shape != q.shape:
        raise KvattnArgumentError(f"out: shape {list(o.shape)} differs from q's {list(q.shape)}")
    return out, o


# The C library's messages name kvattn_params fields. Where a field is not itself one of the Python function's
# arguments, the error also says what it was taken from (per function: flash_attn_varlen_func's k / v are its
# cache). Fields whose name is an argument (cache_seqlens, block_table, softcap, ...) need no note.
_FROM_ANY = {"num_heads": "q.shape[-2]", "head_dim": "q.shape[-1]",
             "window_left": "window_size[0]", "window_right": "window_size[1]"}
_FROM_CACHE_ARGS = dict(
    _FROM_ANY,
    num_kv_heads="k_cache.shape[2]", cache_batch="k_cache.shape[0]", cache_capacity="k_cache.shape[1]",
    num_pages="k_cache.shape[0]", page_size="k_cache.shape[1]", max_pages_per_seq="block_table.shape[1]",
    k_new="k", v_new="v", rotary_dim="2 * rotary_cos.shape[1]", rotary_max_pos="rotary_cos.shape[0]")
_FROM_VARLEN_CACHE = dict(_FROM_CACHE_ARGS, total_q="q.shape[0]", total_knew="k.shape[0]",
                          cu_seqlens_knew="cu_seqlens_k (or cu_seqlens_q when it is None)")
_FROM_FIXED_CACHE = dict(_FROM_CACHE_ARGS, seqlen_q="q.shape[1]", seqlen_knew="k.shape[1]")
_FROM_VARLEN_PACKED = dict(_FROM_ANY, total_q="q.shape[0]", k_cache="k", v_cache="v", num_kv_heads="k.shape[-2]",
                           cache_capacity="k.shape[0]", cache_leftpad="cu_seqlens_k[:-1]",
                           cache_seqlens="cu_seqlens_k[1:]")
_FROM_VARLEN_PAGED = dict(_FROM_VARLEN_PACKED, num_pages="k.shape[0]", page_size="k.shape[1]",
                          max_pages_per_seq="block_table.shape[1]", cache_seqlens="cu_seqlens_k[1:] - cu_seqlens_k[:-1]")
del _FROM_VARLEN_PAGED["cache_leftpad"], _FROM_VARLEN_PAGED["cache_capacity"]  # (paged: C names neither)


def _with_python_names(e, fields):
    """e (a KvattnError from the C library) with "(Python: <field> is <what it was taken from>, ...)" appended
    for every kvattn_params field its message names that the Python caller did not pass under that name."""
    found = sorted((m.start(), field) for field in fields for m in [re.search(rf"\b{field}\b", e.message)] if m)
    if found:
        named = ", ".join(f"{field} is {fields[field]}" for _, field in found)  # in the message's order
        KvattnError.__init__(e, e.status, f"{e.message} (Python: {named})", e.function)
    return e


def _run(call, p, fields):
    """One kvattn_forward on the backend of the call's device. fields: _with_python_names's table."""
    ref = ctypes.byref(p)
    try:
        if call.is_cuda:
            _cuda.launch(ref, call.device_index)
        else:
            check(lib.kvattn_forward(ref, BACKEND_CPU, None, 0, None), "kvattn_forward")
    except KvattnError as e:
        if e.function in ("kvattn_forward", "kvattn_workspace_size"):
            _with_python_names(e, fields)
        raise


def _check_cu_seqlens_k(cuk, B, total_k, capacity=None):
    """flash_attn_varlen_func on the CPU: cu_seqlens_k becomes cache_leftpad / cache_seqlens (packed) or the key
    counts (paged), so the C library's data checks would name those; check it here, where it can be read.
    capacity (paged): the keys a block_table row holds."""
    ck = np.asarray(cuk.obj.cpu() if cuk.kind == "torch" else cuk.obj).astype(np.int64)
    down = np.flatnonzero(ck[1:B + 1] < ck[:B])
    if down.size:
        b = int(down[0])
        raise KvattnError(ERR_BAD_DATA, f"cu_seqlens_k: must be non-decreasing, got cu_seqlens_k[{b + 1}]="
                                        f"{int(ck[b + 1])} < cu_seqlens_k[{b}]={int(ck[b])}")
    if ck[0] < 0:
        raise KvattnError(ERR_BAD_DATA, f"cu_seqlens_k: cu_seqlens_k[0]={int(ck[0])} must be >= 0")
    if total_k is not None and ck[B] > total_k:
        raise KvattnError(ERR_BAD_DATA, f"cu_seqlens_k: cu_seqlens_k[{B}]={int(ck[B])} is past the {total_k} rows "
                                        f"of k")
    if capacity is not None:
        over = np.flatnonzero(ck[1:B + 1] - ck[:B] > capacity)
        if over.size:
            b = int(over[0])
            raise KvattnError(ERR_BAD_DATA, f"cu_seqlens_k: sequence {b} has cu_seqlens_k[{b + 1}] - cu_seqlens_k[{b}]"
                                            f" = {int(ck[b + 1] - ck[b])} keys, more than the {capacity} positions of "
                                            f"its block_table row")


def _check_cu_new(cu, B, total, name):
    """The offsets of the new tokens on the CPU, checked here so that the error names the Python argument that
    holds them (the C library's check would name its field, cu_seqlens_knew)."""
    c = np.asarray(cu.obj.cpu() if cu.kind == "torch" else cu.obj).astype(np.int64)
    if c[0] != 0:
        raise KvattnError(ERR_BAD_DATA, f"{name}: {name}[0]={int(c[0])} must be 0")
    down = np.flatnonzero(c[1:B + 1] < c[:B])
    if down.size:
        b = int(down[0])
        raise KvattnError(ERR_BAD_DATA, f"{name}: must be non-decreasing, got {name}[{b + 1}]={int(c[b + 1])} < "
                                        f"{name}[{b}]={int(c[b])}")
    if c[B] > total:
        why = " (cu_seqlens_k is not given, so cu_seqlens_q counts the new tokens)" if name == "cu_seqlens_q" else ""
        raise KvattnError(ERR_BAD_DATA, f"{name}: {name}[{B}]={int(c[B])} is past the {total} rows of k{why}")


def _varlen_q(qa, cuq):
    """The params of a varlen call's queries: q [total_q, H, D] with cu_seqlens_q [B + 1]. Returns (p, B)."""
    need_ndim(qa, 3, "[total_q, H, D]")
    need_int32(cuq)
    if cuq.ndim != 1 or cuq.shape[0] < 1:
        raise KvattnArgumentError(f"cu_seqlens_q: expected shape [B + 1], got {list(cuq.shape)}")
    B = cuq.shape[0] - 1
    need_index_vector(cuq, B + 1, "B + 1 row offsets")
    total_q, H, D = qa.shape
    p = lib.kvattn_params_default()
    p.dtype, p.batch, p.num_heads, p.head_dim = qa.dtype_code(), B, H, D
    p.q, p.cu_seqlens_q, p.total_q = qa.ptr, cuq.ptr, total_q
    p.q_row_stride, p.q_head_stride = qa.strides[:2]
    return p, B


@names_errors
def flash_attn_varlen_func_with_kvcache(q, k_cache, v_cache, cu_seqlens_q, max_seqlen_q, k=None, v=None,
                                        cu_seqlens_k=None, rotary_cos=None, rotary_sin=None, cache_seqlens=None,
                                        cache_batch_idx=None, cache_leftpad=None, block_table=None,
                                        softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                                        rotary_interleaved=True, alibi_slopes=None, num_splits=0,
                                        return_softmax_lse=False, batch_invariant=False, out=None):
    """Attention over a ragged batch of queries with an in-place KV cache (one inflight-batching step).

    q: [total_q, H, D] with cu_seqlens_q: int32 [B + 1] (row offsets of each sequence's queries).
    k_cache, v_cache: contiguous [B_cache, seqlen_cache, Hk, D] (sequence b uses row cache_batch_idx[b], or b),
        or paged [num_pages, page_size, Hk, D] with block_table: int32 [B, max_pages_per_seq]. Updated in place.
    k, v (optional, together): [total_new, Hk, D] new tokens appended at positions cache_seqlens[b] + t
        before attending (k rotated when rotary_cos/sin are given); cu_seqlens_k: int32 [B + 1] row offsets of
        the new tokens (default: cu_seqlens_q, i.e. as many new tokens as queries).
    cache_seqlens: int32 [B] tokens already in each cache before this call, or an int for all; None means
        every cache is full (then k/v must be None).
    cache_leftpad: int32 [B]: cache positions < cache_leftpad[b] are ignored.
    rotary_cos, rotary_sin: [max_pos, R / 2] (float32 or q's dtype); rotary_interleaved: GPT-J pairs (2i,
        2i+1) if True, else GPT-NeoX pairs (i, i + R/2).
    alibi_slopes: float32 [H] or [B, H]. window_size: (left, right), -1 = unbounded. softcap: 0 = off.
    num_splits: 0 = automatic, 1 = no KV split, n = at most n. max_seqlen_q is accepted for compatibility and
        not needed (kvattn reads the lengths itself).
    out: optional output [total_q, H, D] of q's dtype (written for every query row of every sequence; rows past
        cu_seqlens_q[B] are left as they are).

    Returns out [total_q, H, D], or (out, softmax_lse [H, total_q] float32) with return_softmax_lse.
    Accepts torch tensors (CPU or CUDA, all on one device) or NumPy arrays (float16/float32, ml_dtypes
    bfloat16). Raises KvattnError (and its ValueError/TypeError subclasses) naming the argument on bad input.
    """
    call = Call()
    qa = call.add(q, "q", optional=False)
    kc = call.add(k_cache, "k_cache", optional=False)
    vc = call.add(v_cache, "v_cache", optional=False)
    cuq = call.add(cu_seqlens_q, "cu_seqlens_q", optional=False)
    kn, vn = call.add(k, "k"), call.add(v, "v")
    cuk = call.add(cu_seqlens_k, "cu_seqlens_k")
    cos, sin = call.add(rotary_cos, "rotary_cos"), call.add(rotary_sin, "rotary_sin")
    bidx, lpad = call.add(cache_batch_idx, "cache_batch_idx"), call.add(cache_leftpad, "cache_leftpad")
    bt, alibi = call.add(block_table, "block_table"), call.add(alibi_slopes, "alibi_slopes")
    _floats(call, qa, (kc, vc, kn, vn))
    p, B = _varlen_q(qa, cuq)
    total_q, H, D = qa.shape
    capacity = _set_cache(p, call, qa, kc, vc, bt, bidx, B, writes=kn is not None, b_from="len(cu_seqlens_q) - 1")
    _set_new(p, kn, vn, kc.shape[2], D)
    if kn is not None:
        cu_new = cuk if cuk is not None else cuq
        need_index_vector(cu_new, B + 1, "B + 1 row offsets of the new tokens")
        if not call.is_cuda:
            _check_cu_new(cu_new, B, kn.shape[0], "cu_seqlens_k" if cuk is not None else "cu_seqlens_q")
        p.cu_seqlens_knew = cu_new.ptr
    elif cuk is not None:
        raise KvattnArgumentError("cu_seqlens_k: given without k/v (it counts the new tokens)")
    _set_seqlens(p, call, cache_seqlens, B, capacity, kn is not None, b_from="len(cu_seqlens_q) - 1")
    need_index_vector(lpad, B, "left padding per sequence")
    if lpad is not None:
        p.cache_leftpad = lpad.ptr
    _set_rotary(p, qa, cos, sin, rotary_interleaved)
    _set_options(p, B, H, alibi, softmax_scale, causal, window_size, softcap, num_splits, batch_invariant)
    out, oa = _out(call, out, qa)
    p.out, p.out_row_stride, p.out_head_stride = oa.ptr, oa.strides[0], oa.strides[1]
    lse = None
    if return_softmax_lse:
        lse = call.empty((H, total_q), "float32")
        p.softmax_lse, p.lse_head_stride, p.lse_row_stride = call.add(lse, "softmax_lse").ptr, total_q, 1
    _run(call, p, _FROM_VARLEN_CACHE)
    return (out, lse) if return_softmax_lse else out


@names_errors
def flash_attn_with_kvcache(q, k_cache, v_cache, k=None, v=None, rotary_cos=None, rotary_sin=None,
                            cache_seqlens=None, cache_batch_idx=None, cache_leftpad=None, block_table=None,
                            softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0,
                            rotary_interleaved=True, alibi_slopes=None, num_splits=0, return_softmax_lse=False,
                            *, batch_invariant=False, out=None):
    """flash-attention's flash_attn_with_kvcache: a fixed-length batch of queries over an in-place KV cache.

    q: [B, Sq, H, D]. k_cache, v_cache: [B_cache, seqlen_cache, Hk, D], or paged [num_pages, page_size, Hk,
    D] with block_table int32 [B, max_pages_per_seq]; updated in place. k, v (optional): [B, S_new, Hk, D],
    appended at positions cache_seqlens[b] .. cache_seqlens[b] + S_new - 1 before attending.
    cache_seqlens: int32 [B] or an int; None means every cache is full. Other options as in
    flash_attn_varlen_func_with_kvcache; out (keyword): optional [B, Sq, H, D] output.

    Returns out [B, Sq, H, D], or (out, softmax_lse [B, H, Sq] float32) with return_softmax_lse.
    """
    call = Call()
    qa = call.add(q, "q", optional=False)
    kc = call.add(k_cache, "k_cache", optional=False)
    vc = call.add(v_cache, "v_cache", optional=False)
    kn, vn = call.add(k, "k"), call.add(v, "v")
    cos, sin = call.add(rotary_cos, "rotary_cos"), call.add(rotary_sin, "rotary_sin")
    bidx, lpad = call.add(cache_batch_idx, "cache_batch_idx"), call.add(cache_leftpad, "cache_leftpad")
    bt, alibi = call.add(block_table, "block_table"), call.add(alibi_slopes, "alibi_slopes")
    _floats(call, qa, (kc, vc, kn, vn))
    need_ndim(qa, 4, "[B, seqlen_q, H, D]")
    B, Sq, H, D = qa.shape

    p = lib.kvattn_params_default()
    p.dtype, p.batch, p.num_heads, p.head_dim = qa.dtype_code(), B, H, D
    p.q, p.seqlen_q = qa.ptr, Sq
    p.q_batch_stride, p.q_row_stride, p.q_head_stride = qa.strides[:3]
    capacity = _set_cache(p, call, qa, kc, vc, bt, bidx, B, writes=kn is not None)
    _set_new(p, kn, vn, kc.shape[2], D, fixed_B=B)
    _set_seqlens(p, call, cache_seqlens, B, capacity, kn is not None)
    need_index_vector(lpad, B, "left padding per sequence")
    if lpad is not None:
        p.cache_leftpad = lpad.ptr
    _set_rotary(p, qa, cos, sin, rotary_interleaved)
    _set_options(p, B, H, alibi, softmax_scale, causal, window_size, softcap, num_splits, batch_invariant)
    out, oa = _out(call, out, qa)
    p.out = oa.ptr
    p.out_batch_stride, p.out_row_stride, p.out_head_stride = oa.strides[:3]
    lse = None
    if return_softmax_lse:
        lse = call.empty((B, H, Sq), "float32")
        p.softmax_lse = call.add(lse, "softmax_lse").ptr
        p.lse_batch_stride, p.lse_head_stride, p.lse_row_stride = H * Sq, Sq, 1
    _run(call, p, _FROM_FIXED_CACHE)
    return (out, lse) if return_softmax_lse else out


@names_errors
def flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k, dropout_p=0.0,
                           softmax_scale=None, causal=False, window_size=(-1, -1), softcap=0.0, alibi_slopes=None,
                           deterministic=False, return_attn_probs=False, block_table=None, *,
                           return_softmax_lse=False, num_splits=0, batch_invariant=False, out=None):
    """flash-attention's flash_attn_varlen_func, forward only, no cache update.

    q: [total_q, H, D]; cu_seqlens_q, cu_seqlens_k: int32 [B + 1]. k, v: packed [total_k, Hk, D] (the keys of
    sequence b are rows cu_seqlens_k[b] .. cu_seqlens_k[b+1] - 1), or, with block_table int32 [B,
    max_pages_per_seq], paged [num_pages, page_size, Hk, D] where sequence b has cu_seqlens_k[b+1] -
    cu_seqlens_k[b] keys from position 0 of its pages. Causal and window masks align the last query with the
    last key (bottom-right), as in flash-attention >= 2.1. max_seqlen_q/k are accepted and not needed;
    deterministic is accepted (kvattn is always deterministic); dropout_p must be 0.

    Returns out [total_q, H, D]; (out, softmax_lse [H, total_q]) with return_softmax_lse (keyword); and
    (out, softmax_lse, None) with return_attn_probs (there is no dropout mask to return).

    How: a packed k IS a contiguous cache of one row of capacity total_k that every sequence reads (batch
    stride 0), with cache_leftpad = cu_seqlens_k[:-1] and cache_seqlens = cu_seqlens_k[1:]: no copy is made.
    So on CUDA a bad cu_seqlens_k (decreasing, or past total_k) is flagged in the device status as BAD_LEFTPAD
    or CAPACITY; on the CPU it raises KvattnError(KVATTN_ERR_BAD_DATA) naming cu_seqlens_k. With block_table
    the key counts cu_seqlens_k[1:] - cu_seqlens_k[:-1] are computed on every call (a new int32 tensor of B
    elements, on CUDA by one elementwise kernel on the current stream).
    """
    if dropout_p:
        raise NotImplementedError("flash_attn_varlen_func: dropout_p must be 0 (kvattn is forward-only, no dropout)")
    call = Call()
    qa = call.add(q, "q", optional=False)
    ka = call.add(k, "k", optional=False)
    va = call.add(v, "v", optional=False)
    cuq = call.add(cu_seqlens_q, "cu_seqlens_q", optional=False)
    cuk = call.add(cu_seqlens_k, "cu_seqlens_k", optional=False)
    bt, alibi = call.add(block_table, "block_table"), call.add(alibi_slopes, "alibi_slopes")
    _floats(call, qa, (ka, va))
    p, B = _varlen_q(qa, cuq)
    need_index_vector(cuk, B + 1, "B + 1 row offsets of the keys")
    total_q, H, D = qa.shape
    if bt is not None:
        capacity = _set_cache(p, call, qa, ka, va, bt, None, B, writes=False, b_from="len(cu_seqlens_q) - 1")
        if not call.is_cuda:
            _check_cu_seqlens_k(cuk, B, None, capacity)
        # sequence b has cu_seqlens_k[b+1] - cu_seqlens_k[b] keys from position 0 of its pages
        ck = cu_seqlens_k
        lens = ck[1:] - ck[:-1]
        call.keep.append(lens)
        p.cache_seqlens = call.add(lens, "cache_seqlens").ptr
    else:
        need_ndim(ka, 3, "[total_k, Hk, D] (packed keys; pass block_table for a paged cache)")
        if va.shape != ka.shape:
            raise KvattnArgumentError(f"v: shape {list(va.shape)} differs from k's {list(ka.shape)}")
        if ka.shape[2] != D:
            raise KvattnArgumentError(f"k: head dim {ka.shape[2]} differs from q's head dim {D}")
        total_k, Hk = ka.shape[0], ka.shape[1]
        if not call.is_cuda:
            _check_cu_seqlens_k(cuk, B, total_k)
        # every sequence reads the one cache row (batch stride 0) between its leftpad and its seqlen
        p.num_kv_heads = Hk
        p.k_cache, p.v_cache = ka.ptr, va.ptr
        p.k_batch_stride, p.k_row_stride, p.k_head_stride = 0, ka.strides[0], ka.strides[1]
        p.v_batch_stride, p.v_row_stride, p.v_head_stride = 0, va.strides[0], va.strides[1]
        p.cache_batch, p.cache_capacity = B, total_k
        p.cache_leftpad = cuk.ptr
        p.cache_seqlens = cuk.ptr + 4  # cu_seqlens_k[1:]
    _set_options(p, B, H, alibi, softmax_scale, causal, window_size, softcap, num_splits, batch_invariant)
    out, oa = _out(call, out, qa)
    p.out, p.out_row_stride, p.out_head_stride = oa.ptr, oa.strides[0], oa.strides[1]
    lse = None
    if return_softmax_lse or return_attn_probs:
        lse = call.empty((H, total_q), "float32")
        p.softmax_lse, p.lse_head_stride, p.lse_row_stride = call.add(lse, "softmax_lse").ptr, total_q, 1
    _run(call, p, _FROM_VARLEN_PAGED if bt is not None else _FROM_VARLEN_PACKED)
    if return_attn_probs:
        return out, lse, None
    return (out, lse) if return_softmax_lse else out


for _f in (flash_attn_varlen_func_with_kvcache, flash_attn_with_kvcache, flash_attn_varlen_func):
    _f.__doc__ += _DIFFERENCES
del _f
