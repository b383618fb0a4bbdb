# compare_systems.py — the systems bench/compare.py runs side by side: kvattn and its peers.
# Each system's prepare(inp) returns a callable run(r) -> out [total_q, H, D] (the packed query order) for
# rotation r, or raises Unsupported(reason) when it cannot run that case. Anything else it raises is an
# error of that system for that case; compare.py records it and goes on.
import os


class Unsupported(Exception):
    pass


# ---- kvattn ------------------------------------------------------------------------------------------------

class Kvattn:
    name = "kvattn"

    def __init__(self, torch):
        self.torch = torch
        import kvattn  # noqa: F401  (the import error is the reason when it fails)
        self.mod = kvattn
        self.version = getattr(kvattn, "__version__", "?")

    def prepare(self, inp):
        kv, torch = self.mod, self.torch
        c = inp.case
        # dev: KVATTN_BENCH_SPLITS=n passes num_splits=n to the decode calls (0, the default: automatic)
        ns = int(os.environ.get("KVATTN_BENCH_SPLITS", "0"))
        outs = [torch.empty(inp.total_q, inp.H, inp.D, device=inp.device, dtype=inp.dtype) for _ in range(inp.rot)]
        if c["workload"] == "prefill":
            def run(r):
                return kv.flash_attn_varlen_func(inp.q[r], inp.k[r], inp.v[r], inp.cu_q, inp.cu_q, inp.max_q,
                                                 inp.max_q, causal=True, out=outs[r])
            return run
        bt = inp.block_table
        if inp.uniform_q:
            B, nq = inp.B, inp.n_q[0]
            nn = inp.n_new[0] if inp.total_new else 0
            if inp.total_new and len(set(inp.n_new)) != 1:
                raise Unsupported("ragged new tokens need the varlen entry point")

            def run(r):
                q = inp.q[r].view(B, nq, inp.H, inp.D)
                kn = inp.k_new[r].view(B, nn, inp.Hk, inp.D) if nn else None
                vn = inp.v_new[r].view(B, nn, inp.Hk, inp.D) if nn else None
                o = kv.flash_attn_with_kvcache(q, inp.k_cache[r], inp.v_cache[r], k=kn, v=vn,
                                               cache_seqlens=inp.cache_seqlens, block_table=bt,
                                               causal=c["causal"], num_splits=ns,
                                               out=outs[r].view(B, nq, inp.H, inp.D))
                return o.view(inp.total_q, inp.H, inp.D)
            return run

        def run(r):
            return kv.flash_attn_varlen_func_with_kvcache(
                inp.q[r], inp.k_cache[r], inp.v_cache[r], inp.cu_q, inp.max_q, k=inp.k_new[r], v=inp.v_new[r],
                cu_seqlens_k=inp.cu_new, cache_seqlens=inp.cache_seqlens, block_table=bt, causal=c["causal"],
                out=outs[r])
        return run

    def reserve(self, nbytes=256 << 20):
        try:
            self.mod.reserve_workspace(nbytes)
        except Exception:
            pass


# ---- PyTorch's FlashAttention-2 (aten._flash_attention_forward) ---------------------------------------------

class FA2:
    """Dense [B, S, H, D] when the batch is uniform and the cache contiguous (as a cache user would call it)."""
    name = "fa2"

    def __init__(self, torch, op=None):
        self.torch = torch
        self.op = op or torch.ops.aten._flash_attention_forward

    def prepare(self, inp):
        c = inp.case
        if c["workload"] != "prefill" and inp.page != "contig":
            raise Unsupported("no paged KV cache (no block_table) in aten._flash_attention_forward; see fa2-varlen")
        if not (inp.uniform_q and inp.uniform_T):
            raise Unsupported("ragged batch: dense layout would pad; see fa2-varlen")
        B, nq, T = inp.B, inp.n_q[0], inp.T[0]
        # the contiguous cache is read in place only when its capacity is T; else a gathered copy (not timed)
        kvs = [inp.dense_kv(r) for r in range(inp.rot)]

        def run(r):
            q = inp.q[r].view(B, nq, inp.H, inp.D)
            k, v = kvs[r]
            o = self.op(q, k, v, None, None, nq, T, 0.0, c["causal"], False, scale=inp.scale)[0]
            return o.view(inp.total_q, inp.H, inp.D)
        return run


