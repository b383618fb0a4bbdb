#!/usr/bin/env python3
"""generate_inflight.py — inflight-batching generation with a Hugging Face Llama model whose attention runs
through kvattn over a paged KV cache (page size 16), checked token for token against transformers' own eager
attention, with kvattn's batch invariance checked bitwise, and timed against transformers' padded generate().

The model is transformers' LlamaForCausalLM with a small config and random weights from a fixed seed (no weights
can be downloaded). The inflight loop runs the model's layers itself over the ragged packed batch
[total_tokens, hidden] with the HF modules' own weights (embedding, RMSNorm, q/k/v/o projections, MLP, final
norm, lm_head); only attention is kvattn's: one flash_attn_varlen_func_with_kvcache call per layer appends the
new k/v (rotated by kvattn, GPT-NeoX pairing, the rotate_half convention of HF Llama) into the paged cache and
attends. No attention code of transformers runs in the loop.

  python examples/generate_inflight.py                      # GPU: bf16, N=32 prompts, 16 slots
  python examples/generate_inflight.py --device cpu --quick # CPU smoke run (fp32, tiny model)
  python examples/generate_inflight.py --out docs/perf/generate_inflight.json   # replace the committed report

Needs: torch, transformers, numpy, and the kvattn package (PYTHONPATH=python, KVATTN_LIBRARY=.../libkvattn.so).
Hard checks (exit status 1 if one fails; the report is printed and written as JSON to --out either way):
  - no greedy flip where transformers' top-2 logit margin exceeds the largest logit difference;
  - the loop's logits are no less accurate than transformers' own eager forward in the same dtype (error
    against the fp32 forward of the same weights <= 2x transformers' + 1e-4 x the largest logit);
  - with batch_invariant, every re-checked attention call alone (B=1) gives bitwise the batched output and cache;
  - kvattn's device status shows no skipped sequence (CUDA).
Everything else (matches with generate(), whole-model log-prob invariance, speed) is reported, never hidden.
"""
import argparse
import collections
import copy
import importlib
import json
import os
import platform
import sys
import time
import traceback

# CPU runs: torch and libkvattn each bring an OpenMP runtime; spinning idle threads of one starve the other
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")
# cuBLAS is bitwise reproducible run to run on one stream; this makes it so in every case (torch's advice)
os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")

try:
    import torch  # noqa: E402
    import transformers  # noqa: E402,F401  (checked here, used in build_model)
except ImportError as e:
    sys.exit(f"generate_inflight.py needs torch and transformers (pip install torch transformers): {e}")

def _import_kvattn():
    """The installed kvattn package, or else the one of this checkout (python/, which finds build/libkvattn.so
    or $KVATTN_LIBRARY); exits with a how-to when neither imports."""
    try:
        return importlib.import_module("kvattn")
    except ImportError:
        sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "python"))
        sys.modules.pop("kvattn", None)
    try:
        return importlib.import_module("kvattn")
    except ImportError as e:
        sys.exit(f"generate_inflight: cannot import kvattn ({e}); build the library (make lib) and run from the "
                 f"repo root, or set PYTHONPATH=python and KVATTN_LIBRARY=/path/to/libkvattn.so, or pip install .")


kvattn = _import_kvattn()

DTYPES = {"bf16": torch.bfloat16, "fp16": torch.float16, "fp32": torch.float32}
BITS = {torch.bfloat16: torch.int16, torch.float16: torch.int16, torch.float32: torch.int32}


# ---- arguments, model, workload ----------------------------------------------------------------------------
def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", choices=("cpu", "cuda"), default=None, help="default: cuda if available")
    ap.add_argument("--dtype", choices=tuple(DTYPES), default=None, help="default: bf16 on cuda, fp32 on cpu")
    ap.add_argument("--n", type=int, default=None, help="number of prompts in the queue (default 32; quick 6)")
    ap.add_argument("--slots", type=int, default=None,
                    help="sequences in flight at once (default 16; quick 3); the padded baseline uses batches "
                         "of the same size")
    ap.add_argument("--quick", action="store_true", help="small model and workload (a CPU smoke run)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--page-size", type=int, default=16)
    ap.add_argument("--min-prompt", type=int, default=None)
    ap.add_argument("--max-prompt", type=int, default=None)
    ap.add_argument("--min-new", type=int, default=None)
    ap.add_argument("--max-new", type=int, default=None)
    ap.add_argument("--layers", type=int, default=None)
    ap.add_argument("--hidden", type=int, default=None)
    ap.add_argument("--heads", type=int, default=None)
    ap.add_argument("--kv-heads", type=int, default=None)
    ap.add_argument("--head-dim", type=int, default=None)
    ap.add_argument("--intermediate", type=int, default=None)
    ap.add_argument("--vocab", type=int, default=None)
    ap.add_argument("--bi-check-every", type=int, default=1,
                    help="check attention batch invariance at every k-th step, all layers and sequences "
                         "(0 = off; default 1 = every step)")
    ap.add_argument("--fixed-rows", type=int, default=None,
                    help="rows per fixed-shape chunk in the whole-model batch-invariance experiment "
                         "(default 64; 0 = skip the experiment)")
    ap.add_argument("--cuda-graphs", choices=("auto", "on", "off", "emulate"), default="auto",
                    help="time decode-only steps replayed from CUDA graphs (auto: on with CUDA; emulate: the same "
                         "loop and static buffers with the forward run eagerly, to test the loop on a CPU)")
    ap.add_argument("--repeats", type=int, default=None, help="timed repetitions, best kept (default 3; quick 1)")
    # (the committed report, docs/perf/generate_inflight.json, is written only when asked for by name: a smoke run on
    # another machine must not replace it)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "build",
                                                  "generate_inflight.json"),
                    help="where the JSON report goes (default: build/generate_inflight.json in the checkout)")
    args = ap.parse_args(argv)

    if args.device is None:  # a GPU with a CPU-only libkvattn is an error, not a silent (hour-long) CPU run
        args.device = "cuda" if torch.cuda.is_available() else "cpu"
    if args.dtype is None:
        args.dtype = "bf16" if args.device == "cuda" else "fp32"
    big = dict(n=32, slots=16, min_prompt=16, max_prompt=300, min_new=8, max_new=64, layers=8, hidden=1024,
               heads=16, kv_heads=4, head_dim=64, intermediate=2816, vocab=32000, repeats=3, fixed_rows=64)
    small = dict(n=6, slots=3, min_prompt=16, max_prompt=40, min_new=3, max_new=8, layers=2, hidden=256,
                 heads=4, kv_heads=2, head_dim=64, intermediate=512, vocab=512, repeats=1, fixed_rows=16)
    for k, v in (small if args.quick else big).items():
        if getattr(args, k) is None:
            setattr(args, k, v)
    if args.device == "cuda" and not torch.cuda.is_available():
        ap.error("--device cuda: torch sees no GPU (pass --device cpu --quick for a CPU run)")
    if args.device == "cuda" and not kvattn.cuda_available():
        ap.error(f"--device cuda: {kvattn.library_path} has no usable CUDA backend (kvattn.cuda_available() is "
                 f"False): build it where nvcc is (make lib), or pass --device cpu --quick")
    if args.device == "cuda" and args.dtype == "fp32":
        ap.error("--dtype fp32 works on the CPU backend only; use bf16 or fp16 with --device cuda")
    if args.device == "cpu" and args.cuda_graphs == "on":
        ap.error("--cuda-graphs on needs --device cuda")
    if not (1 <= args.min_prompt <= args.max_prompt and 1 <= args.min_new <= args.max_new):
        ap.error("need 1 <= min_prompt <= max_prompt and 1 <= min_new <= max_new")
    return args


