#!/usr/bin/env python3
"""bench/compare.py — kvattn side by side with its peers on the GPU, one command (issue 5).

For each workload (decode grid, inflight mixed step, speculative verification, causal prefill, shared-prefix
group decode) it runs kvattn and every peer that can run the case: PyTorch's FlashAttention-2
(aten._flash_attention_forward, dense and varlen), cuDNN attention (SDPA), FlexAttention (dense, document
mask, and its PagedAttention for paged decode) and FlashInfer (paged decode/prefill wrappers on the same
page tables; ragged prefill). It checks every output against kvattn's on the same inputs, and kvattn's
against an fp32 reference; times each with CUDA events (warm-up, CUDA-graph replays when capturable,
median, inputs rotated past the 60 MB L2); measures the read and bf16 matmul ceilings in the same run; prints
a table and writes compare.json, table.txt and PNG plots under --out.

  python3 bench/compare.py --out DIR                    # the default matrix (~5 min of GPU time)
  python3 bench/compare.py --quick --out DIR            # smoke run
  python3 bench/compare.py --workloads decode --decode-full --out DIR
  python3 bench/compare.py --dry-run --out DIR          # no GPU: tiny cases, kvattn's CPU backend, plumbing only
Environment: KVATTN_LIBRARY / PYTHONPATH=python to find kvattn; FlashInfer is optional (bench/run_compare.sh
installs the carried wheels).
"""
import argparse
import datetime
import json
import math
import os
import platform
import queue
import statistics
import subprocess
import sys
import threading
import time
import traceback

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(1, os.path.join(os.path.dirname(HERE), "python"))

import compare_cases as cc  # noqa: E402
import compare_systems as cs  # noqa: E402

PEERS = ["fa2", "fa2-varlen", "cudnn", "flex", "flashinfer"]
TOL_REF = 1e-2     # kvattn vs fp32 reference, ||out - ref|| / ||ref|| (bf16 output)
TOL_PEER = 2e-2    # a peer vs kvattn (two bf16 roundings)


def log(*a):
    print(*a, flush=True)


def short(e, n=300):
    return cs._short(e, n)


# ---- arguments -----------------------------------------------------------------------------------------------

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", default=os.environ.get("OUT") or "compare-out", help="output folder (default $OUT)")
    p.add_argument("--quick", action="store_true", help="a few small cases of each workload (smoke run)")
    p.add_argument("--workloads", default="decode,inflight,spec,prefill,shared",
                   help="comma list of decode,inflight,spec,prefill,shared")
    p.add_argument("--systems", default="kvattn," + ",".join(PEERS),
                   help="comma list of systems to run (kvattn is always run: it is the reference of the checks)")
    p.add_argument("--decode-full", action="store_true",
                   help="the whole decode grid: 6 BxL x pages 1,16,256,contig x GQA 32/8,MHA 32/32 x D 64,128,256")
    p.add_argument("--bl", default="", help="decode BxL list, e.g. 64x4096,8x8192 (default: the 6 of issue 3)")
    p.add_argument("--pages", default="", help="decode page sizes, e.g. contig,16,1,256")
    p.add_argument("--heads", default="", help="decode heads H/Hk list, e.g. 32/8,32/32")
    p.add_argument("--dims", default="", help="decode head dims, e.g. 64,128,256")
    p.add_argument("--prefill-lens", default="1024,2048,4096,8192,16384")
    p.add_argument("--prefill-dims", default="64,128,256")
    p.add_argument("--seed", type=int, default=1234)
    p.add_argument("--rot-mb", type=float, default=256.0, help="rotate inputs until this many MB (> 60 MB L2)")
    p.add_argument("--min-batch-ms", type=float, default=1.0, help="each timed sample covers at least this long")
    p.add_argument("--time-ms", type=float, default=120.0, help="timed samples per system and case (ms total)")
    p.add_argument("--no-graph", action="store_true", help="time eager calls only (no CUDA-graph replays)")
    p.add_argument("--flex-budget", type=float, default=120.0, help="seconds of FlexAttention compiles, then skip")
    p.add_argument("--flashinfer-jit-budget", type=float, default=240.0,
                   help="seconds for FlashInfer's JIT builds (in a subprocess, overlapped with the other runs)")
    p.add_argument("--flashinfer-prefill-backend", default="auto", help="auto, fa2 or fa3")
    p.add_argument("--time-budget", type=float, default=0.0,
                   help="seconds for the whole run (0: none); past it the remaining cases are skipped, and the "
                        "outputs are still written (run_compare.sh sets it to fit the device's 10-minute limit)")
    p.add_argument("--dry-run", action="store_true",
                   help="no GPU: tiny versions of the cases on kvattn's CPU backend (checks the plumbing)")
    p.add_argument("--dry-peers", action="store_true",
                   help="with --dry-run: run the peers' wrappers on the CPU too (FA2 emulated, SDPA math, eager flex)")
    p.add_argument("--no-plots", action="store_true")
    p.add_argument("--fi-prebuild", default="", help=argparse.SUPPRESS)  # internal: JIT-build FlashInfer modules
    return p.parse_args(argv)