class FA2Varlen:
    """Varlen: packed queries and packed keys (cu_seqlens); the KV is a packed copy of the cache (not timed)."""
    name = "fa2-varlen"

    def __init__(self, torch, op=None):
        self.torch = torch
        self.op = op or torch.ops.aten._flash_attention_forward

    def prepare(self, inp):
        c = inp.case
        if c["workload"] == "decode":
            raise Unsupported("decode: see fa2 (contiguous cache); aten FA2 has no paged cache to read in place")
        kvs = [inp.packed_kv(r) for r in range(inp.rot)]
        max_T = max(inp.T)

        def run(r):
            k, v = kvs[r]
            return self.op(inp.q[r], k, v, inp.cu_q, inp.cu_T, inp.max_q, max_T, 0.0, c["causal"], False,
                           scale=inp.scale)[0]
        if c["workload"] != "prefill":
            run.note = "reads a packed copy of the KV (cache gathered, not timed)"
            if c.get("shared_prefix"):
                run.note += "; the shared prefix is duplicated per sequence"
        return run


# ---- cuDNN attention through SDPA -----------------------------------------------------------------------------

class CuDNN:
    name = "cudnn"

    def __init__(self, torch, cpu_math=False):
        self.torch = torch
        import contextlib
        from torch.nn.attention import SDPBackend, sdpa_kernel
        self.ctx = (lambda: sdpa_kernel([SDPBackend.CUDNN_ATTENTION])) if not cpu_math else contextlib.nullcontext
        self.F = torch.nn.functional

    def prepare(self, inp):
        torch, c = self.torch, inp.case
        if c["workload"] != "prefill" and inp.page != "contig":
            raise Unsupported("no paged KV cache through SDPA")
        if not (inp.uniform_q and inp.uniform_T):
            raise Unsupported("ragged batch: SDPA takes dense [B, H, S, D] (padding)")
        B, nq, T = inp.B, inp.n_q[0], inp.T[0]
        if c["causal"] and nq != T:
            raise Unsupported("SDPA is_causal is top-left aligned; bottom-right causal needs an explicit mask "
                              "(not a cuDNN fast path)")
        kvs = [inp.dense_kv(r) for r in range(inp.rot)]
        G = inp.H // inp.Hk
        note = None

        def make(expand):
            def run(r):
                q = inp.q[r].view(B, nq, inp.H, inp.D).transpose(1, 2)
                k, v = kvs[r]
                k, v = k.transpose(1, 2), v.transpose(1, 2)
                if expand:
                    k, v = k.repeat_interleave(G, dim=1), v.repeat_interleave(G, dim=1)
                with self.ctx():
                    o = self.F.scaled_dot_product_attention(q, k, v, is_causal=c["causal"], scale=inp.scale,
                                                            enable_gqa=(G > 1 and not expand))
                return o.transpose(1, 2).reshape(inp.total_q, inp.H, inp.D)
            return run

        run = make(False)
        try:
            run(0)
            if torch.cuda.is_available():
                torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001
            if G == 1 or c["workload"] != "prefill":
                raise Unsupported(f"cuDNN SDPA refused: {_short(e)}")
            # prefill is compute-bound: expanding K/V to H heads costs little; say so
            run = make(True)
            note = "K/V expanded to H heads (cuDNN refused enable_gqa)"
        run.note = note
        return run


# ---- FlexAttention ---------------------------------------------------------------------------------------------