def set_attn_implementation(model, name):
    """Switches transformers' attention implementation of a loaded model (API differs across versions)."""
    if hasattr(model, "set_attn_implementation"):
        model.set_attn_implementation(name)
    else:
        model.config._attn_implementation = name
    return model


def build_model(args, device, dtype):
    """LlamaForCausalLM with random weights from args.seed (initialised in fp32 on the CPU, then cast)."""
    import transformers
    from transformers import LlamaConfig, LlamaForCausalLM

    max_pos = args.max_prompt + args.max_new + 16
    cfg = LlamaConfig(vocab_size=args.vocab, hidden_size=args.hidden, intermediate_size=args.intermediate,
                      num_hidden_layers=args.layers, num_attention_heads=args.heads,
                      num_key_value_heads=args.kv_heads, head_dim=args.head_dim,
                      max_position_embeddings=max(max_pos, 2048), rms_norm_eps=1e-5, tie_word_embeddings=False,
                      bos_token_id=None, eos_token_id=None, pad_token_id=None, attention_bias=False,
                      mlp_bias=False)
    torch.manual_seed(args.seed)
    model = LlamaForCausalLM(cfg)
    model = model.to(device=device, dtype=dtype).eval()
    set_attn_implementation(model, "eager")
    gc = getattr(model, "generation_config", None)
    if gc is not None:  # generation ends by length only: no EOS in this config
        gc.eos_token_id, gc.bos_token_id, gc.pad_token_id = None, None, 0
    return model, transformers.__version__


def make_workload(args):
    """N prompts of random token ids (from ids >= 3), lengths uniform in [min_prompt, max_prompt], and a
    max-new-tokens for each, uniform in [min_new, max_new]; fixed by the seed."""
    g = torch.Generator().manual_seed(args.seed + 1)
    work = []
    for _ in range(args.n):
        plen = int(torch.randint(args.min_prompt, args.max_prompt + 1, (1,), generator=g))
        max_new = int(torch.randint(args.min_new, args.max_new + 1, (1,), generator=g))
        prompt = torch.randint(3, args.vocab, (plen,), generator=g).tolist()
        work.append((prompt, max_new))
    return work


# ---- the paged cache --------------------------------------------------------------------------------------
class PagedCache:
    """kvattn's PagedKVCache (page manager + layer 0's K/V pages [num_pages, page_size, Hk, D]) and the K/V pages
    of the other layers, shaped alike: one page table serves every layer because every layer appends the same
    tokens, so the loop does no page bookkeeping of its own."""

    def __init__(self, num_layers, num_pages, page_size, kv_heads, head_dim, max_pages_per_seq, dtype, device):
        self.pages = kvattn.PagedKVCache(num_pages, page_size, kv_heads, head_dim, dtype, device=device,
                                         max_pages_per_seq=max_pages_per_seq)
        self.page_size, self.num_pages, self.max_pages_per_seq = page_size, num_pages, max_pages_per_seq
        self.k = [self.pages.k_cache] + [torch.zeros_like(self.pages.k_cache) for _ in range(num_layers - 1)]
        self.v = [self.pages.v_cache] + [torch.zeros_like(self.pages.v_cache) for _ in range(num_layers - 1)]

    def add(self):
        return self.pages.add_seq()

    def release(self, seq_id):
        self.pages.free(seq_id)

    def free_pages(self):
        return self.pages.free_pages

    def step(self, seq_ids, n_new, out=None):
        """Reserves n_new[b] tokens for seq_ids[b] (all or nothing) and returns (block_table [B, W],
        cache_seqlens [B]) int32 on the device, cache_seqlens being the lengths before this step."""
        return self.pages.step(seq_ids, n_new, out=out)


# ---- the model run through kvattn ---------------------------------------------------------------------------
def bits(t):
    return t.contiguous().view(BITS[t.dtype])


class Timer:
    """Attention time: CUDA events around each kvattn call (summed after the step's synchronisation), or
    perf_counter on the CPU (where kvattn runs synchronously)."""

    def __init__(self, device, num_layers):
        self.cuda = device.type == "cuda"
        if self.cuda:
            self.ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                       for _ in range(num_layers)]
        self.t0 = [0.0] * num_layers
        self.cpu_ms = 0.0

    def start(self, layer):
        if self.cuda:
            self.ev[layer][0].record()
        else:
            self.t0[layer] = time.perf_counter()

    def stop(self, layer):
        if self.cuda:
            self.ev[layer][1].record()
        else:
            self.cpu_ms += (time.perf_counter() - self.t0[layer]) * 1e3

    def step_ms(self, layers_used):
        """Attention milliseconds of the step just finished (call after a synchronisation)."""
        if self.cuda:
            return sum(self.ev[l][0].elapsed_time(self.ev[l][1]) for l in range(layers_used))
        ms, self.cpu_ms = self.cpu_ms, 0.0
        return ms


