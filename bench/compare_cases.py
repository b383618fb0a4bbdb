# compare_cases.py — the workloads of bench/compare.py: which cases, and the tensors of one case.
# A case is a plain dict (it goes into the JSON as is); build_inputs() turns it into torch tensors on a device.
# Every system of one case sees the same numbers: one pool of K/V pages (or one contiguous cache) per rotation,
# one page table, one set of queries. The new tokens of a step (k_new/v_new) are also written into the cache
# beforehand, so kvattn's in-place append is idempotent and the systems that do not append (FlashInfer's
# attention, FlashAttention-2, cuDNN, FlexAttention) attend to exactly the keys kvattn attends to.
import math
import random

BF16_BYTES = 2

# the decode grid of issue 3 / issue 5
DECODE_BL = [(1, 32768), (8, 8192), (64, 4096), (128, 2048), (256, 1024), (64, 16384)]
DECODE_PAGES = ["contig", 16, 1, 256]


def _parse_list(text, conv):
    return [conv(x) for x in text.split(",") if x.strip()]


def parse_bl(text):
    out = []
    for item in _parse_list(text, str):
        b, l = item.lower().split("x")
        out.append((int(b), int(l)))
    return out


def parse_pages(text):
    return [("contig" if x.strip() in ("contig", "c", "0") else int(x)) for x in text.split(",") if x.strip()]


def parse_heads(text):
    out = []
    for item in _parse_list(text, str):
        h, hk = item.split("/")
        out.append((int(h), int(hk)))
    return out


def _case(workload, name, **kw):
    c = {"workload": workload, "name": name}
    c.update(kw)
    return c


def _layout_name(page):
    return "contig" if page == "contig" else f"p{page}"


def decode_case(B, L, page, H, Hk, D):
    return _case("decode", f"decode B{B}xL{L} {_layout_name(page)} H{H}/{Hk} D{D}", B=B, H=H, Hk=Hk, D=D,
                 page=page, n_q=[1] * B, n_new=[0] * B, S=[L] * B, causal=False, L=L, shared_prefix=0)


def inflight_case(seed, page=16, H=32, Hk=8, D=128, n_dec=60, n_prompt=4, prompt_len=512, lo=512, hi=8192):
    rng = random.Random(seed)
    S = [rng.randint(lo, hi) for _ in range(n_dec)] + [0] * n_prompt
    n_q = [1] * n_dec + [prompt_len] * n_prompt
    # the decodes' lengths are "cache lengths": the new token makes it S + 1 visible keys
    return _case("inflight", f"inflight {n_dec}dec+{n_prompt}x{prompt_len} {_layout_name(page)} H{H}/{Hk} D{D}",
                 B=n_dec + n_prompt, H=H, Hk=Hk, D=D, page=page, n_q=n_q, n_new=list(n_q), S=S, causal=True,
                 shared_prefix=0)


def spec_case(page=16, B=64, nq=4, L=4096, H=32, Hk=8, D=128):
    # L visible keys per sequence after the step: L - nq cached + nq new (the speculated tokens)
    return _case("spec", f"spec B{B} q{nq} L{L} {_layout_name(page)} H{H}/{Hk} D{D}", B=B, H=H, Hk=Hk, D=D,
                 page=page, n_q=[nq] * B, n_new=[nq] * B, S=[L - nq] * B, causal=True, L=L, shared_prefix=0)


def shared_prefix_case(page=16, B=64, prefix=2048, own=256, H=32, Hk=8, D=128):
    # one decode step of a group of B samples of one prompt: the prompt's pages are shared by every sample
    return _case("shared", f"shared-prefix B{B} {prefix}+{own} {_layout_name(page)} H{H}/{Hk} D{D}", B=B, H=H,
                 Hk=Hk, D=D, page=page, n_q=[1] * B, n_new=[0] * B, S=[prefix + own] * B, causal=False,
                 L=prefix + own, shared_prefix=prefix)


