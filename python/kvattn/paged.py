# paged.py — PagedKVCache: the k/v page pools plus the C page manager (kvattn_pages_*), so that a generation
# loop asks "these sequences get these many new tokens this step" and receives block_table and cache_seqlens
# ready for the attention call, with no page bookkeeping of its own.
import ctypes
import sys

import numpy as np

from ._arrays import _np_dtype
from ._lib import ERR_OUT_OF_PAGES, KvattnArgumentError, KvattnError, check, lib


class PagedKVCache:
    """A paged KV cache: k_cache and v_cache of shape [num_pages, page_size, Hk, D] and a page manager.

    dtype: a torch dtype (the caches are torch tensors on `device`, default "cuda" when available else
    "cpu") or anything numpy.dtype accepts ("float16", np.float32, ml_dtypes.bfloat16: NumPy arrays).
    max_pages_per_seq: the width of the block_table produced by step()/tables(); None = as wide as the
    longest sequence of that batch needs (pass a fixed value for CUDA graphs, whose tensors keep one shape).

    A step of a generation loop::

        cache = PagedKVCache(num_pages=1024, page_size=16, num_kv_heads=8, head_dim=128, dtype=torch.float16)
        a = cache.add_seq()                     # a new request
        block_table, cache_seqlens = cache.step([a, b], [prompt_len, 1])   # reserve + tables for this step
        out = kvattn.flash_attn_varlen_func_with_kvcache(q, cache.k_cache, cache.v_cache, cu_q, max_q,
                  k=k, v=v, cache_seqlens=cache_seqlens, block_table=block_table, causal=True)
        cache.free(a)                           # finished: its pages return to the pool

    step() counts the new tokens as appended (pending) before the attention call writes them, so its
    cache_seqlens are the lengths before this step, as the attention functions expect.
    """

    def __init__(self, num_pages, page_size, num_kv_heads, head_dim, dtype, device=None, max_pages_per_seq=None):
        self.num_pages, self.page_size = int(num_pages), int(page_size)
        self.num_kv_heads, self.head_dim = int(num_kv_heads), int(head_dim)
        self.max_pages_per_seq = None if max_pages_per_seq is None else int(max_pages_per_seq)
        handle = ctypes.c_void_p()
        check(lib.kvattn_pages_create(ctypes.byref(handle), self.num_pages, self.page_size), "kvattn_pages_create")
        self._pool = handle
        shape = (self.num_pages, self.page_size, self.num_kv_heads, self.head_dim)
        torch = sys.modules.get("torch")
        if torch is not None and isinstance(dtype, torch.dtype):
            if device is None:
                device = "cuda" if torch.cuda.is_available() else "cpu"
            self.kind, self.device = "torch", torch.device(device)
            self.k_cache = torch.zeros(shape, dtype=dtype, device=self.device)
            self.v_cache = torch.zeros(shape, dtype=dtype, device=self.device)
        else:
            if device not in (None, "cpu"):
                raise KvattnArgumentError(f"device: {device!r} needs a torch dtype; NumPy arrays live on the CPU")
            self.kind, self.device = "numpy", "cpu"
            np_dtype = _np_dtype(np.dtype(dtype).name if not isinstance(dtype, str) else dtype)
            self.k_cache = np.zeros(shape, dtype=np_dtype)
            self.v_cache = np.zeros(shape, dtype=np_dtype)

    # ---- lifetime --------------------------------------------------------------------------------------------
    def close(self):
        """Destroys the page manager (the cache tensors stay as long as they are referenced)."""
        if getattr(self, "_pool", None) is not None and self._pool.value:
            lib.kvattn_pages_destroy(self._pool)
        self._pool = None

    def __del__(self):
        try:
            self.close()
        except Exception:
            pass

    def _handle(self):
        if self._pool is None:
            raise KvattnArgumentError("PagedKVCache: used after close()")
        return self._pool

    # ---- sequences -------------------------------------------------------------------------------------------
    def add_seq(self):
        """Starts an empty sequence; returns its id (ids of freed sequences are reused)."""
        sid = ctypes.c_int32()
        check(lib.kvattn_pages_add_seq(self._handle(), ctypes.byref(sid)), "kvattn_pages_add_seq")
        return sid.value

    def fork(self, parent, n_tokens=None):
        """Starts a sequence sharing the first n_tokens tokens of `parent` (default: all of them; must be a
        multiple of page_size). The shared pages are reference-counted, never copied. Returns the new id."""
        if n_tokens is None:
            n_tokens = self.seq_len(parent)
        sid = ctypes.c_int32()
        check(lib.kvattn_pages_fork(self._handle(), int(parent), int(n_tokens), ctypes.byref(sid)),
              "kvattn_pages_fork")
        return sid.value

    def free(self, seq_id):
        """Ends a sequence; its pages that no other sequence shares return to the pool."""
        check(lib.kvattn_pages_release(self._handle(), int(seq_id)), "kvattn_pages_release")

    release = free

    def append(self, seq_id, n_tokens):
        """Reserves room for n_tokens more tokens of seq_id (taking free pages as needed) and counts them as
        appended. Raises KvattnError(KVATTN_ERR_OUT_OF_PAGES) and changes nothing when the pool is short."""
        check(lib.kvattn_pages_append(self._handle(), int(seq_id), int(n_tokens)), "kvattn_pages_append")

    reserve = append

    def seq_len(self, seq_id):
        """Tokens of the sequence (counting those appended for a step not yet run); -1 for an unknown id."""
        return int(lib.kvattn_pages_seq_len(self._handle(), int(seq_id)))

    def seq_num_pages(self, seq_id):
        return int(lib.kvattn_pages_seq_num_pages(self._handle(), int(seq_id)))

    @property
    def free_pages(self):
        return int(lib.kvattn_pages_free_count(self._handle()))

    @property
    def used_pages(self):
        return int(lib.kvattn_pages_used_count(self._handle()))

    # ---- per-step tables -------------------------------------------------------------------------------------
    def step(self, seq_ids, n_new, out=None):
        """Appends n_new[b] tokens to sequence seq_ids[b] (all or nothing: if the pool is short for the whole
        batch, raises KvattnError(KVATTN_ERR_OUT_OF_PAGES) and changes nothing), then returns
        (block_table int32 [B, W], cache_seqlens int32 [B]) for this step, cache_seqlens being the lengths
        before the step (the new tokens are pending: the attention call writes them)."""
        seq_ids = [int(s) for s in seq_ids]
        n_new = [int(n) for n in n_new]
        if len(n_new) != len(seq_ids):
            raise KvattnArgumentError(f"n_new: {len(n_new)} counts for {len(seq_ids)} sequences")
        if len(set(seq_ids)) != len(seq_ids):
            raise KvattnArgumentError(f"seq_ids: a sequence appears twice in {seq_ids}")
        need = 0
        for s, n in zip(seq_ids, n_new):
            length = self.seq_len(s)
            if length < 0:
                raise KvattnArgumentError(f"seq_ids: {s} is not a live sequence")
            if n < 0:
                raise KvattnArgumentError(f"n_new: {n} for sequence {s} must be >= 0")
            need += max(0, -(-(length + n) // self.page_size) - self.seq_num_pages(s))
        if need > self.free_pages:
            raise KvattnError(ERR_OUT_OF_PAGES, f"this step needs {need} more pages but only {self.free_pages} of "
                                                f"{self.num_pages} are free (page_size={self.page_size})",
                              "PagedKVCache.step")
        for s, n in zip(seq_ids, n_new):
            self.append(s, n)
        return self.tables(seq_ids, pending=n_new, out=out)

    def tables(self, seq_ids, pending=None, out=None):
        """Returns (block_table int32 [B, W], cache_seqlens int32 [B]) for the batch seq_ids, with
        cache_seqlens[b] = length - pending[b]. Unused block_table entries are -1. W = max_pages_per_seq (the
        constructor's) or the most pages any of these sequences has. With out=(block_table, cache_seqlens)
        the tables are copied into those existing tensors (of the cache's kind and device; block_table may be
        wider than needed) and they are returned: this is how a CUDA graph's input buffers are refreshed."""
        seq_ids = np.ascontiguousarray(np.asarray(seq_ids, dtype=np.int32).reshape(-1))
        B = int(seq_ids.shape[0])
        pend = None
        if pending is not None:
            pend = np.ascontiguousarray(np.asarray(pending, dtype=np.int32).reshape(-1))
            if pend.shape[0] != B:
                raise KvattnArgumentError(f"pending: {pend.shape[0]} counts for {B} sequences")
        if out is not None:
            width = int(out[0].shape[1])
        elif self.max_pages_per_seq is not None:
            width = self.max_pages_per_seq
        else:
            width = max([self.seq_num_pages(int(s)) for s in seq_ids] + [1])
        bt = np.empty((B, width), dtype=np.int32)
        sl = np.empty((B,), dtype=np.int32)
        ptr = lambda a: ctypes.c_void_p(a.ctypes.data) if a is not None else None  # noqa: E731
        check(lib.kvattn_pages_fill(self._handle(), ptr(seq_ids), B, ptr(pend), ptr(bt), width, width, ptr(sl)),
              "kvattn_pages_fill")
        if self.kind == "numpy":
            if out is None:
                return bt, sl
            out[0][...] = bt
            out[1][...] = sl
            return out
        torch = sys.modules["torch"]
        bt_t, sl_t = torch.from_numpy(bt), torch.from_numpy(sl)
        if out is None:
            if self.device.type == "cpu":
                return bt_t, sl_t
            return bt_t.to(self.device), sl_t.to(self.device)
        out[0].copy_(bt_t)
        out[1].copy_(sl_t)
        return out