class KvattnLlama:
    """Runs a transformers LlamaForCausalLM's modules over a ragged packed batch, attention through kvattn."""

    def __init__(self, model, device, dtype, max_pos):
        self.model, self.device, self.dtype = model, device, dtype
        cfg = model.config
        self.layers = list(model.model.layers)
        self.H, self.Hk = cfg.num_attention_heads, cfg.num_key_value_heads
        self.D = getattr(cfg, "head_dim", None) or cfg.hidden_size // cfg.num_attention_heads
        # rotary tables from the model's own rotary module, in fp32 (kvattn rotates in fp32 and rounds once;
        # HF rotates in the model dtype with cos/sin rounded to it: a last-bit difference, not a convention one)
        pos = torch.arange(max_pos, device=device)[None]
        probe = torch.zeros(1, max_pos, self.D, dtype=torch.float32, device=device)
        cos, sin = model.model.rotary_emb(probe, position_ids=pos)
        half = cos.shape[-1] // 2
        # HF's cos is cat(freqs, freqs): both halves equal (the rotate_half / GPT-NeoX pairing (i, i + D/2))
        assert torch.equal(cos[0, :, :half], cos[0, :, half:]), "unexpected rotary layout in this transformers"
        self.cos = cos[0, :, :half].float().contiguous()
        self.sin = sin[0, :, :half].float().contiguous()
        self.max_pos = max_pos
        self.fixed_rows = 0  # > 0: every non-attention op runs on fixed-shape chunks of this many rows

    def rows(self, fn, x):
        """fn over the rows of x; with fixed_rows, over zero-padded chunks of exactly fixed_rows rows, so every
        matmul and row reduction has one shape whatever the batch (the whole-model batch-invariance test)."""
        R = self.fixed_rows
        if not R:
            return fn(x)
        T = x.shape[0]
        pad = (-T) % R
        if pad:
            x = torch.cat([x, x.new_zeros((pad,) + tuple(x.shape[1:]))])
        return torch.cat([fn(c) for c in x.split(R)])[:T]

    def forward(self, ids, cu_q, last_rows, cache, block_table, cache_seqlens, batch_invariant, hook=None,
                timer=None):
        """ids [T] int64, cu_q [B+1] int32, last_rows [B] int64 (all on the device). Returns logits [B, V] fp32
        of each sequence's last row."""
        T = ids.shape[0]
        H, Hk, D = self.H, self.Hk, self.D
        x = self.model.model.embed_tokens(ids)
        for l, layer in enumerate(self.layers):
            attn = layer.self_attn

            if self.fixed_rows:
                def qkv(c, layer=layer, attn=attn):
                    h = layer.input_layernorm(c)
                    return torch.cat([attn.q_proj(h), attn.k_proj(h), attn.v_proj(h)], dim=1)

                qkv_rows = self.rows(qkv, x)
                q = qkv_rows[:, :H * D].view(T, H, D)
                k = qkv_rows[:, H * D:(H + Hk) * D].view(T, Hk, D)
                v = qkv_rows[:, (H + Hk) * D:].view(T, Hk, D)
            else:  # the model's own three projections, as its attention module computes them
                h = layer.input_layernorm(x)
                q = attn.q_proj(h).view(T, H, D)
                k = attn.k_proj(h).view(T, Hk, D)
                v = attn.v_proj(h).view(T, Hk, D)
            call = dict(k=k, v=v, cu_seqlens_k=cu_q, rotary_cos=self.cos, rotary_sin=self.sin,
                        cache_seqlens=cache_seqlens, block_table=block_table, causal=True,
                        rotary_interleaved=False, batch_invariant=batch_invariant)
            pre = hook.before(l, cache) if hook else None
            if timer:
                timer.start(l)
            o = kvattn.flash_attn_varlen_func_with_kvcache(q, cache.k[l], cache.v[l], cu_q, 0, **call)
            if timer:
                timer.stop(l)
            if hook:
                hook.after(l, cache, pre, q, k, v, o)
            x = x + self.rows(attn.o_proj, o.view(T, H * D))
            x = x + self.rows(lambda c, layer=layer: layer.mlp(layer.post_attention_layernorm(c)), x)
        x = x.index_select(0, last_rows)
        return self.rows(lambda c: self.model.lm_head(self.model.model.norm(c)), x).float()

    def log_softmax(self, logits):
        return self.rows(lambda c: torch.log_softmax(c, dim=-1), logits)


class BatchInvarianceCheck:
    """At a checked step, for every layer: before the batched call, copy the pages each sequence will touch into
    a scratch pool; after it, re-run that sequence's call alone (B=1) on the scratch pages and compare, bit for
    bit, its attention output rows and its cache pages (the rows it appended) with the batched call's."""

    def __init__(self, engine, step_info, batch_invariant):
        self.e, self.bi = engine, batch_invariant
        self.info = step_info  # dict: cu (list), seqlens (list), n_new (list), block_table (CPU int32)
        self.checked = self.out_mismatch = self.cache_mismatch = 0
        self.first_bad = None

    def before(self, layer, cache):
        ps = cache.page_size
        bt = self.info["block_table"]
        self.spans, idx = [], []
        for b, (S, n) in enumerate(zip(self.info["seqlens"], self.info["n_new"])):
            npg = (S + n + ps - 1) // ps
            self.spans.append((len(idx), npg))
            idx.extend(bt[b, :npg].tolist())
        self.idx = torch.tensor(idx, dtype=torch.long, device=cache.k[layer].device)
        return cache.k[layer].index_select(0, self.idx), cache.v[layer].index_select(0, self.idx)

    def after(self, layer, cache, pre, q, k, v, o):
        snap_k, snap_v = pre
        dev = q.device
        cu, seqlens = self.info["cu"], self.info["seqlens"]
        for b, (off, npg) in enumerate(self.spans):
            r0, r1 = cu[b], cu[b + 1]
            n = r1 - r0
            cu1 = torch.tensor([0, n], dtype=torch.int32, device=dev)
            o1 = kvattn.flash_attn_varlen_func_with_kvcache(
                q[r0:r1], snap_k, snap_v, cu1, n, k=k[r0:r1], v=v[r0:r1], cu_seqlens_k=cu1,
                rotary_cos=self.e.cos, rotary_sin=self.e.sin,
                cache_seqlens=torch.tensor([seqlens[b]], dtype=torch.int32, device=dev),
                block_table=torch.arange(off, off + npg, dtype=torch.int32, device=dev)[None],
                causal=True, rotary_interleaved=False, batch_invariant=self.bi)
            pages = self.idx[off:off + npg]
            out_ok = torch.equal(bits(o1), bits(o[r0:r1]))
            cache_ok = (torch.equal(bits(snap_k[off:off + npg]), bits(cache.k[layer].index_select(0, pages))) and
                        torch.equal(bits(snap_v[off:off + npg]), bits(cache.v[layer].index_select(0, pages))))
            self.checked += 1
            self.out_mismatch += not out_ok
            self.cache_mismatch += not cache_ok
            if (not out_ok or not cache_ok) and self.first_bad is None:
                self.first_bad = dict(layer=layer, batch_index=b, n_q=n, cache_seqlen=seqlens[b],
                                      max_abs_diff=float((o1.float() - o[r0:r1].float()).abs().max()))


class StatusWatch:
    """ORs kvattn's device-side status record of every CUDA call into one device tensor (no sync per call)."""

    def __init__(self, device):
        self.acc = torch.zeros(4, dtype=torch.int32, device=device)
        self.calls = 0

    def before(self, layer, cache):
        return None

    def after(self, layer, cache, pre, q, k, v, o):
        st = kvattn.device_status_tensor(q.device)
        self.acc[:2].bitwise_or_(st[:2])  # flags, and num_failed != 0 shows up as a non-zero bit pattern
        self.calls += 1


class Hooks:
    def __init__(self, *hooks):
        self.hooks = [h for h in hooks if h is not None]

    def before(self, layer, cache):
        return [h.before(layer, cache) for h in self.hooks]

    def after(self, layer, cache, pre, q, k, v, o):
        for h, p in zip(self.hooks, pre):
            h.after(layer, cache, p, q, k, v, o)


# ---- the inflight loop ----------------------------------------------------------------------------------------
class Seq:
    __slots__ = ("index", "seq_id", "prompt", "max_new", "tokens", "in_cache", "logits", "logprobs")

    def __init__(self, index, seq_id, prompt, max_new):
        self.index, self.seq_id, self.prompt, self.max_new = index, seq_id, prompt, max_new
        self.tokens, self.in_cache, self.logits, self.logprobs = [], 0, [], []