class Flex:
    name = "flex"

    def __init__(self, torch, budget_s, compiled=True):
        self.torch = torch
        import torch._dynamo
        from torch.nn.attention import flex_attention as fa
        self.fa = fa
        torch._dynamo.config.cache_size_limit = 1024
        if hasattr(torch._dynamo.config, "recompile_limit"):
            torch._dynamo.config.recompile_limit = 1024
        if hasattr(torch._dynamo.config, "accumulated_cache_size_limit"):
            torch._dynamo.config.accumulated_cache_size_limit = 4096
        if hasattr(torch._dynamo.config, "accumulated_recompile_limit"):
            torch._dynamo.config.accumulated_recompile_limit = 4096
        self.flex = torch.compile(fa.flex_attention, dynamic=False) if compiled else fa.flex_attention
        self.budget_s = budget_s
        self.spent_s = 0.0

    def prepare(self, inp):
        torch, fa, c = self.torch, self.fa, inp.case
        if self.spent_s > self.budget_s:
            raise Unsupported(f"compile budget spent ({self.spent_s:.0f} s > --flex-budget {self.budget_s} s)")
        G = inp.H // inp.Hk
        copy_note = None
        if c["workload"] != "prefill" and inp.page != "contig":
            if c["workload"] in ("decode", "shared"):
                return self._paged(inp)
            copy_note = "KV gathered into a contiguous copy (not timed): no paged path wired for this case"
        if inp.uniform_q and inp.uniform_T:
            B, nq, T = inp.B, inp.n_q[0], inp.T[0]
            kvs = [inp.dense_kv(r) for r in range(inp.rot)]
            bm = None
            if c["causal"]:
                off = T - nq

                def causal(b, h, qi, kj):
                    return kj <= qi + off
                bm = fa.create_block_mask(causal, None, None, nq, T, device=inp.device)

            def run(r):
                q = inp.q[r].view(B, nq, inp.H, inp.D).transpose(1, 2)
                k, v = kvs[r]
                o = self.flex(q, k.transpose(1, 2), v.transpose(1, 2), block_mask=bm, scale=inp.scale,
                              enable_gqa=G > 1)
                return o.transpose(1, 2).reshape(inp.total_q, inp.H, inp.D)
            run.note = copy_note
            return run
        # ragged: one packed sequence with a document mask (bottom-right causal inside each document)
        kvs = [inp.packed_kv(r) for r in range(inp.rot)]
        Tq, Tk = inp.total_q, sum(inp.T)
        doc_q = torch.repeat_interleave(torch.arange(inp.B, device=inp.device),
                                        torch.tensor(inp.n_q, device=inp.device))
        doc_k = torch.repeat_interleave(torch.arange(inp.B, device=inp.device),
                                        torch.tensor(inp.T, device=inp.device))
        q0, k0 = inp.cu_q.long(), inp.cu_T.long()
        shift = torch.tensor([t - n for t, n in zip(inp.T, inp.n_q)], device=inp.device)
        causal_flag = bool(c["causal"])

        def doc_mask(b, h, qi, kj):
            d = doc_q[qi]
            same = d == doc_k[kj]
            if causal_flag:
                same = same & ((kj - k0[d]) <= (qi - q0[d] + shift[d]))
            return same
        bm = fa.create_block_mask(doc_mask, None, None, Tq, Tk, device=inp.device)

        def run(r):
            k, v = kvs[r]
            o = self.flex(inp.q[r].transpose(0, 1)[None], k.transpose(0, 1)[None], v.transpose(0, 1)[None],
                          block_mask=bm, scale=inp.scale, enable_gqa=G > 1)
            return o[0].transpose(0, 1)
        run.note = "one packed sequence, document mask" + (("; " + copy_note) if copy_note else "")
        return run

    def _paged(self, inp):
        """torch.nn.attention.experimental._paged_attention: the pool as [1, Hk, pages * page_size, D], our page
        table, the logical block mask converted to physical pages (decode only)."""
        torch, fa, c = self.torch, self.fa, inp.case
        if not (c["workload"] in ("decode", "shared") and inp.uniform_q and inp.n_q[0] == 1):
            raise Unsupported("paged FlexAttention is only wired for decode here")
        ps = inp.page_size
        if ps < 16 or ps & (ps - 1):
            raise Unsupported(f"page_size={ps}: flex's block size must be a power of two >= 16")
        try:
            from torch.nn.attention.experimental._paged_attention import PagedAttention
        except Exception as e:  # noqa: BLE001
            raise Unsupported(f"no PagedAttention: {_short(e)}")
        B, G, Hk, D = inp.B, inp.H // inp.Hk, inp.Hk, inp.D
        P = inp.num_pages
        pa = PagedAttention(P, ps, B, device=inp.device)
        # our page table, written into PagedAttention's own bookkeeping (its reserve() allocates its own pages)
        pa.page_table.fill_(-1)
        pa.physical_to_logical.fill_(-1)
        for b, row in enumerate(inp.block_rows):
            rows = torch.tensor(row, device=inp.device, dtype=torch.int64)
            pa.page_table[b, :len(row)] = rows
            pa.physical_to_logical[b, rows] = torch.arange(len(row), device=inp.device)
            pa.capacity[b] = len(row) * ps
        # the pool in flex's layout (a copy of the same numbers; not timed)
        kc = [inp.k_cache[r].permute(2, 0, 1, 3).reshape(1, Hk, P * ps, D).contiguous() for r in range(inp.rot)]
        vc = [inp.v_cache[r].permute(2, 0, 1, 3).reshape(1, Hk, P * ps, D).contiguous() for r in range(inp.rot)]
        T = inp.T[0] if inp.uniform_T else max(inp.T)
        seqlens = inp.seqlens_T.long()

        def logical(b, h, qi, kj):
            return kj < seqlens[b]
        lbm = fa.create_block_mask(logical, B, None, 1, T, device=inp.device, BLOCK_SIZE=(128, ps))
        pbm = pa.convert_logical_block_mask(lbm)
        score_mod = pa.get_score_mod(None)

        def run(r):
            q = inp.q[r].view(B, 1, inp.H, D).transpose(1, 2)
            o = self.flex(q, kc[r], vc[r], block_mask=pbm, score_mod=score_mod, scale=inp.scale,
                          enable_gqa=G > 1)
            return o.transpose(1, 2).reshape(inp.total_q, inp.H, D)
        run.note = "flex PagedAttention, pool copied to [1, Hk, pages*ps, D]"
        return run