# ---- timing ------------------------------------------------------------------------------------------------

class Timer:
    def __init__(self, torch, args):
        self.torch, self.args = torch, args
        self.cuda = torch.cuda.is_available() and not args.dry_run

    def _sync(self):
        if self.cuda:
            self.torch.cuda.synchronize()

    def _elapsed_ms(self, fn):
        if not self.cuda:
            t = time.perf_counter()
            fn()
            return (time.perf_counter() - t) * 1e3
        s = self.torch.cuda.Event(enable_timing=True)
        e = self.torch.cuda.Event(enable_timing=True)
        s.record()
        fn()
        e.record()
        e.synchronize()
        return s.elapsed_time(e)

    def time(self, run, rot):
        """Median time of one call (ms), the samples, and how it was timed ('graph' or 'eager')."""
        torch, args = self.torch, self.args
        for r in range(rot):  # warm-up (compiles, workspaces, autotuning)
            run(r)
        self._sync()

        def loop(n):
            def f():
                for i in range(n):
                    run(i % rot)
            return f
        est = self._elapsed_ms(loop(rot)) / rot
        est = max(est, 1e-3)
        n_inner = rot * max(1, math.ceil(args.min_batch_ms / (est * rot)))
        n_inner = min(n_inner, max(rot, 4000))
        mode, graph_err, runner = "eager", None, loop(n_inner)
        if self.cuda and not args.no_graph:
            try:
                s = torch.cuda.Stream()
                s.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(s):
                    for r in range(min(rot, 2)):
                        run(r)
                torch.cuda.current_stream().wait_stream(s)
                torch.cuda.synchronize()
                g = torch.cuda.CUDAGraph()
                with torch.cuda.graph(g):
                    for i in range(n_inner):
                        run(i % rot)
                g.replay()
                torch.cuda.synchronize()
                runner, mode = g.replay, "graph"
                self._graph = g  # keep alive while timing
            except Exception as e:  # noqa: BLE001
                graph_err = short(e, 200)
                try:
                    torch.cuda.synchronize()
                except Exception:  # noqa: BLE001
                    pass
        reps = int(max(5, min(40, args.time_ms / max(est * n_inner, 1e-3))))
        if not self.cuda:
            reps = 2
        samples = [self._elapsed_ms(runner) / n_inner for _ in range(reps)]
        self._graph = None
        return statistics.median(samples), samples, mode, graph_err, n_inner


def ceilings(torch, dry):
    """Read ceiling (sum of a 4 GiB bf16 tensor) and bf16 matmul ceiling (8192^3), medians of 10."""
    if dry:
        return {"read_tbps": None, "matmul_tflops": None, "note": "dry run: no GPU"}
    out = {}
    x = torch.randn(1 << 31, device="cuda", dtype=torch.bfloat16)  # 4 GiB
    for _ in range(3):
        x.sum()
    torch.cuda.synchronize()
    ts = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        x.sum()
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    out["read_tbps"] = x.numel() * 2 / (statistics.median(ts) * 1e-3) / 1e12
    out["read_ms_samples"] = ts
    del x
    n = 8192
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16)
    for _ in range(3):
        a @ b
    torch.cuda.synchronize()
    ts = []
    for _ in range(10):
        s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        s.record()
        a @ b
        e.record()
        e.synchronize()
        ts.append(s.elapsed_time(e))
    out["matmul_tflops"] = 2 * n ** 3 / (statistics.median(ts) * 1e-3) / 1e12
    out["matmul_ms_samples"] = ts
    del a, b
    torch.cuda.empty_cache()
    return out


# ---- checks -------------------------------------------------------------------------------------------------

def rel_err(a, b):
    a, b = a.float(), b.float()
    if not bool(a.isfinite().all()):
        return float("nan")
    den = b.norm().item()
    return (a - b).norm().item() / max(den, 1e-30)