def run_inflight(eng, work, slots, cache, *, batch_invariant=True, forced=None, record=False, bi_check_every=0,
                 watch_status=False, timing=False):
    """Generates every request of `work` with at most `slots` sequences in flight. Each step: refill free slots
    from the queue (a new sequence prefills its whole prompt in the same forward as the others' decode
    tokens), one forward over the ragged batch, greedy choice (or the `forced` tokens: teacher forcing), and a
    finished sequence's pages go back to the pool at once.
    Returns dict(tokens, logits?, logprobs?, steps, wall_s, attn_ms per step, checks)."""
    dev = eng.device
    queue = collections.deque(range(len(work)))
    active, done = [], {}
    steps, attn_ms, step_kinds, step_tokens = 0, [], [], []
    bi_stats = dict(checked=0, out_mismatch=0, cache_mismatch=0, first_bad=None)
    status = StatusWatch(dev) if watch_status and dev.type == "cuda" else None
    timer = Timer(dev, len(eng.layers)) if timing else None
    if dev.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    while queue or active:
        while queue and len(active) < slots:
            i = queue.popleft()
            prompt, max_new = work[i]
            active.append(Seq(i, cache.add(), prompt, max_new))
        feeds = [s.prompt if s.in_cache == 0 else s.tokens[-1:] for s in active]
        n_new = [len(f) for f in feeds]
        bt, seqlens = cache.step([s.seq_id for s in active], n_new)
        cu = [0]
        for n in n_new:
            cu.append(cu[-1] + n)
        ids = torch.tensor([t for f in feeds for t in f], dtype=torch.long).to(dev)
        cu_q = torch.tensor(cu, dtype=torch.int32).to(dev)
        last = (torch.tensor(cu[1:], dtype=torch.long) - 1).to(dev)

        check = None
        if bi_check_every and steps % bi_check_every == 0:
            check = BatchInvarianceCheck(eng, dict(cu=cu, seqlens=[s.in_cache for s in active], n_new=n_new,
                                                   block_table=bt.cpu()), batch_invariant)
        # status first: the check's own B=1 calls rewrite the status record of the workspace
        hook = Hooks(status, check) if (check or status) else None
        logits = eng.forward(ids, cu_q, last, cache, bt, seqlens, batch_invariant, hook=hook, timer=timer)
        if forced is not None:
            choice = torch.tensor([forced[s.index][len(s.tokens)] for s in active], dtype=torch.long).to(dev)
        else:
            choice = logits.argmax(dim=-1)
        if record:
            lp = eng.log_softmax(logits).gather(1, choice[:, None])[:, 0]
        choice_list = choice.tolist()  # the step's one synchronisation
        if timer:
            attn_ms.append(timer.step_ms(len(eng.layers)))
        if check:
            for key in ("checked", "out_mismatch", "cache_mismatch"):
                bi_stats[key] += getattr(check, key)
            if bi_stats["first_bad"] is None and check.first_bad is not None:
                bi_stats["first_bad"] = dict(check.first_bad, step=steps)
        step_kinds.append("mixed" if any(s.in_cache == 0 for s in active) else "decode")
        step_tokens.append(cu[-1])
        still = []
        for b, s in enumerate(active):
            s.in_cache += n_new[b]
            s.tokens.append(choice_list[b])
            if record:
                s.logits.append(logits[b])
                s.logprobs.append(lp[b])
            if len(s.tokens) == s.max_new:
                cache.release(s.seq_id)
                done[s.index] = s
            else:
                still.append(s)
        active = still
        steps += 1
    if dev.type == "cuda":
        torch.cuda.synchronize()
    wall = time.perf_counter() - t0
    res = dict(tokens={i: s.tokens for i, s in done.items()}, steps=steps, wall_s=wall, attn_ms=attn_ms,
               step_kinds=step_kinds, step_tokens=step_tokens, bi=bi_stats)
    if record:
        res["logits"] = {i: torch.stack(s.logits) for i, s in done.items()}
        res["logprobs"] = {i: torch.stack(s.logprobs) for i, s in done.items()}
    if status is not None:
        acc = status.acc.tolist()
        res["device_status"] = dict(calls=status.calls, flags_or=acc[0], failed_or=acc[1])
    if cache.free_pages() != cache.num_pages:
        raise RuntimeError(f"page leak: {cache.num_pages - cache.free_pages()} pages still in use after the loop")
    return res


# ---- CUDA graphs for decode-only steps ---------------------------------------------------------------------------
class DecodeGraphs:
    """Decode-only steps (every sequence in flight feeds one token) replayed from CUDA graphs, one per batch size
    B = 1..slots. A graph reads static input buffers (token ids, block_table, cache_seqlens) that are refilled
    before each replay, so one graph serves every decode step of its batch size whatever the lengths and pages.
    Captured while the cache is empty: the warm-up calls write into page 0, which holds nothing yet (a sequence
    that gets it later writes each row before any read of it)."""

    def __init__(self, eng, cache, slots, batch_invariant, emulate=False):
        self.eng, self.cache, self.bi = eng, cache, batch_invariant
        self.graphs = {}
        pool = None
        dev = eng.device
        assert cache.free_pages() == cache.num_pages, "capture needs an empty cache"
        if not emulate:
            kvattn.reserve_workspace(256 << 20, device=dev, graph=True)  # the captures use it, not the graph pool
        for B in range(1, slots + 1):
            st = dict(ids=torch.full((B,), 3, dtype=torch.long, device=dev),
                      cu=torch.arange(B + 1, dtype=torch.int32, device=dev),
                      last=torch.arange(B, dtype=torch.long, device=dev),
                      bt=torch.zeros(B, cache.max_pages_per_seq, dtype=torch.int32, device=dev),
                      sl=torch.zeros(B, dtype=torch.int32, device=dev), graph=None)
            self.graphs[B] = st
            if emulate:  # --cuda-graphs emulate: the same loop and buffers, forward run eagerly (CPU testing)
                continue
            side = torch.cuda.Stream()
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):  # warm-up on a side stream, as torch recommends before a capture
                for _ in range(2):
                    eng.forward(st["ids"], st["cu"], st["last"], cache, st["bt"], st["sl"], batch_invariant)
            torch.cuda.current_stream().wait_stream(side)
            g = torch.cuda.CUDAGraph()
            with torch.cuda.graph(g, pool=pool):
                st["logits"] = eng.forward(st["ids"], st["cu"], st["last"], cache, st["bt"], st["sl"],
                                           batch_invariant)
            pool = g.pool()
            st["graph"] = g
        if not emulate:
            torch.cuda.synchronize()

    def step(self, seq_ids, tokens):
        """One decode step of the sequences seq_ids feeding `tokens` (one each): reserves their tokens, refills
        the static buffers and replays. Returns the graph's logits [B, V] (overwritten by the next replay)."""
        st = self.graphs[len(seq_ids)]
        st["ids"].copy_(torch.tensor(tokens, dtype=torch.long))
        self.cache.step(seq_ids, [1] * len(seq_ids), out=(st["bt"], st["sl"]))
        if st["graph"] is None:
            return self.eng.forward(st["ids"], st["cu"], st["last"], self.cache, st["bt"], st["sl"], self.bi)
        st["graph"].replay()
        return st["logits"]


