# paged.py — PagedKVCache: the k/v page pools plus the C page manager (kvattn_pages_*), so that a generation
# loop asks "these sequences get these many new tokens this step" and receives block_table and cache_seqlens
# ready for the attention call, with no page bookkeeping of its own.
import ctypes
import operator
import sys

import numpy as np

from ._arrays import Arr, _np_dtype, need_writable
from ._lib import (INT32_MAX, INT32_MIN, ERR_OUT_OF_PAGES, KvattnArgumentError, KvattnError, KvattnTypeError, check,
                   lib, names_errors)

_CACHE_DTYPES = ("float16", "bfloat16", "float32")


def _index(name, value):
    try:
        return operator.index(value)
    except TypeError:
        raise KvattnTypeError(f"{name}: expected an int, got {value!r}") from None


def _i32(name, value):
    """An int argument of the C page manager (int32): ctypes would wrap a larger one silently onto another id."""
    v = _index(name, value)
    if not INT32_MIN <= v <= INT32_MAX:
        raise KvattnArgumentError(f"{name}: {v} does not fit the C library's int32")
    return v


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

    @names_errors
    def __init__(self, num_pages, page_size, num_kv_heads, head_dim, dtype, device=None, max_pages_per_seq=None):
        self.num_pages, self.page_size = _i32("num_pages", num_pages), _i32("page_size", page_size)
        self.num_kv_heads, self.head_dim = _i32("num_kv_heads", num_kv_heads), _i32("head_dim", head_dim)
        for name, v in (("num_kv_heads", self.num_kv_heads), ("head_dim", self.head_dim)):
            if v < 1:
                raise KvattnArgumentError(f"{name}: {v} must be >= 1")
        self.max_pages_per_seq = None if max_pages_per_seq is None else _i32("max_pages_per_seq", max_pages_per_seq)
        if self.max_pages_per_seq is not None and self.max_pages_per_seq < 1:
            raise KvattnArgumentError(f"max_pages_per_seq: {self.max_pages_per_seq} must be >= 1 (or None)")
        torch = sys.modules.get("torch")
        is_torch_dtype = torch is not None and isinstance(dtype, torch.dtype)
        name = str(dtype).replace("torch.", "") if is_torch_dtype else None
        if not is_torch_dtype:
            # every spelling numpy.dtype accepts ("f2", "half", "<f4", np.float32, ml_dtypes.bfloat16), reduced to
            # its name; "bfloat16" is taken as a name even without ml_dtypes, which is then asked for below
            try:
                name = "bfloat16" if isinstance(dtype, str) and dtype == "bfloat16" else np.dtype(dtype).name
            except TypeError:
                raise KvattnTypeError(f"dtype: {dtype!r} is not a dtype") from None
        if name not in _CACHE_DTYPES:
            raise KvattnTypeError(f"dtype: {name} is not supported (expected one of {', '.join(_CACHE_DTYPES)})")
        handle = ctypes.c_void_p()
        check(lib.kvattn_pages_create(ctypes.byref(handle), self.num_pages, self.page_size), "kvattn_pages_create")
        self._pool = handle
        shape = (self.num_pages, self.page_size, self.num_kv_heads, self.head_dim)
        if is_torch_dtype:
            if device is None:
                device = "cuda" if torch.cuda.is_available() else "cpu"
            self.kind = "torch"
            self.k_cache = torch.zeros(shape, dtype=dtype, device=device)
            self.v_cache = torch.zeros(shape, dtype=dtype, device=device)
            # the device the caches landed on, with its index ("cuda" means the GPU current now; tables() must
            # keep using this one even when another GPU is current later)
            self.device = self.k_cache.device
        else:
            if device is not None and str(device) != "cpu":
                raise KvattnArgumentError(f"device: {device!r} needs a torch dtype; NumPy arrays live on the CPU")
            self.kind, self.device = "numpy", "cpu"
            np_dtype = _np_dtype(name)
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

    def __reduce_ex__(self, protocol):
        # copy.copy, copy.deepcopy and pickle all come here: a copy would share the C page manager and destroy it
        # twice (close() or garbage collection of each)
        raise KvattnTypeError("PagedKVCache: cannot be copied or pickled (it owns a C page manager); fork() shares "
                              "a sequence's pages within one cache")

    def _handle(self):
        if self._pool is None:
            raise KvattnArgumentError("PagedKVCache: used after close()")
        return self._pool

    # ---- sequences -------------------------------------------------------------------------------------------
    @names_errors
    def add_seq(self):
        """Starts an empty sequence; returns its id (ids of freed sequences are reused)."""
        sid = ctypes.c_int32()
        check(lib.kvattn_pages_add_seq(self._handle(), ctypes.byref(sid)), "kvattn_pages_add_seq")
        return sid.value

    @names_errors
    def fork(self, parent, n_tokens=None):
        """Starts a sequence sharing the first n_tokens tokens of `parent` (default: all of them; must be a
        multiple of page_size). The shared pages are reference-counted, never copied. Returns the new id.

        Share only tokens already written: fork after the attention call of the step that appended them. Forking
        tokens that are still pending (counted by step() or append() but not yet written by the call) lets the
        child read rows that the parent writes in the same call, which is unspecified (docs/DECISIONS.md,
        "Aliased rows")."""
        if n_tokens is None:
            n_tokens = self.seq_len(parent)
            if n_tokens > 0 and n_tokens % self.page_size:
                raise KvattnArgumentError(
                    f"fork: parent {parent} holds {n_tokens} tokens, not a multiple of page_size={self.page_size}, "
                    f"so they cannot all be shared; pass n_tokens={n_tokens // self.page_size * self.page_size} "
                    f"and append the rest to the child")
        sid = ctypes.c_int32()
        check(lib.kvattn_pages_fork(self._handle(), _i32("parent", parent), _i32("n_tokens", n_tokens),
                                    ctypes.byref(sid)),
              "kvattn_pages_fork")
        return sid.value

    @names_errors
    def free(self, seq_id):
        """Ends a sequence; its pages that no other sequence shares return to the pool."""
        check(lib.kvattn_pages_release(self._handle(), _i32("seq_id", seq_id)), "kvattn_pages_release")

    release = free

    @names_errors
    def append(self, seq_id, n_tokens):
        """Reserves room for n_tokens more tokens of seq_id (taking free pages as needed) and counts them as
        appended. Raises KvattnError(KVATTN_ERR_OUT_OF_PAGES) and changes nothing when the pool is short, and
        KvattnArgumentError (nothing changed) when the sequence would hold more than max_pages_per_seq pages."""
        if self.max_pages_per_seq is not None:
            sid, n = _i32("seq_id", seq_id), _i32("n_tokens", n_tokens)
            length = self.seq_len(sid)
            if length >= 0 and n > 0:
                pages_after = self._pages_after(sid, length, n)
                if pages_after > self.max_pages_per_seq:
                    raise KvattnArgumentError(
                        f"n_tokens: sequence {sid} would hold {pages_after} pages ({length} + {n} tokens of "
                        f"{self.page_size}), more than max_pages_per_seq={self.max_pages_per_seq}")
        check(lib.kvattn_pages_append(self._handle(), _i32("seq_id", seq_id), _i32("n_tokens", n_tokens)),
              "kvattn_pages_append")

    reserve = append

    @names_errors
    def truncate(self, seq_id, n_tokens):
        """Shortens seq_id to its first n_tokens tokens (e.g. to drop rejected speculative tokens after a
        verification step). Pages past the new length return to the pool unless another sequence shares them.
        Raises KvattnArgumentError and changes nothing when n_tokens is outside [0, length] or would end the
        sequence inside a page it shares with a forked sequence (truncate to a multiple of page_size then)."""
        check(lib.kvattn_pages_truncate(self._handle(), _i32("seq_id", seq_id), _i32("n_tokens", n_tokens)),
              "kvattn_pages_truncate")

    @names_errors
    def seq_len(self, seq_id):
        """Tokens of the sequence (counting those appended for a step not yet run); -1 for an unknown id."""
        return self._seq_query(lib.kvattn_pages_seq_len, seq_id)

    @names_errors
    def seq_num_pages(self, seq_id):
        """Pages the sequence holds; -1 for an unknown id."""
        return self._seq_query(lib.kvattn_pages_seq_num_pages, seq_id)

    def _pages_after(self, seq_id, length, n):
        """Pages seq_id (of `length` tokens) holds once n more tokens are appended."""
        return max(self.seq_num_pages(seq_id), -(-(length + n) // self.page_size))

    def _seq_query(self, fn, seq_id):
        sid = _index("seq_id", seq_id)
        return int(fn(self._handle(), sid)) if INT32_MIN <= sid <= INT32_MAX else -1  # past int32: no such id

    @property
    def free_pages(self):
        return int(lib.kvattn_pages_free_count(self._handle()))

    @property
    def used_pages(self):
        return int(lib.kvattn_pages_used_count(self._handle()))

    # ---- per-step tables -------------------------------------------------------------------------------------
    @names_errors
    def step(self, seq_ids, n_new, out=None):
        """Appends n_new[b] tokens to sequence seq_ids[b], then returns (block_table int32 [B, W],
        cache_seqlens int32 [B]) for this step, cache_seqlens being the lengths before the step (the new tokens
        are pending: the attention call writes them). All or nothing: every check is made before the first
        append, so if the pool is short for the whole batch (KvattnError(KVATTN_ERR_OUT_OF_PAGES)) or a sequence
        would need more pages than the table's width W (out's width, capped at max_pages_per_seq), or an argument is
        wrong (KvattnArgumentError), nothing changes. out: as in tables()."""
        for name, v in (("seq_ids", seq_ids), ("n_new", n_new)):
            try:
                iter(v)
            except TypeError:
                raise KvattnTypeError(f"{name}: expected a sequence of ints, got {v!r}") from None
        seq_ids = [_i32("seq_ids", s) for s in seq_ids]
        n_new = [_i32("n_new", n) for n in n_new]
        if out is not None and not isinstance(out, tuple):
            out = tuple(out)  # read once: a one-shot iterable would be empty in tables(), after the appends
        if len(n_new) != len(seq_ids):
            raise KvattnArgumentError(f"n_new: {len(n_new)} counts for {len(seq_ids)} sequences")
        if len(set(seq_ids)) != len(seq_ids):
            raise KvattnArgumentError(f"seq_ids: a sequence appears twice in {seq_ids}")
        width, width_name = self._width(out, len(seq_ids))
        if self.max_pages_per_seq is not None and width > self.max_pages_per_seq:
            # a wider out takes the tables, but the cache's own cap still holds (tables() and append() enforce it)
            width, width_name = self.max_pages_per_seq, "max_pages_per_seq"
        need = 0
        for s, n in zip(seq_ids, n_new):
            length = self.seq_len(s)
            if length < 0:
                raise KvattnArgumentError(f"seq_ids: {s} is not a live sequence")
            if n < 0:
                raise KvattnArgumentError(f"n_new: {n} for sequence {s} must be >= 0")
            if length + n > INT32_MAX:
                raise KvattnArgumentError(f"n_new: sequence {s} would hold {length} + {n} tokens, past the C "
                                          f"library's int32")
            pages_now = self.seq_num_pages(s)
            pages_after = self._pages_after(s, length, n)
            if width is not None and pages_after > width:
                limit = (f"the block table has {width} columns" if width_name == "out" else
                         f"max_pages_per_seq is {width}")
                raise KvattnArgumentError(f"{width_name}: sequence {s} would hold {pages_after} pages after this step "
                                          f"({length} + {n} tokens of {self.page_size}) but {limit}")
            need += pages_after - pages_now
        if need > self.free_pages:
            raise KvattnError(ERR_OUT_OF_PAGES, f"this step needs {need} more pages but only {self.free_pages} of "
                                                f"{self.num_pages} are free (page_size={self.page_size})",
                              "PagedKVCache.step")
        for s, n in zip(seq_ids, n_new):  # checked above against the table's width (out's when given)
            check(lib.kvattn_pages_append(self._handle(), s, n), "kvattn_pages_append")
        return self.tables(seq_ids, pending=n_new, out=out)

    @names_errors
    def tables(self, seq_ids, pending=None, out=None):
        """Returns (block_table int32 [B, W], cache_seqlens int32 [B]) for the batch seq_ids, with
        cache_seqlens[b] = length - pending[b]. Unused block_table entries are -1. W = max_pages_per_seq (the
        constructor's) or the most pages any of these sequences has. With out=(block_table, cache_seqlens)
        the tables are copied into those existing int32 buffers (of the cache's kind; W = out's width) and they
        are returned: this is how a CUDA graph's input buffers are refreshed. The buffers may have more rows
        than B (a graph captured for a larger batch): rows B.. are set to an empty sequence (block table -1,
        cache_seqlens 0)."""
        seq_ids = np.array([_i32("seq_ids", s) for s in np.asarray(seq_ids).reshape(-1).tolist()], dtype=np.int32)
        B = int(seq_ids.shape[0])
        pend = None
        if pending is not None:
            pend = np.array([_i32("pending", n) for n in np.asarray(pending).reshape(-1).tolist()], dtype=np.int32)
            if pend.shape[0] != B:
                raise KvattnArgumentError(f"pending: {pend.shape[0]} counts for {B} sequences")
        width, _ = self._width(out, B)
        if width is None:
            width = max([self.seq_num_pages(int(s)) for s in seq_ids] + [1])
        bt = np.empty((B, width), dtype=np.int32)
        sl = np.empty((B,), dtype=np.int32)
        ptr = lambda a: ctypes.c_void_p(a.ctypes.data) if a is not None else None  # noqa: E731
        check(lib.kvattn_pages_fill(self._handle(), ptr(seq_ids), B, ptr(pend), ptr(bt), width, width, ptr(sl)),
              "kvattn_pages_fill")
        if self.kind == "numpy":
            if out is None:
                return bt, sl
            out[0][:B] = bt
            out[0][B:] = -1
            out[1][:B] = sl
            out[1][B:] = 0
            return out
        torch = sys.modules["torch"]
        bt_t, sl_t = torch.from_numpy(bt), torch.from_numpy(sl)
        if out is None:
            if self.device.type == "cpu":
                return bt_t, sl_t
            return bt_t.to(self.device), sl_t.to(self.device)
        out[0][:B].copy_(bt_t)
        out[0][B:].fill_(-1)
        out[1][:B].copy_(sl_t)
        out[1][B:].fill_(0)
        return out

    def _width(self, out, B):
        """The block table's width and the argument that sets it: out's (checked: a pair of int32 buffers of
        the cache's kind, [rows >= B, W] and [rows >= B]), max_pages_per_seq, or (None, None) for automatic."""
        if out is None:
            if self.max_pages_per_seq is not None:
                return self.max_pages_per_seq, "max_pages_per_seq"
            return None, None
        try:
            bt_out, sl_out = out
        except (TypeError, ValueError):
            raise KvattnArgumentError("out: expected a pair (block_table, cache_seqlens) of int32 buffers") from None
        bt_a, sl_a = Arr(bt_out, "out[0] (block_table)"), Arr(sl_out, "out[1] (cache_seqlens)")
        for a, ndim in ((bt_a, 2), (sl_a, 1)):
            if a.kind != self.kind:
                raise KvattnTypeError(f"{a.name}: is a {a.kind} array but the cache's are {self.kind} arrays")
            if a.dtype != "int32":
                raise KvattnTypeError(f"{a.name}: dtype {a.dtype} must be int32")
            if a.ndim != ndim or a.shape[0] < B:
                raise KvattnArgumentError(f"{a.name}: shape {list(a.shape)} must have {ndim} dimension(s) and at least "
                                          f"B={B} rows (rows past B are set to an empty sequence: -1 pages, length 0)")
            if self.kind == "torch" and a.device != str(self.device):
                raise KvattnArgumentError(f"{a.name}: is on {a.device} but the caches are on {self.device}")
            need_writable(a)  # checked here, before step() appends: a buffer that cannot take the tables fails first
            torch = sys.modules.get("torch")
            if (self.kind == "torch" and a.obj.is_inference() and not torch.is_inference_mode_enabled()):
                raise KvattnArgumentError(f"{a.name}: an inference tensor (made under torch.inference_mode()), which "
                                          f"torch lets no one update outside inference mode; call this in "
                                          f"inference mode too, or pass a tensor made outside it")
        if bt_a.shape[1] < 1:
            raise KvattnArgumentError(f"out[0] (block_table): width {bt_a.shape[1]} must be >= 1")
        return bt_a.shape[1], "out"