def check_kvattn(inp, out):
    """kvattn vs the fp32 reference on a few sequences (first, last, and two in between)."""
    seqs = sorted({0, inp.B - 1, inp.B // 3, (2 * inp.B) // 3})
    ref = inp.reference(0, seqs)
    errs = [rel_err(out[sl], o) for sl, o in ref.values()]
    worst = max(errs) if all(e == e for e in errs) else float("nan")
    return worst


# ---- dry run: tiny versions of the cases on the CPU ----------------------------------------------------------

def shrink(c):
    """A CPU-sized case of the same kind (same page size, ratio of heads, D, causal, shape of the batch)."""
    c = dict(c)
    G = c["H"] // c["Hk"]
    c["Hk"] = 2
    c["H"] = 2 * G if G <= 4 else 8
    c["Hk"] = c["H"] // G if c["H"] >= G else 1
    B = c["B"]
    if c["workload"] == "inflight":
        nb = 6
        c["n_q"] = [1] * (nb - 2) + [24, 24]
        c["n_new"] = list(c["n_q"])
        c["S"] = [37, 80, 129, 200] + [0, 0]
        c["B"] = nb
    elif c["workload"] == "prefill":
        L = max(16, c["L"] // 256)
        c["B"] = min(B, 3)
        c["n_q"] = [L] * c["B"]
        c["n_new"] = [L] * c["B"]
        c["S"] = [0] * c["B"]
        c["L"] = L
    else:
        nb = min(B, 3)
        L = max(40, min(c["L"], 40 + c["L"] // 512))
        nq = c["n_q"][0]
        sp = c.get("shared_prefix", 0)
        if sp:
            ps = c["page"] if c["page"] != "contig" else 16
            sp = 2 * ps
            c["shared_prefix"] = sp
            L = sp + 16
        c["B"] = nb
        c["n_q"] = [nq] * nb
        c["n_new"] = [c["n_new"][0]] * nb
        c["S"] = [L - c["n_new"][0]] * nb
        c["L"] = L
    c["name"] = "[dry] " + c["name"]
    return c


# ---- FlashInfer JIT prebuild (subprocess) --------------------------------------------------------------------

def tiny_case_for(key):
    kind, D = key
    if kind == "decode-tc":
        return cc.decode_case(2, 64, 16, 32, 8, D)
    if kind == "decode":
        return cc.decode_case(2, 64, 16, 32, 32, D)
    if kind == "cascade":
        return cc.shared_prefix_case(page=16, B=2, prefix=32, own=16, D=D)
    return cc.spec_case(page=16, B=2, nq=4, L=64, D=D)


def fi_prebuild_main(args):
    """Child process: build (by running a tiny case) each FlashInfer module in the list; print READY lines."""
    import torch
    keys = [tuple(k) for k in json.loads(args.fi_prebuild)]
    try:
        fi = cs.FlashInfer(torch, "cuda", ready=None, prefill_backend=args.flashinfer_prefill_backend)
    except Exception as e:  # noqa: BLE001
        print("FAILED import", short(e), flush=True)
        return 1
    backends = [args.flashinfer_prefill_backend]
    if backends[0] == "auto":
        backends.append("fa2")  # if the auto choice (fa3 on Hopper) fails to build or run, FlashInfer's FA2 path
    for key in keys:
        t = time.time()
        for backend in backends:
            fi.prefill_backend = backend
            try:
                case = tiny_case_for(key)
                inp = cc.Inputs(case, "cuda", 1, 0)
                run = cs.FlashInferCascade(fi).prepare(inp) if key[0] == "cascade" else fi.prepare(inp)
                run(0)
                if key[0] == "prefill":  # the ragged prefill path too (same module)
                    pc = cc.prefill_case(64, key[1], total=128)
                    fi.prepare(cc.Inputs(pc, "cuda", 1, 0))(0)
                torch.cuda.synchronize()
                print("READY", json.dumps(list(key) + [backend], separators=(",", ":")), round(time.time() - t, 1), flush=True)
                break
            except Exception as e:  # noqa: BLE001
                print("FAILED", json.dumps(list(key) + [backend], separators=(",", ":")), short(e, 500), flush=True)
    return 0


class Prebuild:
    """Runs fi_prebuild_main in a subprocess, in parallel with the other systems' runs."""

    def __init__(self, keys, args):
        self.ready, self.failed, self.lines = {}, {}, []
        self.deadline = time.time() + args.flashinfer_jit_budget
        env = dict(os.environ)
        env.setdefault("MAX_JOBS", str(max(1, (os.cpu_count() or 4) - 2)))
        env.setdefault("FLASHINFER_LOGGING_LEVEL", "error")
        cmd = [sys.executable, os.path.abspath(__file__), "--fi-prebuild", json.dumps([list(k) for k in keys]),
               "--flashinfer-prefill-backend", args.flashinfer_prefill_backend, "--out", args.out]
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env,
                                     cwd=os.getcwd())
        self.q = queue.Queue()
        self.t = threading.Thread(target=self._reader, daemon=True)
        self.t.start()
        self.n = len(keys)

    def _reader(self):
        for line in self.proc.stdout:
            self.q.put(line.rstrip("\n"))
        self.q.put(None)

    def _drain(self, timeout):
        end = time.time() + max(0.0, timeout)
        while True:
            try:
                line = self.q.get(timeout=max(0.01, end - time.time()))
            except queue.Empty:
                return False
            if line is None:
                return True
            self.lines.append(line)
            if line.startswith("READY "):
                parts = line.split(" ", 2)
                kind, d, backend = json.loads(parts[1])
                self.ready[(kind, d)] = backend
                log(f"  [flashinfer JIT] ready {kind} D={d} backend={backend} ({parts[2].split()[-1]} s)")
            elif line.startswith("FAILED "):
                parts = line.split(" ", 2)
                self.failed[parts[1]] = parts[2] if len(parts) > 2 else ""
                log(f"  [flashinfer JIT] failed {parts[1]}: {self.failed[parts[1]][:300]}")
            if time.time() >= end:
                return False

    def poll(self):
        self._drain(0.0)

    def finish(self):
        done = self._drain(self.deadline - time.time())
        if not done and self.proc.poll() is None:
            log(f"  [flashinfer JIT] budget spent; stopping the build (pid {self.proc.pid})")
            self.proc.kill()
        try:
            self.proc.wait(timeout=30)
        except Exception:  # noqa: BLE001
            pass
        tail = [ln for ln in self.lines if not ln.startswith(("READY", "FAILED"))][-20:]
        return tail


# ---- one case ------------------------------------------------------------------------------------------------

def metrics(res, floors, ceil):
    t = res["time_ms"] * 1e-3
    res["time_us"] = res["time_ms"] * 1e3
    res["tbps"] = floors["bytes"] / t / 1e12
    res["tflops"] = floors["flops"] / t / 1e12
    if ceil.get("read_tbps"):
        res["frac_read"] = res["tbps"] / ceil["read_tbps"]
    if ceil.get("matmul_tflops"):
        res["frac_matmul"] = res["tflops"] / ceil["matmul_tflops"]


def run_system(sysobj, inp, timer, kv_out, floors, ceil, torch):
    """Prepare, check against kvattn's output, time. Returns the result dict."""
    t0 = time.time()
    try:
        return _run_system(sysobj, inp, timer, kv_out, floors, ceil, torch, t0)
    finally:
        if isinstance(sysobj, cs.Flex):
            sysobj.spent_s += time.time() - t0


def _run_system(sysobj, inp, timer, kv_out, floors, ceil, torch, t0):
    res = {"status": "ok"}
    try:
        run = sysobj.prepare(inp)
    except cs.Unsupported as e:
        return {"status": "unsupported", "reason": str(e)}
    except Exception as e:  # noqa: BLE001
        return {"status": "error", "reason": "prepare: " + short(e), "trace": traceback.format_exc()[-2000:]}
    note = getattr(run, "note", None)
    if note:
        res["note"] = note
    try:
        o = run(0)
        if timer.cuda:
            torch.cuda.synchronize()
        res["err_vs_kvattn"] = rel_err(o, kv_out) if kv_out is not None else None
        e = res["err_vs_kvattn"]
        res["check"] = "no-kvattn" if e is None else ("ok" if e == e and e <= TOL_PEER else "MISMATCH")
        del o
    except Exception as e:  # noqa: BLE001
        return {"status": "error", "reason": "first call: " + short(e), "trace": traceback.format_exc()[-2000:]}
    try:
        med, samples, mode, gerr, n_inner = timer.time(run, inp.rot)
    except Exception as e:  # noqa: BLE001
        return {"status": "error", "reason": "timing: " + short(e), "trace": traceback.format_exc()[-2000:],
                "check": res.get("check"), "err_vs_kvattn": res.get("err_vs_kvattn")}
    res.update(time_ms=med, samples_ms=samples, mode=mode, calls_per_sample=n_inner, rotations=inp.rot,
               wall_s=round(time.time() - t0, 2))
    if gerr:
        res["graph_error"] = gerr
    metrics(res, floors, ceil)
    return res


def run_kvattn(kv, inp, timer, torch, floors, ceil, do_time=True):
    res = {"status": "ok"}
    try:
        run = kv.prepare(inp)
        # poison the output, run once, check every row was written and matches the reference
        run(0).fill_(float("nan"))
        out = run(0)
        if timer.cuda:
            torch.cuda.synchronize()
        if not bool(out.isfinite().all()):
            res["check"] = "UNWRITTEN/NaN"
        err = check_kvattn(inp, out)
        res["err_vs_ref"] = err
        res.setdefault("check", "ok" if err == err and err <= TOL_REF else "MISMATCH")
        out = out.clone()
    except Exception as e:  # noqa: BLE001
        return {"status": "error", "reason": short(e), "trace": traceback.format_exc()[-2000:]}, None
    if do_time:
        try:
            med, samples, mode, gerr, n_inner = timer.time(run, inp.rot)
            res.update(time_ms=med, samples_ms=samples, mode=mode, calls_per_sample=n_inner, rotations=inp.rot)
            if gerr:
                res["graph_error"] = gerr
            metrics(res, floors, ceil)
        except Exception as e:  # noqa: BLE001
            res.update(status="error", reason="timing: " + short(e), trace=traceback.format_exc()[-2000:])
    return res, out


# ---- table ---------------------------------------------------------------------------------------------------

def fmt_row(case, sysname, r, kv_time):  # noqa: ARG001
    if r.get("status") != "ok":
        return f"  {sysname:<18} {r.get('status', '?'):<11} {r.get('reason', '')[:150]}"
    ratio = (r["time_ms"] / kv_time) if kv_time else float("nan")
    err = r.get("err_vs_kvattn", r.get("err_vs_ref"))
    chk = r.get("check", "")
    fr = r.get("frac_read")
    fm = r.get("frac_matmul")
    s = (f"  {sysname:<18} {r['time_us']:>10.1f} us {r['tbps']:>6.2f} TB/s {('%5.1f%%' % (100 * fr)) if fr else '   - '}"
         f" {r['tflops']:>7.1f} TF/s {('%5.1f%%' % (100 * fm)) if fm else '   - '}  x{ratio:>5.2f}"
         f"  {chk:<8} {('%.1e' % err) if err is not None else '-':>8}  {r.get('mode', '')}")
    if r.get("note"):
        s += f"  ({r['note']})"
    return s


TABLE_HEAD = ("  system           time        bytes/t  %read    FLOP/t  %mm    t/t_kvattn check     err    "
              "timing")


def case_table(case):
    lines = [f"{case['name']}   [floor: {case['floors']['bytes'] / 1e6:.1f} MB, "
             f"{case['floors']['flops'] / 1e9:.2f} GFLOP]"]
    kv = case["results"].get("kvattn", {})
    kv_time = kv.get("time_ms") if kv.get("status") == "ok" else None
    for name, r in case["results"].items():
        lines.append(fmt_row(case, name, r, kv_time))
    return "\n".join(lines)


# ---- main ----------------------------------------------------------------------------------------------------

def main(argv=None):
    args = parse_args(argv)
    if args.fi_prebuild:
        return fi_prebuild_main(args)
    import torch
    os.makedirs(args.out, exist_ok=True)
    cuda = torch.cuda.is_available() and not args.dry_run
    if not cuda and not args.dry_run:
        log("compare.py: no CUDA device; use --dry-run to check the plumbing on the CPU")
        return 2
    device = "cuda" if cuda else "cpu"
    wanted = set(args.systems.split(",")) | {"kvattn"}
    t_start = time.time()
    meta = {"date": datetime.datetime.now().isoformat(timespec="seconds"), "host": platform.node(),
            "python": platform.python_version(), "torch": torch.__version__, "argv": sys.argv[1:],
            "dry_run": bool(args.dry_run), "tol_ref": TOL_REF, "tol_peer": TOL_PEER}
    if cuda:
        prop = torch.cuda.get_device_properties(0)
        meta.update(device=prop.name, sms=prop.multi_processor_count, cuda=torch.version.cuda,
                    cudnn=torch.backends.cudnn.version(), mem_gib=round(prop.total_memory / 2 ** 30, 1))
    log(f"compare.py: {meta.get('device', 'CPU (dry run)')}, torch {torch.__version__}, out={args.out}")

    cases = cc.select_cases(args)
    if args.dry_run:
        cases = [shrink(c) for c in cases]
    for c in cases:
        c["floors"] = cc.case_floors(c)
        c["results"] = {}
    log(f"{len(cases)} cases: " + ", ".join(sorted({c['workload'] for c in cases})))

    # systems (each one guarded: a peer that cannot load is listed with the reason)
    systems, sysinfo = {}, {}

    def add(name, ctor):
        if name not in wanted:
            sysinfo[name] = {"available": False, "reason": "not selected (--systems)"}
            return
        if not cuda and name != "kvattn" and not (args.dry_peers and name in ("fa2", "fa2-varlen", "cudnn", "flex")):
            sysinfo[name] = {"available": False, "reason": "no CUDA device (dry run)"}
            return
        try:
            obj = ctor()
            systems[name] = obj
            sysinfo[name] = {"available": True, "version": getattr(obj, "version", None)}
        except Exception as e:  # noqa: BLE001
            sysinfo[name] = {"available": False, "reason": short(e)}
            log(f"  {name}: unavailable: {short(e)}")

    add("kvattn", lambda: cs.Kvattn(torch))
    if "kvattn" in systems:
        try:
            sysinfo["kvattn"]["library"] = systems["kvattn"].mod.library_path()
            sysinfo["kvattn"]["cuda_available"] = bool(systems["kvattn"].mod.cuda_available())
        except Exception:  # noqa: BLE001
            pass
        if cuda and not sysinfo["kvattn"].get("cuda_available", True):
            log("  kvattn: the loaded library has no CUDA backend (built without nvcc?)")
    emu = cs.fa2_emulation(torch) if not cuda else None
    add("fa2", lambda: cs.FA2(torch, op=emu))
    add("fa2-varlen", lambda: cs.FA2Varlen(torch, op=emu))
    add("cudnn", lambda: cs.CuDNN(torch, cpu_math=not cuda))
    add("flex", lambda: cs.Flex(torch, args.flex_budget, compiled=cuda))

    # FlashInfer: import here (cheap); its JIT builds run in a subprocess while the others are timed
    prebuild = None
    if "flashinfer" in wanted and cuda:
        try:
            import flashinfer  # noqa: F401
            keys = []
            for c in cases:
                for k in cs.FlashInfer.module_keys(c) + cs.FlashInfer.extra_keys(c):
                    if tuple(k) not in keys:
                        keys.append(tuple(k))
            # the headline shapes first
            keys.sort(key=lambda k: (k[1] != 128, k[0] in ("decode", "cascade"), k[1]))
            log(f"  flashinfer {flashinfer.__version__}: building {len(keys)} JIT modules in the background "
                f"(budget {args.flashinfer_jit_budget:.0f} s): {keys}")
            prebuild = Prebuild(keys, args)
            sysinfo["flashinfer"] = {"available": True, "version": flashinfer.__version__, "jit_modules": keys}
        except Exception as e:  # noqa: BLE001
            sysinfo["flashinfer"] = {"available": False, "reason": short(e)}
            log(f"  flashinfer: unavailable: {short(e)}")
    else:
        add("flashinfer", lambda: None)

    ceil = ceilings(torch, not cuda)
    if cuda:
        log(f"ceilings: read {ceil['read_tbps']:.2f} TB/s (sum of 4 GiB bf16), matmul {ceil['matmul_tflops']:.0f} "
            f"TFLOP/s (bf16 8192^3)")
    timer = Timer(torch, args)
    if "kvattn" in systems and cuda:
        systems["kvattn"].reserve()

    rot_bytes = args.rot_mb * 1e6 if cuda else 0
    order = ["fa2", "fa2-varlen", "cudnn", "flex"]
    budget_end = t_start + args.time_budget if args.time_budget > 0 else float("inf")
    # the FlashInfer pass needs time too: leave it a share of the budget
    main_end = budget_end - (0.25 * args.time_budget if prebuild is not None else 0)
    doc = {"meta": meta, "ceilings": ceil, "systems": sysinfo, "cases": cases}
    json_path = os.path.join(args.out, "compare.json")

    def save():
        meta["wall_s"] = round(time.time() - t_start, 1)
        try:
            with open(json_path + ".tmp", "w") as f:
                json.dump(doc, f, indent=1, default=str)
            os.replace(json_path + ".tmp", json_path)
            # the tables too, so that a run stopped by the device's time limit still leaves them
            with open(os.path.join(args.out, "table.txt"), "w") as f:
                f.write(summary(doc) + "\n")
            with open(os.path.join(args.out, "summary.md"), "w") as f:
                f.write(markdown_summary(doc))
        except Exception as e:  # noqa: BLE001
            log("writing compare.json / table.txt / summary.md failed: " + short(e))

    for i, c in enumerate(cases):
        if time.time() > main_end:
            c["error"] = "skipped: --time-budget spent"
            continue
        seed = args.seed + 7919 * i
        try:
            inp = cc.Inputs(c, device, seed, rot_bytes)
        except Exception as e:  # noqa: BLE001
            c["error"] = "inputs: " + short(e)
            log(f"[{i + 1}/{len(cases)}] {c['name']}: inputs failed: {short(e)}")
            continue
        c["rotations"] = inp.rot
        kv_out = None
        if "kvattn" in systems:
            c["results"]["kvattn"], kv_out = run_kvattn(systems["kvattn"], inp, timer, torch, c["floors"], ceil)
        else:
            c["results"]["kvattn"] = {"status": "unavailable", "reason": sysinfo["kvattn"].get("reason")}
        for name in order:
            if name in systems:
                c["results"][name] = run_system(systems[name], inp, timer, kv_out, c["floors"], ceil, torch)
            else:
                c["results"][name] = {"status": "unavailable", "reason": sysinfo.get(name, {}).get("reason")}
            if prebuild:
                prebuild.poll()
        del inp, kv_out
        if cuda:
            torch.cuda.empty_cache()
        log(f"[{i + 1}/{len(cases)}] " + case_table(c))
        save()

    # FlashInfer pass: same inputs (same seeds), kvattn re-run once for the check
    if prebuild is not None:
        log("waiting for FlashInfer's JIT builds ...")
        prebuild.deadline = min(prebuild.deadline, budget_end - 0.2 * args.time_budget) \
            if args.time_budget > 0 else prebuild.deadline
        tail = prebuild.finish()
        sysinfo["flashinfer"]["jit_ready"] = {f"{k[0]} D{k[1]}": b for k, b in prebuild.ready.items()}
        sysinfo["flashinfer"]["jit_failed"] = prebuild.failed
        sysinfo["flashinfer"]["jit_log_tail"] = tail
        try:
            systems["flashinfer"] = cs.FlashInfer(torch, device, ready=prebuild.ready, failed=prebuild.failed,
                                                  prefill_backend=args.flashinfer_prefill_backend)
        except Exception as e:  # noqa: BLE001
            sysinfo["flashinfer"].update(available=False, reason=short(e))
        for i, c in enumerate(cases):
            if "flashinfer" not in systems:
                c["results"]["flashinfer"] = {"status": "unavailable", "reason": sysinfo["flashinfer"]["reason"]}
                continue
            if "error" in c:
                continue
            if time.time() > budget_end - 15:
                c["results"]["flashinfer"] = {"status": "skipped", "reason": "--time-budget spent"}
                continue
            seed = args.seed + 7919 * i
            try:
                inp = cc.Inputs(c, device, seed, rot_bytes)
                kv_out = None
                if "kvattn" in systems:
                    _, kv_out = run_kvattn(systems["kvattn"], inp, timer, torch, c["floors"], ceil, do_time=False)
                c["results"]["flashinfer"] = run_system(systems["flashinfer"], inp, timer, kv_out, c["floors"],
                                                        ceil, torch)
                if c.get("shared_prefix"):
                    c["results"]["flashinfer-cascade"] = run_system(cs.FlashInferCascade(systems["flashinfer"]),
                                                                    inp, timer, kv_out, c["floors"], ceil, torch)
                    log(fmt_row(c, "fi-cascade", c["results"]["flashinfer-cascade"],
                                c["results"].get("kvattn", {}).get("time_ms")))
                del inp, kv_out
                torch.cuda.empty_cache()
            except Exception as e:  # noqa: BLE001
                c["results"]["flashinfer"] = {"status": "error", "reason": short(e)}
            log(f"  {c['name']}:\n" + fmt_row(c, "flashinfer", c["results"]["flashinfer"],
                                              c["results"].get("kvattn", {}).get("time_ms")))
            save()
    elif "flashinfer" in wanted:
        for c in cases:
            c["results"]["flashinfer"] = {"status": "unavailable",
                                          "reason": sysinfo.get("flashinfer", {}).get("reason")}

    if cuda and time.time() < budget_end - 10:
        try:
            ceil["read_tbps_end"] = ceilings(torch, False)["read_tbps"]
        except Exception as e:  # noqa: BLE001
            ceil["read_tbps_end"] = None
            log("read ceiling (end) failed: " + short(e))
    save()
    path = json_path
    text = summary(doc)
    with open(os.path.join(args.out, "table.txt"), "w") as f:
        f.write(text + "\n")
    try:
        with open(os.path.join(args.out, "summary.md"), "w") as f:
            f.write(markdown_summary(doc))
    except Exception as e:  # noqa: BLE001
        log("summary.md failed: " + short(e))
    if not args.no_plots:
        try:
            import plot_compare
            for p in plot_compare.make_plots(doc, args.out):
                log(f"wrote {p}")
        except Exception as e:  # noqa: BLE001
            log("plots failed: " + short(e))
    log(text)
    log(f"wrote {path} ({meta['wall_s']} s)")
    bad = [(c["name"], n) for c in cases for n, r in c["results"].items()
           if r.get("check") not in (None, "ok", "no-kvattn")]
    if bad:
        log(f"{len(bad)} MISMATCH/unwritten results: " + "; ".join(f"{a}: {b}" for a, b in bad[:20]))
    return 0


def markdown_summary(doc):
    """summary.md: per-case kvattn vs its fastest peer, and where kvattn leads and trails (for docs/perf/)."""
    ceil, meta = doc["ceilings"], doc["meta"]
    out = [f"# kvattn vs peers — {meta.get('device', 'CPU dry run')}, {meta['date']}", ""]
    vers = ", ".join(f"{n} {s.get('version') or ''}".strip() for n, s in doc["systems"].items() if s.get("available"))
    out.append(f"torch {meta['torch']}, CUDA {meta.get('cuda')}, cuDNN {meta.get('cudnn')}; systems: {vers}.")
    un = [f"{n} ({s.get('reason')})" for n, s in doc["systems"].items() if not s.get("available")]
    if un:
        out.append(f"Unavailable: {'; '.join(un)}.")
    if ceil.get("read_tbps"):
        out.append(f"Ceilings measured in the same run: read {ceil['read_tbps']:.2f} TB/s (sum of a 4 GiB bf16 "
                   f"tensor), bf16 matmul {ceil['matmul_tflops']:.0f} TFLOP/s (8192^3).")
    out.append(f"Command: `python3 bench/compare.py {' '.join(meta.get('argv', []))}` ({meta.get('wall_s')} s).")
    out += ["", "| case | kvattn | of ceiling | fastest peer | peer time | kvattn speed-up | check |",
            "|---|---|---|---|---|---|---|"]
    leads, trails, bad = [], [], []
    for c in doc["cases"]:
        if "error" in c:
            out.append(f"| {c['name']} | {c['error']} | | | | | |")
            continue
        res = c["results"]
        kv = res.get("kvattn", {})
        for n, r in res.items():
            if r.get("check") not in (None, "ok", "no-kvattn"):
                bad.append(f"{c['name']}: {n} {r.get('check')} (err {r.get('err_vs_kvattn', r.get('err_vs_ref'))})")
        if not kv.get("time_ms"):
            out.append(f"| {c['name']} | {kv.get('status')}: {kv.get('reason', '')[:80]} | | | | | |")
            continue
        bw = c["workload"] != "prefill"
        perf = f"{kv['tbps']:.2f} TB/s" if bw else f"{kv['tflops']:.0f} TFLOP/s"
        frac = kv.get("frac_read" if bw else "frac_matmul")
        peers = [(r["time_ms"], n) for n, r in res.items() if n != "kvattn" and r.get("time_ms")]
        chk = kv.get("check", "")
        if peers:
            t, n = min(peers)
            sp = t / kv["time_ms"]
            out.append(f"| {c['name']} | {kv['time_us']:.1f} µs, {perf} | {('%.0f%%' % (100 * frac)) if frac else '-'} "
                       f"| {n} | {t * 1e3:.1f} µs | {sp:.2f}x | {chk} |")
            (leads if sp >= 1.0 else trails).append(f"{c['name']}: {sp:.2f}x vs {n}")
        else:
            out.append(f"| {c['name']} | {kv['time_us']:.1f} µs, {perf} | {('%.0f%%' % (100 * frac)) if frac else '-'} "
                       f"| none ran | | | {chk} |")
    out += ["", f"**kvattn leads** ({len(leads)} cases, speed-up over the fastest peer that ran):", ""]
    out += [f"- {x}" for x in leads] or ["- none"]
    out += ["", f"**kvattn trails** ({len(trails)} cases):", ""]
    out += [f"- {x}" for x in trails] or ["- none"]
    out += ["", "**Checks that failed** (output vs kvattn's, or kvattn vs the fp32 reference):", ""]
    out += [f"- {x}" for x in bad] or ["- none"]
    out += ["", "Peers that could not run a case are listed with the reason in table.txt and compare.json."]
    return "\n".join(out) + "\n"


def summary(doc):
    ceil, meta = doc["ceilings"], doc["meta"]
    lines = ["=" * 110,
             f"kvattn vs peers — {meta.get('device', 'CPU dry run')}, torch {meta['torch']}, {meta['date']}"]
    if ceil.get("read_tbps"):
        lines.append(f"ceilings: read {ceil['read_tbps']:.2f} TB/s (end of run: "
                     f"{(ceil.get('read_tbps_end') or float('nan')):.2f}), bf16 matmul {ceil['matmul_tflops']:.0f} TFLOP/s")
    lines.append("systems: " + "; ".join(
        f"{n} " + (str(s.get("version") or "") if s.get("available") else f"UNAVAILABLE ({s.get('reason')})")
        for n, s in doc["systems"].items()))
    lines.append("t/t_kvattn > 1: kvattn is faster.  check: output vs kvattn's (kvattn's own row: vs fp32 reference)")
    lines.append(TABLE_HEAD)
    for c in doc["cases"]:
        if "error" in c:
            lines.append(f"{c['name']}: {c['error']}")
            continue
        lines.append(case_table(c))
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