def run_inflight_graphs(eng, work, slots, graphs, batch_invariant=True):
    """run_inflight with decode-only steps replayed from CUDA graphs (steps where a prompt prefills run
    eagerly). Returns tokens, steps, wall_s and how many steps were replayed."""
    dev, cache = eng.device, graphs.cache
    queue = collections.deque(range(len(work)))
    active, done = [], {}
    steps = replayed = 0
    sync = torch.cuda.synchronize if dev.type == "cuda" else (lambda: None)
    sync()
    t0 = time.perf_counter()
    while queue or active:
        while queue and len(active) < slots:
            i = queue.popleft()
            prompt, max_new = work[i]
            active.append(Seq(i, cache.add(), prompt, max_new))
        seq_ids = [s.seq_id for s in active]
        if all(s.in_cache > 0 for s in active):
            logits = graphs.step(seq_ids, [s.tokens[-1] for s in active])
            n_new = [1] * len(active)
            replayed += 1
        else:
            feeds = [s.prompt if s.in_cache == 0 else s.tokens[-1:] for s in active]
            n_new = [len(f) for f in feeds]
            bt, seqlens = cache.step(seq_ids, n_new)
            cu = [0]
            for n in n_new:
                cu.append(cu[-1] + n)
            logits = eng.forward(torch.tensor([t for f in feeds for t in f], dtype=torch.long).to(dev),
                                 torch.tensor(cu, dtype=torch.int32).to(dev),
                                 (torch.tensor(cu[1:], dtype=torch.long) - 1).to(dev), cache, bt, seqlens,
                                 batch_invariant)
        choice = logits.argmax(dim=-1).tolist()
        still = []
        for b, s in enumerate(active):
            s.in_cache += n_new[b]
            s.tokens.append(choice[b])
            if len(s.tokens) == s.max_new:
                cache.release(s.seq_id)
                done[s.index] = s
            else:
                still.append(s)
        active = still
        steps += 1
    sync()
    return dict(tokens={i: s.tokens for i, s in done.items()}, steps=steps, replayed=replayed,
                wall_s=time.perf_counter() - t0)


# ---- transformers' side ------------------------------------------------------------------------------------------
def hf_generate(model, prompts, max_new_list, device, batch):
    """transformers' greedy generate() over consecutive batches of `batch` prompts, left-padded, each batch to
    its longest max-new-tokens (padded batching cannot stop a row early). Returns (token lists cut to each
    request's max_new, seconds)."""
    from transformers import GenerationConfig

    out_tokens = []
    if device.type == "cuda":
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for s in range(0, len(prompts), batch):
        chunk, news = prompts[s:s + batch], max_new_list[s:s + batch]
        L = max(len(p) for p in chunk)
        ids = torch.zeros(len(chunk), L, dtype=torch.long)
        mask = torch.zeros(len(chunk), L, dtype=torch.long)
        for r, p in enumerate(chunk):
            ids[r, L - len(p):] = torch.tensor(p)
            mask[r, L - len(p):] = 1
        gc = GenerationConfig(max_new_tokens=max(news), do_sample=False, num_beams=1, pad_token_id=0,
                              eos_token_id=None, bos_token_id=None, use_cache=True)
        with torch.no_grad():
            out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), generation_config=gc)
        for r, m in enumerate(news):
            out_tokens.append(out[r, L:L + m].tolist())
    if device.type == "cuda":
        torch.cuda.synchronize()
    return out_tokens, time.perf_counter() - t0


def hf_teacher_forced_logits(model, prompt, generated, device):
    """transformers' own forward (eager attention) over prompt + generated[:-1]; logits that predict each
    generated token, fp32 [len(generated), V]."""
    full = torch.tensor(prompt + generated[:-1], dtype=torch.long, device=device)[None]
    with torch.no_grad():
        logits = model(input_ids=full, use_cache=False).logits[0]
    return logits[len(prompt) - 1:].float()