def prefill_case(L, D, total=16384, H=32, Hk=8):
    B = max(1, total // L)
    return _case("prefill", f"prefill causal B{B}xL{L} H{H}/{Hk} D{D}", B=B, H=H, Hk=Hk, D=D, page=None,
                 n_q=[L] * B, n_new=[L] * B, S=[0] * B, causal=True, L=L, shared_prefix=0)


def select_cases(args):
    """The case list for the command-line arguments (see compare.py --help). The mixed steps come first, then
    decode, then prefill, so that a run cut short by its time budget still has the most telling cases."""
    wl = set(args.workloads.split(","))
    cases = []
    if "inflight" in wl:
        cases.append(inflight_case(args.seed))
    if "spec" in wl:
        cases += [spec_case(page=p) for p in ((16,) if args.quick else (16, "contig"))]
    if "shared" in wl:
        cases.append(shared_prefix_case())
    if "decode" in wl:
        if args.quick:
            grid = [(8, 8192, p, 32, 8, 128) for p in ("contig", 16)] + [(64, 4096, 16, 32, 8, 128)]
        elif args.bl or args.pages or args.heads or args.dims or args.decode_full:
            bls = parse_bl(args.bl) if args.bl else DECODE_BL
            pages = parse_pages(args.pages) if args.pages else DECODE_PAGES
            heads = parse_heads(args.heads) if args.heads else ([(32, 8), (32, 32)] if args.decode_full else [(32, 8)])
            dims = _parse_list(args.dims, int) if args.dims else ([64, 128, 256] if args.decode_full else [128])
            grid = [(b, l, p, h, hk, d) for (h, hk) in heads for d in dims for p in pages for (b, l) in bls]
        else:
            # default: the full B x L x page grid at the headline shape (the issue-3 target shapes first, layouts
            # interleaved, so that budgeted peers such as FlexAttention's compiles cover the most telling cases),
            # then a cross of head dims and MHA
            order = [(64, 4096), (8, 8192), (1, 32768), (256, 1024), (64, 16384), (128, 2048)]
            grid = [(b, l, p, 32, 8, 128) for (b, l) in order for p in DECODE_PAGES]
            for d in (64, 256):
                grid += [(b, l, p, 32, 8, d) for p in ("contig", 16) for (b, l) in ((8, 8192), (64, 4096))]
            grid += [(b, l, p, 32, 32, 128) for p in ("contig", 16) for (b, l) in ((8, 8192), (64, 4096))]
        cases += [decode_case(*g) for g in grid]
    if "prefill" in wl:
        if args.quick:
            plist = [(1024, 128), (4096, 128)]
        else:
            lens = _parse_list(args.prefill_lens, int)
            dims = _parse_list(args.prefill_dims, int)
            plist = [(l, d) for d in sorted(dims, key=lambda d: (d != 128, d)) for l in lens]
        total = 4096 if args.quick else 16384
        cases += [prefill_case(l, d, total=total) for (l, d) in plist]
    return cases


# ---- accounting ---------------------------------------------------------------------------------------------

def case_floors(c):
    """Bytes that must move and FLOPs that must be done (causal FLOPs counted for the visible keys only)."""
    H, Hk, D = c["H"], c["Hk"], c["D"]
    kv_row = 2 * Hk * D * BF16_BYTES  # K and V of one token
    q_row = H * D * BF16_BYTES
    n_q, n_new, S = c["n_q"], c["n_new"], c["S"]
    flops = 0
    visible = 0
    for nq, nn, s in zip(n_q, n_new, S):
        T = s + nn
        if c["causal"]:
            # query i sees T - nq + i + 1 keys
            vis = nq * (T - nq) + nq * (nq + 1) // 2
        else:
            vis = nq * T
        flops += 4 * H * D * vis
        visible += T
    if c["workload"] == "prefill":
        bytes_ = sum(n_q) * (2 * q_row + kv_row)  # q, out, k, v once
    else:
        unique_kv = visible
        if c.get("shared_prefix"):
            unique_kv = visible - (c["B"] - 1) * c["shared_prefix"]
        bytes_ = unique_kv * kv_row + sum(n_q) * 2 * q_row + sum(n_new) * kv_row  # + the appended rows
    return {"bytes": int(bytes_), "flops": int(flops), "visible_kv_tokens": int(visible)}


# ---- tensors -----------------------------------------------------------------------------------------------

class Inputs:
    """Tensors of one case on one device, `rot` rotations of everything the kernels read."""

    def __init__(self, case, device, seed, rot_bytes):
        import torch
        self.torch = torch
        self.case = c = case
        self.device = device
        self.dtype = torch.bfloat16
        B, H, Hk, D = c["B"], c["H"], c["Hk"], c["D"]
        self.B, self.H, self.Hk, self.D = B, H, Hk, D
        self.n_q, self.n_new, self.S = list(c["n_q"]), list(c["n_new"]), list(c["S"])
        self.T = [s + n for s, n in zip(self.S, self.n_new)]
        self.total_q, self.total_new = sum(self.n_q), sum(self.n_new)
        self.uniform_q = len(set(self.n_q)) == 1
        self.uniform_T = len(set(self.T)) == 1
        self.scale = 1.0 / math.sqrt(D)
        g = torch.Generator(device="cpu").manual_seed(seed)
        self.gen_seed = seed
        ints = dict(dtype=torch.int32, device=device)
        self.cu_q = torch.tensor([0] + _cumsum(self.n_q), **ints)
        self.cu_new = torch.tensor([0] + _cumsum(self.n_new), **ints)
        self.cu_T = torch.tensor([0] + _cumsum(self.T), **ints)
        self.cache_seqlens = torch.tensor(self.S, **ints)
        self.seqlens_T = torch.tensor(self.T, **ints)
        self.page = c["page"]
        nbytes = case_floors(c)["bytes"]
        self.rot = max(1, min(16, math.ceil(rot_bytes / max(nbytes, 1))))
        randn = lambda *shape: torch.randn(*shape, generator=g, dtype=torch.float32).to(device=device, dtype=self.dtype) \
            if _numel(shape) < (1 << 24) else _randn_dev(torch, shape, device, self.dtype, g)
        self.q = [randn(self.total_q, H, D) for _ in range(self.rot)]
        if c["workload"] == "prefill":
            self.k = [randn(self.total_q, Hk, D) for _ in range(self.rot)]
            self.v = [randn(self.total_q, Hk, D) for _ in range(self.rot)]
            self.max_q = max(self.n_q)
            return
        self.max_q = max(self.n_q)
        rng = random.Random(seed + 1)
        if self.page == "contig":
            C = max(self.T)
            self.capacity = C
            self.k_cache = [randn(B, C, Hk, D) for _ in range(self.rot)]
            self.v_cache = [randn(B, C, Hk, D) for _ in range(self.rot)]
            self.block_table = None
            self.num_pages = B
            self.page_size = C
        else:
            ps = int(self.page)
            npg = [(t + ps - 1) // ps for t in self.T]
            shared = c.get("shared_prefix", 0)
            if shared % ps:
                raise ValueError(f"shared prefix {shared} is not a multiple of the page size {ps}")
            n_shared = shared // ps
            total = n_shared + sum(n - n_shared for n in npg)
            perm = list(range(total))
            rng.shuffle(perm)  # scattered pages, as after a while of inflight batching
            it = iter(perm)
            shared_pages = [next(it) for _ in range(n_shared)]
            maxp = max(npg)
            rows = []
            for n in npg:
                row = shared_pages + [next(it) for _ in range(n - n_shared)]
                rows.append(row + [0] * (maxp - len(row)))
            self.block_rows = [r[:n] for r, n in zip(rows, npg)]
            self.block_table = torch.tensor(rows, **ints)
            self.num_pages = total
            self.page_size = ps
            self.capacity = maxp * ps
            self.k_cache = [randn(total, ps, Hk, D) for _ in range(self.rot)]
            self.v_cache = [randn(total, ps, Hk, D) for _ in range(self.rot)]
        # the new tokens = what the cache already holds at their positions (idempotent append)
        self.k_new, self.v_new = [], []
        for r in range(self.rot):
            if self.total_new:
                kn = torch.cat([self.seq_kv(r, b)[0][self.S[b]:self.T[b]] for b in range(B)])
                vn = torch.cat([self.seq_kv(r, b)[1][self.S[b]:self.T[b]] for b in range(B)])
            else:
                kn = vn = None
            self.k_new.append(kn)
            self.v_new.append(vn)
        self._packed = {}
        self._dense = {}

    # logical views (gathers: used for references and for peers that need another layout)
    def seq_kv(self, r, b):
        """K and V of sequence b, rotation r: [T_b, Hk, D] each (a gather for a paged cache)."""
        T = self.T[b]
        if self.page == "contig":
            return self.k_cache[r][b, :T], self.v_cache[r][b, :T]
        idx = self.torch.tensor(self.block_rows[b], device=self.device, dtype=self.torch.long)
        k = self.k_cache[r][idx].reshape(-1, self.Hk, self.D)[:T]
        v = self.v_cache[r][idx].reshape(-1, self.Hk, self.D)[:T]
        return k, v

    def packed_kv(self, r):
        """[sum T_b, Hk, D] K and V (varlen layout); cached per rotation."""
        if self.case["workload"] == "prefill":
            return self.k[r], self.v[r]
        if r not in self._packed:
            ks, vs = zip(*[self.seq_kv(r, b) for b in range(self.B)])
            self._packed[r] = (self.torch.cat(ks).contiguous(), self.torch.cat(vs).contiguous())
        return self._packed[r]

    def dense_kv(self, r):
        """[B, T, Hk, D] K and V when every sequence has T keys (the contiguous cache itself when it fits)."""
        if not self.uniform_T:
            raise ValueError("sequences have different key counts")
        if self.case["workload"] == "prefill":
            return (self.k[r].view(self.B, self.T[0], self.Hk, self.D),
                    self.v[r].view(self.B, self.T[0], self.Hk, self.D))
        if self.page == "contig" and self.capacity == self.T[0]:
            return self.k_cache[r], self.v_cache[r]
        if r not in self._dense:
            k, v = self.packed_kv(r)
            self._dense[r] = (k.view(self.B, self.T[0], self.Hk, self.D), v.view(self.B, self.T[0], self.Hk, self.D))
        return self._dense[r]

    def drop_derived(self):
        self._packed.clear()
        self._dense.clear()

    def reference(self, r, seqs, max_rows=256):
        """fp32 attention of SPEC.md for the sequences `seqs` (at most the last max_rows query rows each):
        returns {b: (row_slice_in_packed_q, out[rows, H, D] fp32)}."""
        torch = self.torch
        out = {}
        cu = [0] + _cumsum(self.n_q)
        for b in seqs:
            nq = self.n_q[b]
            if self.case["workload"] == "prefill":
                k, v = self.k[r][cu[b]:cu[b + 1]], self.v[r][cu[b]:cu[b + 1]]
            else:
                k, v = self.seq_kv(r, b)
            T = k.shape[0]
            lo = max(0, nq - max_rows)
            q = self.q[r][cu[b] + lo:cu[b + 1]].float()
            G = self.H // self.Hk
            kf = k.float().repeat_interleave(G, dim=1)  # [T, H, D]
            vf = v.float().repeat_interleave(G, dim=1)
            s = torch.einsum("qhd,khd->hqk", q, kf) * self.scale
            if self.case["causal"]:
                qi = torch.arange(lo, nq, device=self.device)[:, None] + (T - nq)
                kj = torch.arange(T, device=self.device)[None, :]
                s = s.masked_fill((kj > qi)[None], float("-inf"))
            p = torch.softmax(s, dim=-1)
            o = torch.einsum("hqk,khd->qhd", p, vf)
            out[b] = (slice(cu[b] + lo, cu[b + 1]), o)
        return out

    def release(self):
        for name in ("q", "k", "v", "k_cache", "v_cache", "k_new", "v_new"):
            if hasattr(self, name):
                setattr(self, name, None)
        self._packed = {}
        self._dense = {}


def _cumsum(xs):
    out, s = [], 0
    for x in xs:
        s += x
        out.append(s)
    return out


def _numel(shape):
    n = 1
    for s in shape:
        n *= s
    return n


def _randn_dev(torch, shape, device, dtype, g):
    # large tensors: draw on the device (a seeded device generator) instead of moving gigabytes from the host
    seed = int(torch.randint(0, 2 ** 62, (1,), generator=g).item())
    dg = torch.Generator(device=device).manual_seed(seed)
    return torch.randn(*shape, generator=dg, device=device, dtype=torch.float32).to(dtype) \
        if _numel(shape) < (1 << 30) else torch.randn(*shape, generator=dg, device=device, dtype=dtype)