# ---- FlashInfer ----------------------------------------------------------------------------------------------

class FlashInfer:
    name = "flashinfer"

    def __init__(self, torch, device, ready=None, prefill_backend="auto", failed=None):
        self.torch = torch
        import flashinfer
        self.fi = flashinfer
        self.version = getattr(flashinfer, "__version__", "?")
        self.ws = torch.empty(256 << 20, dtype=torch.uint8, device=device)
        # ready: None = build anything at first use; else {module key: backend} of the modules prebuilt
        self.ready = ready
        self.failed = failed or {}
        self.prefill_backend = prefill_backend

    @staticmethod
    def module_keys(case):
        """Keys naming the JIT modules one case needs (prebuilt in a subprocess; see compare.py)."""
        H, Hk, D = case["H"], case["Hk"], case["D"]
        if case["workload"] == "decode":
            return [("decode-tc" if H // Hk >= 4 else "decode", D)]
        if case["workload"] == "shared":  # the decode wrapper; the cascade (prefill kernels + merge) on its own
            return [("decode-tc" if H // Hk >= 4 else "decode", D)]
        return [("prefill", D)]

    @staticmethod
    def extra_keys(case):
        return [("cascade", case["D"])] if case.get("shared_prefix") and case["page"] != "contig" else []

    def _backend(self, case):
        """The backend for this case's module: the one its prebuild succeeded with (auto, or fa2 after a
        failed fa3 build); raises Unsupported when the module was not built in time."""
        if self.ready is None:
            return self.prefill_backend
        backend = self.prefill_backend
        for key in self.module_keys(case):
            if tuple(key) not in self.ready:
                why = [f"{k}: {v[:200]}" for k, v in self.failed.items()
                       if k == "import" or k.startswith(f'["{key[0]}",{key[1]},')]
                if why:
                    raise Unsupported(f"JIT module {key[0]} D={key[1]} failed: " + " | ".join(why))
                raise Unsupported(f"JIT module {key[0]} D={key[1]} not compiled within --flashinfer-jit-budget")
            backend = self.ready[tuple(key)]
        return backend

    def prepare(self, inp):
        fi, torch, c = self.fi, self.torch, inp.case
        backend = self._backend(c)
        dev, bf = inp.device, inp.dtype
        if c["workload"] == "prefill":
            w = fi.BatchPrefillWithRaggedKVCacheWrapper(self.ws, "NHD", backend=backend)
            w.plan(inp.cu_q, inp.cu_q, inp.H, inp.Hk, inp.D, causal=True, sm_scale=inp.scale, q_data_type=bf,
                   kv_data_type=bf)
            outs = [torch.empty(inp.total_q, inp.H, inp.D, device=dev, dtype=bf) for _ in range(inp.rot)]

            def run(r):
                return w.run(inp.q[r], inp.k[r], inp.v[r], out=outs[r])
            if backend != "auto":
                run.note = f"{backend} backend"
            return run
        # paged (the same pool and page table as kvattn); a contiguous cache is a pool of B pages of C tokens
        if inp.page == "contig":
            ps = inp.capacity
            indices = torch.arange(inp.B, device=dev, dtype=torch.int32)
            indptr = torch.arange(inp.B + 1, device=dev, dtype=torch.int32)
            last = torch.tensor(inp.T, device=dev, dtype=torch.int32)
            note = "contiguous cache as one page of C tokens per sequence"
        else:
            ps = inp.page_size
            rows = inp.block_rows
            indices = torch.tensor([p for row in rows for p in row], device=dev, dtype=torch.int32)
            counts = [len(row) for row in rows]
            indptr = torch.tensor([0] + _cumsum(counts), device=dev, dtype=torch.int32)
            last = torch.tensor([t - (n - 1) * ps for t, n in zip(inp.T, counts)], device=dev, dtype=torch.int32)
            note = None
        outs = [torch.empty(inp.total_q, inp.H, inp.D, device=dev, dtype=bf) for _ in range(inp.rot)]
        if c["workload"] in ("decode", "shared") and inp.uniform_q and inp.n_q[0] == 1:
            tc = inp.H // inp.Hk >= 4
            w = fi.BatchDecodeWithPagedKVCacheWrapper(self.ws, "NHD", use_tensor_cores=tc, backend=backend)
            w.plan(indptr, indices, last, inp.H, inp.Hk, inp.D, ps, pos_encoding_mode="NONE", q_data_type=bf,
                   kv_data_type=bf, sm_scale=inp.scale)
            note = ((note + "; ") if note else "") + ("tensor-core decode" if tc else "CUDA-core decode")
            if tc and backend != "auto":
                note += f" ({backend})"
        else:
            w = fi.BatchPrefillWithPagedKVCacheWrapper(self.ws, "NHD", backend=backend)
            w.plan(inp.cu_q, indptr, indices, last, inp.H, inp.Hk, inp.D, ps, causal=c["causal"],
                   sm_scale=inp.scale, q_data_type=bf, kv_data_type=bf)
            note = ((note + "; ") if note else "") + "attention only (no cache append)"
            if backend != "auto":
                note += f"; {backend} backend"

        def run(r):
            return w.run(inp.q[r], (inp.k_cache[r], inp.v_cache[r]), out=outs[r])
        run.note = note
        return run


def fa2_emulation(torch):
    """A CPU stand-in for aten._flash_attention_forward (dry runs only): dense [B, S, H, D] or varlen with
    cu_seqlens, GQA, causal aligned bottom-right as FlashAttention-2 does. Returns (out,)."""
    def op(q, k, v, cu_q, cu_k, max_q, max_k, dropout_p, causal, debug, scale=None):
        if cu_q is None:
            return (torch.stack([op(q[b], k[b], v[b], torch.tensor([0, q.shape[1]]), torch.tensor([0, k.shape[1]]),
                                    0, 0, 0.0, causal, False, scale=scale)[0] for b in range(q.shape[0])]),)
        outs = []
        for b in range(len(cu_q) - 1):
            qb = q[int(cu_q[b]):int(cu_q[b + 1])].float()
            kb = k[int(cu_k[b]):int(cu_k[b + 1])].float()
            vb = v[int(cu_k[b]):int(cu_k[b + 1])].float()
            G = qb.shape[1] // kb.shape[1]
            kb, vb = kb.repeat_interleave(G, 1), vb.repeat_interleave(G, 1)
            s = torch.einsum("qhd,khd->hqk", qb, kb) * scale
            if causal:
                nq, T = qb.shape[0], kb.shape[0]
                m = torch.arange(T)[None, :] > (torch.arange(nq)[:, None] + T - nq)
                s = s.masked_fill(m[None], float("-inf"))
            outs.append(torch.einsum("hqk,khd->qhd", torch.softmax(s, -1), vb).to(q.dtype))
        return (torch.cat(outs),)
    return op


class FlashInferCascade:
    """FlashInfer's two-level cascade for a shared prefix: level 0 attends all queries to the shared pages once,
    level 1 each query to its own pages, then the states are merged (MultiLevelCascadeAttentionWrapper)."""
    name = "flashinfer-cascade"

    def __init__(self, fi_system):
        self.base = fi_system

    def prepare(self, inp):
        base, torch, c = self.base, self.base.torch, inp.case
        if not c.get("shared_prefix") or inp.page == "contig":
            raise Unsupported("only for a shared prefix in a paged cache")
        key = ("cascade", inp.D)
        backend = base.prefill_backend
        if base.ready is not None:
            if key not in base.ready:
                raise Unsupported(f"JIT modules of the cascade (prefill + merge) D={inp.D} not ready")
            backend = base.ready[key]
        if backend != "auto":
            raise Unsupported(f"the cascade wrapper picks its own backend; the prebuild needed {backend}")
        dev, ps = inp.device, inp.page_size
        n_sh = c["shared_prefix"] // ps
        rows = inp.block_rows
        i32 = dict(device=dev, dtype=torch.int32)
        shared = rows[0][:n_sh]
        if any(r[:n_sh] != shared for r in rows):
            raise Unsupported("the sequences do not share their first pages")
        own = [r[n_sh:] for r in rows]
        qo = [torch.tensor([0, inp.total_q], **i32), inp.cu_q]
        kv_indptr = [torch.tensor([0, n_sh], **i32), torch.tensor([0] + _cumsum([len(o) for o in own]), **i32)]
        kv_idx = [torch.tensor(shared, **i32), torch.tensor([p for o in own for p in o], **i32)]
        last = [torch.tensor([ps], **i32),
                torch.tensor([t - (len(r) - 1) * ps for t, r in zip(inp.T, rows)], **i32)]
        w = base.fi.MultiLevelCascadeAttentionWrapper(2, base.ws, "NHD")
        w.plan(qo, kv_indptr, kv_idx, last, inp.H, inp.Hk, inp.D, ps, causal=False, sm_scale=inp.scale,
               q_data_type=inp.dtype, kv_data_type=inp.dtype)

        def run(r):
            return w.run(inp.q[r], (inp.k_cache[r], inp.v_cache[r]))
        run.note = "2-level cascade: shared prefix read once for all queries"
        return run


def _cumsum(xs):
    out, s = [], 0
    for x in xs:
        s += x
        out.append(s)
    return out


def _short(e, n=300):
    s = f"{type(e).__name__}: {e}"
    s = " ".join(s.split())
    return s if len(s) <= n else s[:n] + "..."