# ---- report helpers ------------------------------------------------------------------------------------------------
def summarize_ms(xs):
    if not xs:
        return None
    s = sorted(xs)
    return dict(mean=sum(s) / len(s), median=s[len(s) // 2], min=s[0], max=s[-1], count=len(s))


class Report:
    def __init__(self, path):
        self.path, self.data = path, {}

    def put(self, key, value):
        self.data[key] = value
        self.write()

    def write(self):
        if not self.path:
            return
        d = os.path.dirname(self.path)
        if d:
            os.makedirs(d, exist_ok=True)
        tmp = self.path + ".tmp"
        with open(tmp, "w") as f:
            json.dump(self.data, f, indent=2, sort_keys=False)
            f.write("\n")
        os.replace(tmp, self.path)


_T0 = time.perf_counter()


def say(msg=""):
    print(msg, flush=True)


def section(title):
    say(f"\n{title}   [t = {time.perf_counter() - _T0:.1f} s]")


# ---- main ------------------------------------------------------------------------------------------------------
def main(argv=None):
    args = parse_args(argv)
    rep = Report(args.out)
    failures, warnings = [], []
    try:
        return run_all(args, rep, failures, warnings)
    except BaseException as e:  # keep what was measured, and say where it stopped
        rep.put("error", dict(error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc(),
                              failures_so_far=failures, warnings=warnings))
        raise


def run_all(args, rep, failures, warnings):
    device, dtype = torch.device(args.device), DTYPES[args.dtype]
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    model, tf_version = build_model(args, device, dtype)
    work = make_workload(args)
    prompts, max_news = [p for p, _ in work], [m for _, m in work]
    gen_tokens = sum(max_news)
    max_pos = args.max_prompt + args.max_new + 16
    eng = KvattnLlama(model, device, dtype, max_pos)
    ps = args.page_size
    max_pages_per_seq = (args.max_prompt + args.max_new + ps - 1) // ps
    num_pages = args.slots * max_pages_per_seq + 1  # enough for `slots` longest sequences at once

    def new_cache():
        return PagedCache(args.layers, num_pages, ps, args.kv_heads, args.head_dim, max_pages_per_seq, dtype, device)

    dev_name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor() or "cpu"
    setup = dict(device=args.device, device_name=dev_name, dtype=args.dtype, torch=torch.__version__,
                 transformers=tf_version, kvattn=kvattn.version() if hasattr(kvattn, "version") else None,
                 model=dict(layers=args.layers, hidden=args.hidden, heads=args.heads, kv_heads=args.kv_heads,
                            head_dim=args.head_dim, intermediate=args.intermediate, vocab=args.vocab,
                            seed=args.seed, params=sum(p.numel() for p in model.parameters())),
                 workload=dict(n=args.n, slots=args.slots, prompt_len=[args.min_prompt, args.max_prompt],
                               max_new=[args.min_new, args.max_new], prompt_tokens=sum(map(len, prompts)),
                               generated_tokens=gen_tokens),
                 page_size=ps, num_pages=num_pages, quick=args.quick)
    rep.put("setup", setup)
    say(f"generate_inflight: {args.device} ({dev_name}), {args.dtype}, torch {torch.__version__}, transformers "
        f"{tf_version}")
    say(f"  model: Llama {args.layers} layers, hidden {args.hidden}, {args.heads} q heads / {args.kv_heads} kv "
        f"heads x {args.head_dim}, vocab {args.vocab}, {setup['model']['params'] / 1e6:.1f} M params (seed "
        f"{args.seed}, random weights)")
    say(f"  queue: {args.n} prompts of {args.min_prompt}..{args.max_prompt} tokens ({setup['workload']['prompt_tokens']}"
        f" in all), max new {args.min_new}..{args.max_new} ({gen_tokens} to generate), {args.slots} slots, "
        f"pages of {ps} ({num_pages} pages per layer)")

    with torch.no_grad():
        # 1. the reference inflight run: batch invariant, every attention call re-checked alone, logits kept
        section("[1] inflight run with checks (batch_invariant=True)")
        ref = run_inflight(eng, work, args.slots, new_cache(), batch_invariant=True, record=True,
                           bi_check_every=args.bi_check_every, watch_status=True)
        bi = ref["bi"]
        kinds = collections.Counter(ref["step_kinds"])
        say(f"  {ref['steps']} steps ({kinds['mixed']} with a prefill, {kinds['decode']} decode-only), "
            f"{gen_tokens} tokens generated")
        bi_ok = bi["out_mismatch"] == 0 and bi["cache_mismatch"] == 0
        if args.bi_check_every:
            say(f"  attention batch invariance: {bi['checked']} (step, layer, sequence) calls re-run alone: "
                f"{bi['out_mismatch']} outputs and {bi['cache_mismatch']} cache writes differ bitwise"
                + ("" if bi_ok else f"  FIRST: {bi['first_bad']}"))
            if not bi_ok:
                failures.append("attention output not bitwise batch invariant")
        ds = ref.get("device_status")
        if ds is not None:
            say(f"  device status over {ds['calls']} kvattn calls: flags {ds['flags_or']:#x}, "
                f"failed {ds['failed_or']}")
            if ds["flags_or"] or ds["failed_or"]:
                failures.append("kvattn device status reported a skipped sequence")
        rep.put("inflight_checked", dict(steps=ref["steps"], mixed_steps=kinds["mixed"],
                                         decode_steps=kinds["decode"], attention_batch_invariance=bi,
                                         device_status=ds))

        # 2. against transformers' eager attention, teacher-forced on the inflight tokens
        section("[2] transformers eager attention, teacher forcing on the generated tokens")
        max_diff, flips, flips_unexplained, flips_beyond_bound, positions = 0.0, [], 0, 0, 0
        per_seq_diff, ref_logits, local_diff = [], {}, {}
        for i in range(args.n):
            hf = hf_teacher_forced_logits(model, prompts[i], ref["tokens"][i], device)
            ours = ref["logits"][i]
            ref_logits[i] = hf
            local_diff[i] = (hf - ours).abs().amax(dim=-1).tolist()
            d = max(local_diff[i])
            per_seq_diff.append(d)
            max_diff = max(max_diff, d)
            positions += hf.shape[0]
        for i in range(args.n):
            hf, toks = ref_logits[i], ref["tokens"][i]
            top2 = hf.topk(2, dim=-1)
            margin = (top2.values[:, 0] - top2.values[:, 1]).tolist()
            hf_arg = top2.indices[:, 0].tolist()
            for t in range(len(toks)):
                if toks[t] != hf_arg[t] and hf[t, toks[t]] != hf[t, hf_arg[t]]:  # exact ties are not flips
                    flips.append(dict(seq=i, pos=t, margin=margin[t], logit_diff_there=local_diff[i][t]))
                    flips_unexplained += margin[t] > max_diff
                    # a flip needs margin <= 2 * the largest logit difference at that position
                    flips_beyond_bound += margin[t] > 2 * local_diff[i][t]
        say(f"  {positions} generated positions of {args.n} sequences: largest |logit difference| {max_diff:.3g}"
            f" (median per sequence {sorted(per_seq_diff)[len(per_seq_diff) // 2]:.3g})")
        say(f"  greedy choice differs at {len(flips)} positions"
            + (" (top-2 margins there: %s)" % ", ".join("%.3g" % f["margin"] for f in flips[:8]) if flips else "")
            + f"; with a margin above the largest difference: {flips_unexplained} (must be 0)")
        if flips:
            say(f"  (a flip is possible only where the margin <= 2x the logit difference at that position; beyond "
                f"that bound: {flips_beyond_bound})")
        if flips_unexplained:
            failures.append("greedy choice differs where the top-2 margin exceeds the largest logit difference")

        # how large may the difference be? Both sides round in args.dtype; measure each one's error against the
        # exact (fp32) forward of the same weights: kvattn's loop must be no less accurate than transformers'
        # own eager forward in that dtype (this is what catches a wrong convention, e.g. the rotary pairing)
        m32 = model if dtype == torch.float32 else copy.deepcopy(model).to(torch.float32)
        err_ours = err_hf = ref_scale = 0.0
        for i in range(args.n):
            exact = hf_teacher_forced_logits(m32, prompts[i], ref["tokens"][i], device)
            err_ours = max(err_ours, float((ref["logits"][i] - exact).abs().max()))
            err_hf = max(err_hf, float((ref_logits[i] - exact).abs().max()))
            ref_scale = max(ref_scale, float(exact.abs().max()))
        del m32
        bound = 2.0 * err_hf + 1e-4 * ref_scale
        accurate = err_ours <= bound
        say(f"  error against the fp32 forward of the same weights: kvattn loop {err_ours:.3g}, transformers eager "
            f"{args.dtype} {err_hf:.3g} (largest |logit| {ref_scale:.3g}); bound 2 x transformers' + 1e-4 x "
            f"largest = {bound:.3g}: {'ok' if accurate else 'EXCEEDED'}")
        if not accurate:
            failures.append("logits less accurate than transformers' own forward in the same dtype")
        rep.put("vs_transformers_eager", dict(positions=positions, max_abs_logit_diff=max_diff,
                                              error_vs_fp32=dict(kvattn_loop=err_ours, transformers_eager=err_hf,
                                                                 largest_abs_logit=ref_scale, bound=bound,
                                                                 within_bound=accurate),
                                              greedy_flips=len(flips), flips=flips[:50],
                                              flips_with_margin_above_max_diff=flips_unexplained,
                                              flips_with_margin_above_2x_local_diff=flips_beyond_bound))

        # 3. token for token against transformers' own greedy generate()
        section("[3] transformers greedy generate(), token for token")
        hf_single = []
        for i in range(args.n):  # one prompt at a time: no padding, eager attention (the model's reference path)
            toks, _ = hf_generate(model, [prompts[i]], [max_news[i]], device, 1)
            hf_single.append(toks[0])
        match_single = [hf_single[i] == ref["tokens"][i] for i in range(args.n)]
        divergences = []
        for i in range(args.n):
            if not match_single[i]:
                t = next((j for j, (a, b) in enumerate(zip(hf_single[i], ref["tokens"][i])) if a != b),
                         min(len(hf_single[i]), len(ref["tokens"][i]) - 1))
                v = ref_logits[i][t].topk(2).values
                divergences.append(dict(seq=i, first_diff_pos=t, top2_margin_there=float(v[0] - v[1])))
        say(f"  generate() one prompt at a time (eager): {sum(match_single)}/{args.n} sequences identical"
            + (f"; first divergences: {divergences[:6]}" if divergences else ""))

        set_attn_implementation(model, "sdpa")
        hf_generate(model, prompts[:2], [2, 2], device, args.slots)  # warm-up
        best_hf, hf_batched = None, None
        for _ in range(args.repeats):
            toks, secs = hf_generate(model, prompts, max_news, device, args.slots)
            if best_hf is None or secs < best_hf:
                best_hf, hf_batched = secs, toks
        set_attn_implementation(model, "eager")
        match_batched = sum(hf_batched[i] == ref["tokens"][i] for i in range(args.n))
        say(f"  generate() padded batches of {args.slots} (sdpa): {match_batched}/{args.n} sequences identical")
        rep.put("vs_transformers_generate", dict(single_eager_matches=sum(match_single), n=args.n,
                                                 divergences=divergences,
                                                 padded_batched_sdpa_matches=match_batched))

        # 4. speed: the inflight loop (without checks) vs padded batched generate()
        section("[4] speed")
        run_inflight(eng, work[:min(4, args.n)], args.slots, new_cache(), timing=True)  # warm-up
        timed = {}
        for bi_flag in (True, False):
            best = None
            for _ in range(args.repeats):
                r = run_inflight(eng, work, args.slots, new_cache(), batch_invariant=bi_flag, timing=True)
                if best is None or r["wall_s"] < best["wall_s"]:
                    best = r
            same = all(best["tokens"][i] == ref["tokens"][i] for i in range(args.n))
            mixed = [ms for ms, k in zip(best["attn_ms"], best["step_kinds"]) if k == "mixed"]
            decode = [ms for ms, k in zip(best["attn_ms"], best["step_kinds"]) if k == "decode"]
            timed["batch_invariant" if bi_flag else "default"] = dict(
                wall_s=best["wall_s"], tokens_per_s=gen_tokens / best["wall_s"], steps=best["steps"],
                step_ms=1e3 * best["wall_s"] / best["steps"],
                attention_ms_per_step=summarize_ms(best["attn_ms"]),
                attention_ms_mixed_steps=summarize_ms(mixed), attention_ms_decode_steps=summarize_ms(decode),
                attention_share_of_wall=sum(best["attn_ms"]) / (1e3 * best["wall_s"]),
                tokens_same_as_checked_run=same,
                per_step=dict(kind=best["step_kinds"], tokens=best["step_tokens"],
                              attention_ms=[round(x, 4) for x in best["attn_ms"]]))
        hf_tps = gen_tokens / best_hf
        for name, t in timed.items():
            a = t["attention_ms_per_step"]
            say(f"  inflight kvattn ({name}): {t['tokens_per_s']:.0f} tokens/s ({t['wall_s']:.3f} s, {t['steps']} "
                f"steps, {t['step_ms']:.2f} ms/step); attention {a['mean']:.3f} ms/step mean "
                f"({100 * t['attention_share_of_wall']:.1f}% of the wall time; decode-only steps "
                f"{(t['attention_ms_decode_steps'] or {}).get('mean', float('nan')):.3f} ms, steps with a prefill "
                f"{(t['attention_ms_mixed_steps'] or {}).get('mean', float('nan')):.3f} ms)")
        say(f"  transformers generate() (sdpa, padded batches of {args.slots}): {hf_tps:.0f} tokens/s "
            f"({best_hf:.3f} s); inflight is {timed['batch_invariant']['tokens_per_s'] / hf_tps:.2f}x")
        rep.put("speed", dict(generated_tokens=gen_tokens, inflight=timed,
                              transformers_generate=dict(wall_s=best_hf, tokens_per_s=hf_tps,
                                                         attn_implementation="sdpa", batch=args.slots),
                              speedup=timed["batch_invariant"]["tokens_per_s"] / hf_tps,
                              note="tokens/s counts each request's own max_new tokens (the useful tokens); "
                                   "best of %d runs; attention time from CUDA events around the kvattn calls"
                                   % args.repeats))

        # 5. whole-model log-probs: batched vs each sequence alone
        section("[5] whole-model per-token log-probs: in the batch vs each sequence alone (batch_invariant=True)")
        wm = whole_model_invariance(eng, work, args, ref, new_cache, fixed_rows=0)
        say(f"  run to run: the batched replay's log-probs are "
            f"{'bitwise equal' if wm['batched_replay_bitwise_equal_to_checked_run'] else 'NOT bitwise equal'} to "
            f"the checked run's")
        if not wm["batched_replay_bitwise_equal_to_checked_run"]:
            warnings.append("the same batches gave different log-probs run to run (torch ops or kvattn)")
        say(f"  plain torch ops: {wm['bitwise_equal_positions']}/{wm['positions']} log-probs bitwise equal, "
            f"{wm['sequences_all_equal']}/{args.n} sequences entirely; largest difference {wm['max_abs_diff']:.3g}")
        result5 = dict(plain=wm)
        if args.fixed_rows:
            wf = whole_model_invariance(eng, work, args, ref, new_cache, fixed_rows=args.fixed_rows)
            say(f"  every matmul and row reduction on fixed chunks of {args.fixed_rows} rows: "
                f"{wf['bitwise_equal_positions']}/{wf['positions']} bitwise equal, {wf['sequences_all_equal']}/"
                f"{args.n} sequences entirely; largest difference {wf['max_abs_diff']:.3g}; the batched replay took "
                f"{wf['batched_replay_wall_s'] / wm['batched_replay_wall_s']:.2f}x the time of plain ops (untuned)")
            result5["fixed_rows"] = dict(wf, rows=args.fixed_rows)
        result5["explanation"] = (
            "kvattn's attention is bitwise batch invariant (section 1). The rest of the model is PyTorch: a matmul's "
            "kernel (and so its reduction order) is picked from the shape, and the number of rows is the batch's "
            "total tokens, so a row's result can change with what else is in the batch; row reductions (RMSNorm, "
            "log_softmax) can too. Bitwise equal log-probs need batch-invariant matmul/RMSNorm/softmax kernels "
            "(fixed tiling, no split-K chosen by the row count), e.g. by running every op on fixed-shape row chunks "
            "as the fixed_rows experiment does, at the cost of padding.")
        rep.put("whole_model_logprobs", result5)

        # 6. without batch_invariant: does a sequence's attention output depend on the batch? (information)
        if args.bi_check_every:
            section("[6] attention without batch_invariant")
            r = run_inflight(eng, work, args.slots, new_cache(), batch_invariant=False,
                             bi_check_every=args.bi_check_every)
            b6 = r["bi"]
            say(f"  (information) {b6['out_mismatch']}/{b6['checked']} attention "
                f"outputs differ bitwise from the same call alone")
            rep.put("attention_without_batch_invariant", b6)

    # 7. CUDA graphs for the decode-only steps
    emulate = args.cuda_graphs == "emulate"
    use_graphs = args.cuda_graphs in ("on", "emulate") or (args.cuda_graphs == "auto" and device.type == "cuda")
    if use_graphs:
        section("[7] CUDA graphs for decode-only steps" + (" (emulated: eager forward)" if emulate else ""))
        try:
            with torch.no_grad():
                graphs = DecodeGraphs(eng, new_cache(), args.slots, True, emulate=emulate)
                best = None
                for _ in range(args.repeats + 1):  # the first run is a warm-up
                    r = run_inflight_graphs(eng, work, args.slots, graphs)
                    if best is None or r["wall_s"] < best["wall_s"]:
                        best = r
            same = sum(best["tokens"][i] == ref["tokens"][i] for i in range(args.n))
            tps = gen_tokens / best["wall_s"]
            say(f"  {tps:.0f} tokens/s ({best['wall_s']:.3f} s; {best['replayed']}/{best['steps']} steps replayed "
                f"from {len(graphs.graphs)} graphs), vs {timed['batch_invariant']['tokens_per_s']:.0f} eager; "
                f"{same}/{args.n} sequences identical to the checked run")
            rep.put("cuda_graphs", dict(tokens_per_s=tps, wall_s=best["wall_s"], steps=best["steps"],
                                        replayed_steps=best["replayed"], graphs=len(graphs.graphs),
                                        sequences_same_as_checked_run=same,
                                        speedup_vs_eager=tps / timed["batch_invariant"]["tokens_per_s"]))
        except Exception as e:  # optional: never lose the report over it
            say(f"  CUDA graphs failed: {type(e).__name__}: {e}")
            rep.put("cuda_graphs", dict(error=f"{type(e).__name__}: {e}", traceback=traceback.format_exc()))

    rep.put("failures", failures)
    rep.put("warnings", warnings)
    for w in warnings:
        say(f"warning: {w}")
    rep.put("elapsed_s", time.perf_counter() - _T0)
    summary = summarize(rep.data)
    rep.put("summary", summary)
    section("summary")
    for k, v in summary.items():
        say(f"  {k}: {v}")
    say("\nresult: " + ("all checks passed" if not failures else "FAILED: " + "; ".join(failures)))
    if args.out:
        say(f"report written to {args.out}")
    return 1 if failures else 0


def summarize(d):
    """The headline figures of the report, as short strings (what the README quotes)."""
    out = {}
    st = d.get("setup", {})
    out["setup"] = (f"{st.get('device_name')} {st.get('dtype')}, Llama {st.get('model', {}).get('layers')} layers "
                    f"hidden {st.get('model', {}).get('hidden')}, {st.get('workload', {}).get('n')} prompts, "
                    f"{st.get('workload', {}).get('slots')} slots, pages of {st.get('page_size')}")
    sp = d.get("speed")
    if sp:
        bi, df = sp["inflight"]["batch_invariant"], sp["inflight"]["default"]
        out["tokens/s"] = (f"inflight kvattn {bi['tokens_per_s']:.0f} (batch_invariant) / {df['tokens_per_s']:.0f} "
                           f"(default) vs transformers generate() {sp['transformers_generate']['tokens_per_s']:.0f} "
                           f"-> {sp['speedup']:.2f}x")
        a = bi["attention_ms_per_step"]
        out["attention per step"] = (f"{a['mean']:.3f} ms mean of a {bi['step_ms']:.2f} ms step "
                                     f"({100 * bi['attention_share_of_wall']:.1f}%), {bi['steps']} steps")
    g = d.get("cuda_graphs")
    if g and "tokens_per_s" in g:
        out["cuda graphs"] = (f"{g['tokens_per_s']:.0f} tokens/s ({g['speedup_vs_eager']:.2f}x eager), "
                              f"{g['replayed_steps']}/{g['steps']} steps replayed")
    elif g:
        out["cuda graphs"] = "failed: " + g.get("error", "?")
    v = d.get("vs_transformers_eager")
    if v:
        e = v["error_vs_fp32"]
        out["vs transformers eager"] = (f"max |logit diff| {v['max_abs_logit_diff']:.3g} over {v['positions']} "
                                        f"positions; greedy flips {v['greedy_flips']}, unexplained "
                                        f"{v['flips_with_margin_above_max_diff']}; error vs fp32 {e['kvattn_loop']:.3g} "
                                        f"(transformers {e['transformers_eager']:.3g})")
    gen = d.get("vs_transformers_generate")
    if gen:
        out["matches generate()"] = (f"{gen['single_eager_matches']}/{gen['n']} (one prompt at a time, eager), "
                                     f"{gen['padded_batched_sdpa_matches']}/{gen['n']} (padded batches, sdpa)")
    c = d.get("inflight_checked", {}).get("attention_batch_invariance")
    if c and c.get("checked"):
        out["attention batch invariance"] = (f"{c['checked']} calls re-run alone, {c['out_mismatch']} outputs / "
                                             f"{c['cache_mismatch']} cache writes differ")
    w = d.get("whole_model_logprobs")
    if w:
        p = w["plain"]
        txt = f"plain torch {p['bitwise_equal_positions']}/{p['positions']} bitwise equal"
        if "fixed_rows" in w:
            f = w["fixed_rows"]
            txt += f"; fixed {f['rows']}-row chunks {f['bitwise_equal_positions']}/{f['positions']}"
        out["whole-model log-probs batched vs alone"] = txt
    return out


def whole_model_invariance(eng, work, args, ref, new_cache, fixed_rows):
    """Replays the checked run's tokens (teacher forcing) once in the batch and once with each sequence alone
    (one slot), and compares every generated token's log-prob bitwise."""
    eng.fixed_rows = fixed_rows
    try:
        forced = ref["tokens"]
        batched = run_inflight(eng, work, args.slots, new_cache(), batch_invariant=True, forced=forced, record=True)
        alone = run_inflight(eng, work, 1, new_cache(), batch_invariant=True, forced=forced, record=True)
    finally:
        eng.fixed_rows = 0
    equal = total = seq_equal = 0
    max_diff = 0.0
    same_as_checked = all(torch.equal(bits(batched["logprobs"][i]), bits(ref["logprobs"][i]))
                          for i in range(len(work)))
    for i in range(len(work)):
        a, b = batched["logprobs"][i], alone["logprobs"][i]
        eq = bits(a) == bits(b)
        equal += int(eq.sum())
        total += a.numel()
        seq_equal += bool(eq.all())
        max_diff = max(max_diff, float((a - b).abs().max()))
    return dict(positions=total, bitwise_equal_positions=equal, sequences_all_equal=seq_equal,
                max_abs_diff=max_diff, batched_replay_bitwise_equal_to_checked_run=same_as_checked,
                batched_replay_wall_s=batched["wall_s"])


if __name__ == "__main__":
    sys.exit(main())
